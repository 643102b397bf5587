package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/slot"
)

// writeClusterKubeconfig writes ~/.kube/marina/<name>.kubeconfig as cluster
// creation would: kind's export, renamed, at server.
func writeClusterKubeconfig(t *testing.T, home, name, server string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kind-"+name] = &clientcmdapi.Cluster{Server: "https://0.0.0.0:7001", CertificateAuthorityData: []byte("ca")}
	cfg.AuthInfos["kind-"+name] = &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}
	cfg.Contexts["kind-"+name] = &clientcmdapi.Context{Cluster: "kind-" + name, AuthInfo: "kind-" + name}
	if err := kubeconfig.Rename(cfg, name); err != nil {
		t.Fatal(err)
	}
	if err := kubeconfig.SetServer(cfg, server); err != nil {
		t.Fatal(err)
	}
	if err := kubeconfig.WriteCluster(slot.KubeconfigPath(home, name), cfg); err != nil {
		t.Fatal(err)
	}
}

// writeUserKubeconfig writes a kubeconfig of the user's own at path with
// one context per name (exec auth, like a cloud provider's).
func writeUserKubeconfig(t *testing.T, path string, names ...string) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	for _, n := range names {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://" + n + ".example.com"}
		cfg.AuthInfos[n] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "gke-gcloud-auth-plugin", APIVersion: "client.authentication.k8s.io/v1beta1", InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode}}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n}
		cfg.CurrentContext = n
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	return data
}

func loadKubeconfig(t *testing.T, path string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestKubeconfigPathAndEnv(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".kube", "marina", "dev.kubeconfig")

	r := marina(t, home, nil, "kubeconfig", "path", "dev")
	if r.code != 0 || r.stdout != path+"\n" || !strings.Contains(r.stderr, "Warning: "+path+" does not exist") {
		t.Fatalf("path before create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	writeClusterKubeconfig(t, home, "dev", "https://192.168.105.3:7001")
	if r := marina(t, home, nil, "kc", "path", "dev"); r.code != 0 || r.stdout != path+"\n" || r.stderr != "" {
		t.Fatalf("path: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "kubeconfig", "env", "dev"); r.code != 0 || r.stdout != "export KUBECONFIG="+path+"\n" || r.stderr != "" {
		t.Fatalf("env: %d %q %q", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{
		{"kubeconfig", "path", "Dev_1"},
		{"kubeconfig", "env", "-x"},
		{"kubeconfig", "merge", strings.Repeat("a", 64)},
		{"kubeconfig", "remove", "a.b"},
		{"kubeconfig", "path"},
	} {
		if r := marina(t, home, nil, args...); r.code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, r.code, r.stderr)
		}
	}
	if r := marina(t, home, nil, "kubeconfig", "path", "Dev_1"); !strings.Contains(r.stderr, `cluster name "Dev_1" is not valid`) {
		t.Errorf("bad name message: %s", r.stderr)
	}
	if r := marina(t, home, nil, "--help"); !strings.Contains(r.stdout, "The lab:") || !strings.Contains(r.stdout[strings.Index(r.stdout, "The lab:"):], "kubeconfig") {
		t.Errorf("kubeconfig not listed under The lab:\n%s", r.stdout)
	}
}

func TestKubeconfigMergeUseRemove(t *testing.T) {
	home := t.TempDir()
	cfgPath := filepath.Join(home, ".kube", "config")
	orig := writeUserKubeconfig(t, cfgPath, "gke_acme_prod")
	writeClusterKubeconfig(t, home, "dev", "https://192.168.105.3:7001")

	r := marina(t, home, nil, "kubeconfig", "merge", "dev")
	if r.code != 0 || !strings.Contains(r.stdout, `Merged "dev" into `+cfgPath) || !strings.Contains(r.stdout, "Previous content saved to "+cfgPath+".marina.bak.") {
		t.Fatalf("merge: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	got := loadKubeconfig(t, cfgPath)
	if got.Contexts["dev"] == nil || got.Clusters["dev"].Server != "https://192.168.105.3:7001" || got.Contexts["gke_acme_prod"] == nil || got.CurrentContext != "gke_acme_prod" {
		t.Fatalf("after merge: contexts %v, current %q", got.Contexts, got.CurrentContext)
	}
	if bak := newestBackup(t, cfgPath); !bytes.Equal(bak, orig) {
		t.Error("backup does not hold the original")
	}
	if r := marina(t, home, nil, "kubeconfig", "merge", "dev"); r.code != 0 || !strings.Contains(r.stdout, `"dev" is already up to date`) {
		t.Errorf("second merge: %d %s", r.code, r.stdout)
	}

	r = marina(t, home, nil, "kubeconfig", "use", "dev", "-o", "json")
	var rep kubeconfig.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 0 || err != nil {
		t.Fatalf("use -o json: %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if want := (kubeconfig.Entry{Kind: kubeconfig.KindCurrentContext, Name: "dev", File: cfgPath}); len(rep.Changed) != 1 || rep.Changed[0] != want {
		t.Errorf("use changed %v, want %v", rep.Changed, want)
	}
	if c := loadKubeconfig(t, cfgPath).CurrentContext; c != "dev" {
		t.Errorf("current-context %q after use", c)
	}

	// remove: current-context goes back to what it was before use.
	r = marina(t, home, nil, "kubeconfig", "rm", "dev")
	if r.code != 0 || !strings.Contains(r.stdout, `Removed "dev" from `+cfgPath) || !strings.Contains(r.stdout, "Current context in "+cfgPath+": gke_acme_prod again") {
		t.Fatalf("remove: %d %s %s", r.code, r.stdout, r.stderr)
	}
	got = loadKubeconfig(t, cfgPath)
	if got.Contexts["dev"] != nil || got.Clusters["dev"] != nil || got.AuthInfos["dev"] != nil || got.CurrentContext != "gke_acme_prod" || got.Contexts["gke_acme_prod"] == nil {
		t.Errorf("after remove: contexts %v, current %q", got.Contexts, got.CurrentContext)
	}
	if r := marina(t, home, nil, "kubeconfig", "remove", "dev"); r.code != 0 || !strings.Contains(r.stdout, `Nothing of marina's named "dev"`) {
		t.Errorf("second remove: %d %s", r.code, r.stdout)
	}

	// A cluster without a kubeconfig.
	if r := marina(t, home, nil, "kubeconfig", "merge", "qa"); r.code != 1 || !strings.Contains(r.stderr, `cluster "qa" has no kubeconfig`) {
		t.Errorf("merge of an unknown cluster: %d %s", r.code, r.stderr)
	}
	noTemporaryFiles(t, filepath.Dir(cfgPath))
}

func TestKubeconfigConflictWithUsersEntry(t *testing.T) {
	home := t.TempDir()
	cfgPath := filepath.Join(home, ".kube", "config")
	orig := writeUserKubeconfig(t, cfgPath, "dev")
	writeClusterKubeconfig(t, home, "dev", "https://192.168.105.3:7001")

	r := marina(t, home, nil, "kubeconfig", "use", "dev")
	if r.code != 1 || !strings.Contains(r.stderr, `context "dev" in `+cfgPath) || !strings.Contains(r.stderr, "--overwrite") {
		t.Fatalf("use over the user's own dev: %d %s", r.code, r.stderr)
	}
	if data, _ := os.ReadFile(cfgPath); !bytes.Equal(data, orig) {
		t.Fatal("a refused merge changed the file")
	}
	r = marina(t, home, nil, "kubeconfig", "remove", "dev")
	if r.code != 0 || !strings.Contains(r.stderr, "Warning: left context \"dev\" in "+cfgPath) || !strings.Contains(r.stderr, "kubectl config delete-context dev") {
		t.Fatalf("remove of the user's own dev: %d %s", r.code, r.stderr)
	}
	r = marina(t, home, nil, "kubeconfig", "use", "dev", "--overwrite")
	if r.code != 0 || !strings.Contains(r.stdout, `Replaced your context "dev" in `+cfgPath+" (kept in "+cfgPath+".marina.state; marina kubeconfig remove dev puts it back)") {
		t.Fatalf("use --overwrite: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := loadKubeconfig(t, cfgPath); got.Clusters["dev"].Server != "https://192.168.105.3:7001" || got.AuthInfos["dev"].Exec != nil {
		t.Errorf("--overwrite did not replace the user's entries")
	}
	// Another run in between, then remove: the user's dev is back, as it was.
	if r := marina(t, home, nil, "kubeconfig", "merge", "dev"); r.code != 0 {
		t.Fatalf("merge: %d %s", r.code, r.stderr)
	}
	r = marina(t, home, nil, "kubeconfig", "remove", "dev")
	if r.code != 0 || !strings.Contains(r.stdout, `Put back your user "dev" in `+cfgPath) {
		t.Fatalf("remove after --overwrite: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if data, _ := os.ReadFile(cfgPath); !bytes.Equal(data, orig) {
		t.Errorf("after remove the file is not the user's original:\n%s", data)
	}
	if _, err := os.Stat(cfgPath + ".marina.state"); !os.IsNotExist(err) {
		t.Errorf("state file left behind: %v", err)
	}
}

// TestKubeconfigList: with a $KUBECONFIG list, entries go where kubectl
// would write them, and other files stay byte for byte.
func TestKubeconfigList(t *testing.T) {
	home := t.TempDir()
	global := filepath.Join(home, ".kube", "config")
	globalData := writeUserKubeconfig(t, global, "gke_acme_prod")
	missing := filepath.Join(home, "projects", "missing.yaml")
	proj := filepath.Join(home, "projects", "shop.yaml")
	projData := writeUserKubeconfig(t, proj, "shop-staging")
	writeClusterKubeconfig(t, home, "dev", "https://192.168.105.3:7001")
	env := []string{"KUBECONFIG=" + strings.Join([]string{missing, proj, global}, string(os.PathListSeparator))}

	// New entries and current-context: the first file that exists.
	r := marina(t, home, env, "kubeconfig", "use", "dev")
	if r.code != 0 || !strings.Contains(r.stdout, `Merged "dev" into `+proj) {
		t.Fatalf("use: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := loadKubeconfig(t, proj); got.Contexts["dev"] == nil || got.Contexts["shop-staging"] == nil || got.CurrentContext != "dev" {
		t.Errorf("%s: contexts %v current %q", proj, got.Contexts, got.CurrentContext)
	}
	if data, _ := os.ReadFile(global); !bytes.Equal(data, globalData) {
		t.Errorf("%s changed", global)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("%s was created", missing)
	}
	if bak := newestBackup(t, proj); !bytes.Equal(bak, projData) {
		t.Error("backup of the project file is wrong")
	}

	// Without $KUBECONFIG the same command works on ~/.kube/config only.
	if r := marina(t, home, nil, "kubeconfig", "merge", "dev"); r.code != 0 || !strings.Contains(r.stdout, `Merged "dev" into `+global) {
		t.Fatalf("merge into the global file: %d %s %s", r.code, r.stdout, r.stderr)
	}

	// Remove with the list: from every file of the list.
	r = marina(t, home, env, "kubeconfig", "remove", "dev", "-o", "json")
	var rep kubeconfig.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); r.code != 0 || err != nil || len(rep.Written) != 2 {
		t.Fatalf("remove: %d %v %+v %s", r.code, err, rep, r.stderr)
	}
	if got := loadKubeconfig(t, proj); got.Contexts["dev"] != nil || got.CurrentContext != "shop-staging" || got.Contexts["shop-staging"] == nil {
		t.Errorf("%s after remove: %v %q", proj, got.Contexts, got.CurrentContext)
	}
	if got := loadKubeconfig(t, global); got.Contexts["dev"] != nil || got.CurrentContext != "gke_acme_prod" {
		t.Errorf("%s after remove: %v %q", global, got.Contexts, got.CurrentContext)
	}
	noTemporaryFiles(t, filepath.Dir(proj))
	noTemporaryFiles(t, filepath.Dir(global))
}

func TestKubeconfigRefresh(t *testing.T) {
	home := t.TempDir()
	cfgPath := filepath.Join(home, ".kube", "config")
	writeUserKubeconfig(t, cfgPath, "gke_acme_prod")
	writeClusterKubeconfig(t, home, "dev", "https://192.168.105.3:7001")
	writeClusterKubeconfig(t, home, "qa", "https://192.168.105.3:7002")

	if r := marina(t, home, nil, "kubeconfig", "refresh", "--server", "https://192.168.105.9:7001"); r.code != 2 || !strings.Contains(r.stderr, "--server overrides the address of one cluster: give its NAME") {
		t.Errorf("--server without NAME: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "kubeconfig", "refresh", "dev", "--server", "192.168.105.9:7001"); r.code != 2 || !strings.Contains(r.stderr, "--server") {
		t.Errorf("bad --server: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "kubeconfig", "refresh", "dev", "qa"); r.code != 2 {
		t.Errorf("two names: %d %s", r.code, r.stderr)
	}
	if r := marina(t, home, nil, "kubeconfig", "refresh", "--help"); !strings.Contains(r.stdout, "--server") || !strings.Contains(r.stdout, "7000+N") || !strings.Contains(r.stdout, "exported again from the cluster") || strings.Contains(r.stdout, "for now") {
		t.Errorf("refresh --help does not explain the lookup, re-export and --server:\n%s", r.stdout)
	}

	if r := marina(t, home, nil, "kubeconfig", "merge", "dev"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := marina(t, home, nil, "kubeconfig", "refresh", "dev", "--server", "https://192.168.105.9:7001")
	if r.code != 0 || !strings.Contains(r.stdout, `Updated "dev" in `+cfgPath) {
		t.Fatalf("refresh dev: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if got := loadKubeconfig(t, slot.KubeconfigPath(home, "dev")); got.Clusters["dev"].Server != "https://192.168.105.9:7001" {
		t.Errorf("per-cluster server %q", got.Clusters["dev"].Server)
	}
	if got := loadKubeconfig(t, cfgPath); got.Clusters["dev"].Server != "https://192.168.105.9:7001" || got.CurrentContext != "gke_acme_prod" {
		t.Errorf("merged server %q, current %q", got.Clusters["dev"].Server, got.CurrentContext)
	}

	// qa was never merged: only its own file changes.
	before, _ := os.ReadFile(cfgPath)
	if r := marina(t, home, nil, "kubeconfig", "refresh", "qa", "--server", "https://192.168.105.9:7002"); r.code != 0 || strings.Contains(r.stdout, "Updated") {
		t.Fatalf("refresh qa: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if after, _ := os.ReadFile(cfgPath); !bytes.Equal(before, after) {
		t.Error("refresh of an unmerged cluster changed ~/.kube/config")
	}
	// gone has no kubeconfig: it must be exported again, which needs the
	// lab (running or not here, there is no cluster gone to export).
	if r := marina(t, home, nil, "kubeconfig", "refresh", "gone", "--server", "https://192.168.105.9:7003"); r.code != 1 || !strings.Contains(r.stderr, `cluster "gone" has no kubeconfig`) {
		t.Errorf("refresh of an unknown cluster: %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(slot.KubeconfigPath(home, "gone")); !os.IsNotExist(err) {
		t.Errorf("refresh of an unknown cluster wrote its kubeconfig: %v", err)
	}
	// Without --server the address is looked up in the lab; dev is no
	// cluster there (whether or not Docker runs here): exit 1, file kept.
	before, _ = os.ReadFile(slot.KubeconfigPath(home, "dev"))
	if r := marina(t, home, nil, "kubeconfig", "refresh", "dev"); r.code != 1 || !strings.Contains(r.stderr, "no cluster named dev") && !strings.Contains(r.stderr, "marina up") {
		t.Errorf("refresh of a cluster the lab does not have: %d %s", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(slot.KubeconfigPath(home, "dev")); !bytes.Equal(before, after) {
		t.Error("a failed refresh changed the kubeconfig")
	}
}

// newestBackup returns the content of the newest backup of the kubeconfig
// at path (nil when there is none).
func newestBackup(t *testing.T, path string) []byte {
	t.Helper()
	baks, err := kubeconfig.Backups(path)
	if err != nil || len(baks) == 0 {
		t.Errorf("no backup of %s: %v", path, err)
		return nil
	}
	data, err := os.ReadFile(baks[len(baks)-1])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// noTemporaryFiles fails if an atomic write or kubectl's lock left a file in dir.
func noTemporaryFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, ".") || (strings.HasSuffix(n, ".lock") && !strings.HasSuffix(n, ".marina.lock")) {
			t.Errorf("left in %s: %s", dir, n)
		}
	}
}
