package kubeconfig

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/test/golden"
)

// devServer is the address the test cluster "dev" is exported with.
const devServer = "https://192.168.105.3:7001"

// clusterConfig returns the per-cluster kubeconfig of a cluster called name
// as marina writes it: kind's export renamed, pointed at devServer.
func clusterConfig(t testing.TB, name string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := ReadCluster(filepath.Join("testdata", "cluster", "kind-dev.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Rename(cfg, name); err != nil {
		t.Fatal(err)
	}
	if err := SetServer(cfg, devServer); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// parse loads a kubeconfig file as kubectl would; a missing file is an
// empty config.
func parse(t testing.TB, path string) *clientcmdapi.Config {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return clientcmdapi.NewConfig()
	}
	if err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	return cfg
}

// normalize clears what is not part of a file's content (where entries
// were loaded from) and the difference between nil and empty maps, which
// serialise alike. Every other field, extensions included, is compared.
func normalize(c *clientcmdapi.Config) *clientcmdapi.Config {
	c = c.DeepCopy()
	ext := func(m *map[string]runtime.Object) {
		if *m == nil {
			*m = map[string]runtime.Object{}
		}
	}
	ext(&c.Extensions)
	ext(&c.Preferences.Extensions)
	for _, e := range c.Clusters {
		e.LocationOfOrigin = ""
		ext(&e.Extensions)
	}
	for _, e := range c.Contexts {
		e.LocationOfOrigin = ""
		ext(&e.Extensions)
	}
	for _, e := range c.AuthInfos {
		e.LocationOfOrigin = ""
		ext(&e.Extensions)
	}
	return c
}

// sameConfig fails the test unless a and b are equal in every field.
func sameConfig(t *testing.T, what string, a, b *clientcmdapi.Config) {
	t.Helper()
	na, nb := normalize(a), normalize(b)
	if !reflect.DeepEqual(na, nb) {
		ya, _ := clientcmd.Write(*na)
		yb, _ := clientcmd.Write(*nb)
		t.Errorf("%s: configs differ:\n--- got\n%s\n--- want\n%s", what, ya, yb)
	}
}

// copyCorpus copies a corpus file (or nothing, for "missing") to a fresh
// directory as "config" with the given mode and returns its path.
func copyCorpus(t *testing.T, name string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config")
	if name == "missing" {
		return path
	}
	data, err := os.ReadFile(filepath.Join("testdata", "corpus", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func readOrNil(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return data
}

// lastBackup returns the content of the newest backup of the kubeconfig
// at path, or nil when it has none.
func lastBackup(t testing.TB, path string) []byte {
	t.Helper()
	baks, err := Backups(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(baks) == 0 {
		return nil
	}
	data, err := os.ReadFile(baks[len(baks)-1])
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// noStrayFiles fails if anything but the kubeconfig files, their backups
// and marina's lock files is left in dir (temporary files, kubectl locks).
func noStrayFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || (strings.HasSuffix(n, kubectlLockSuffix) && !strings.HasSuffix(n, LockSuffix)) {
			t.Errorf("stray file left in %s: %s", dir, n)
		}
	}
}

func TestPerClusterFile(t *testing.T) {
	cfg := clusterConfig(t, "dev")
	dir := filepath.Join(t.TempDir(), "kube", "marina")
	path := filepath.Join(dir, "dev.kubeconfig")
	if err := WriteCluster(path, cfg); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/golden/dev.kubeconfig", data)
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	// A rewrite narrows a file someone made readable by others.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteCluster(path, cfg); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("rewrite kept mode %v, want 0600", fi.Mode().Perm())
	}
	// What was written reads back equal, marker and all.
	back, err := ReadCluster(path)
	if err != nil {
		t.Fatal(err)
	}
	sameConfig(t, "read back", back, cfg)
	for _, ext := range []map[string]runtime.Object{back.Clusters["dev"].Extensions, back.Contexts["dev"].Extensions, back.AuthInfos["dev"].Extensions} {
		if !IsMarina(ext) {
			t.Errorf("entry lost marina's marker: %v", ext)
		}
	}
	if _, err := ReadCluster(filepath.Join(dir, "none.kubeconfig")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestRename(t *testing.T) {
	base := func() *clientcmdapi.Config {
		cfg, err := ReadCluster(filepath.Join("testdata", "cluster", "kind-dev.kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	tests := []struct {
		name    string
		edit    func(*clientcmdapi.Config)
		newName string
		wantErr string
	}{
		{name: "kind export", edit: func(*clientcmdapi.Config) {}, newName: "dev"},
		{name: "already renamed", edit: func(c *clientcmdapi.Config) { _ = Rename(c, "dev") }, newName: "dev"},
		{name: "two contexts", edit: func(c *clientcmdapi.Config) { c.Contexts["other"] = c.Contexts["kind-dev"].DeepCopy() }, newName: "dev", wantErr: "want exactly one context, cluster and user"},
		{name: "no user", edit: func(c *clientcmdapi.Config) { delete(c.AuthInfos, "kind-dev") }, newName: "dev", wantErr: "want exactly one context, cluster and user"},
		{name: "dangling cluster", edit: func(c *clientcmdapi.Config) { c.Contexts["kind-dev"].Cluster = "gone" }, newName: "dev", wantErr: `refers to cluster "gone"`},
		{name: "dangling user", edit: func(c *clientcmdapi.Config) { c.Contexts["kind-dev"].AuthInfo = "gone" }, newName: "dev", wantErr: `refers to user "gone"`},
		{name: "bad name", edit: func(*clientcmdapi.Config) {}, newName: "Dev_1", wantErr: `cluster name "Dev_1" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(cfg)
			before := cfg.DeepCopy()
			err := Rename(cfg, tt.newName)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if !reflect.DeepEqual(cfg, before) {
					t.Error("a failed Rename changed the config")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, ok := cfg.Contexts[tt.newName]
			if !ok || c.Cluster != tt.newName || c.AuthInfo != tt.newName || cfg.CurrentContext != tt.newName ||
				cfg.Clusters[tt.newName] == nil || cfg.AuthInfos[tt.newName] == nil || len(cfg.Clusters)+len(cfg.Contexts)+len(cfg.AuthInfos) != 3 {
				y, _ := clientcmd.Write(*cfg)
				t.Fatalf("not renamed to %q:\n%s", tt.newName, y)
			}
			if cfg.Clusters[tt.newName].Server != before.Clusters[before.Contexts[before.CurrentContext].Cluster].Server {
				t.Error("Rename changed the server")
			}
		})
	}
}

func TestSetServer(t *testing.T) {
	tests := []struct {
		server  string
		wantErr string
	}{
		{server: "https://192.168.105.7:7002"},
		{server: "https://[fd00::5]:7001/"},
		{server: "http://127.0.0.1:7001"},
		{server: "192.168.105.7:7001", wantErr: "is not a URL"},
		{server: "192.168.105.7", wantErr: "scheme must be https"},
		{server: "ftp://h:1", wantErr: "scheme must be https"},
		{server: "https://", wantErr: "has no host"},
		{server: "https://h:1/api", wantErr: "only scheme, host and port"},
		{server: "https://u:p@h:1", wantErr: "only scheme, host and port"},
		{server: "https://h:1?x=1", wantErr: "only scheme, host and port"},
		{server: "https://h :1", wantErr: "is not a URL"},
		{server: "https://under_score.example:1", wantErr: "neither an IP address nor a DNS name"},
		{server: "https://h:0", wantErr: "not in 1-65535"},
		{server: "https://h:65536", wantErr: "not in 1-65535"},
		{server: "https://API.Example.com:6443"},
	}
	for _, tt := range tests {
		t.Run(tt.server, func(t *testing.T) {
			cfg := clusterConfig(t, "dev")
			err := SetServer(cfg, tt.server)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if cfg.Clusters["dev"].Server != devServer {
					t.Error("a failed SetServer changed the server")
				}
				return
			}
			if err != nil || cfg.Clusters["dev"].Server != tt.server {
				t.Fatalf("err %v, server %q", err, cfg.Clusters["dev"].Server)
			}
		})
	}
	two := clusterConfig(t, "dev")
	two.Clusters["other"] = two.Clusters["dev"].DeepCopy()
	if err := SetServer(two, devServer); err == nil || !strings.Contains(err.Error(), "exactly one cluster") {
		t.Errorf("two clusters: %v", err)
	}
}

// FuzzSetServer: an address SetServer accepts survives the per-cluster
// file's serialisation unchanged (no YAML quoting surprises).
func FuzzSetServer(f *testing.F) {
	for _, s := range []string{devServer, "https://[fd00::5]:7001/", "http://h", "https://a:b@c", "https://h:1#x", "https://h:1/%2e"} {
		f.Add(s)
	}
	cfg := clusterConfig(f, "dev")
	f.Fuzz(func(t *testing.T, server string) {
		c := cfg.DeepCopy()
		if SetServer(c, server) != nil {
			return
		}
		data, err := clientcmd.Write(*c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := clientcmd.Load(data)
		if err != nil {
			t.Fatalf("accepted %q but the file does not load: %v", server, err)
		}
		if got := back.Clusters["dev"].Server; got != server {
			t.Fatalf("server %q came back as %q", server, got)
		}
	})
}

// corpusCases are the real-world kubeconfig shapes merged into and removed
// from. hasDev marks files that already hold marina's "dev".
var corpusCases = []struct {
	name     string
	hasDev   bool
	conflict bool
}{
	{name: "gke"},
	{name: "eks"},
	{name: "oidc"},
	{name: "client-certs"},
	{name: "extensions"},
	{name: "preferences"},
	{name: "multi-context"},
	{name: "empty"},
	{name: "missing"},
	{name: "marina-prior", hasDev: true},
	{name: "conflict", conflict: true},
}

func TestCorpusMergeRemove(t *testing.T) {
	ctx := context.Background()
	dev := clusterConfig(t, "dev")
	for _, tc := range corpusCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.conflict {
				testConflict(t, tc.name, dev)
				return
			}
			// merge: golden, backup, mode kept, idempotent.
			path := copyCorpus(t, tc.name, 0o640)
			orig := readOrNil(t, path)
			rep, err := Merge(ctx, NewTarget(path), dev, "dev", MergeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			merged := readOrNil(t, path)
			golden.Check(t, "testdata/golden/"+tc.name+".merge.yaml", merged)
			if len(rep.Written) != 1 || rep.Written[0] != path {
				t.Errorf("Written = %v", rep.Written)
			}
			if len(rep.Warnings) != 0 {
				t.Errorf("the corpus file has fields clientcmd drops: %v", rep.Warnings)
			}
			wantMode := os.FileMode(0o640)
			if orig == nil {
				wantMode = 0o600
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != wantMode {
				t.Errorf("mode after merge %v (%v), want %v", fi.Mode().Perm(), err, wantMode)
			}
			if orig != nil {
				if bak := lastBackup(t, path); !bytes.Equal(bak, orig) {
					t.Errorf("backup does not hold the original content:\n%s", bak)
				}
			} else if lastBackup(t, path) != nil {
				t.Error("backup made of a file that did not exist")
			}
			got := parse(t, path)
			for _, k := range entryKinds {
				if ext, ok := entryExt(got, k, "dev"); !ok || !IsMarina(ext) {
					t.Errorf("%s dev missing or unmarked after merge", k)
				}
			}
			if got.Clusters["dev"].Server != devServer {
				t.Errorf("server %q", got.Clusters["dev"].Server)
			}
			if got.CurrentContext != parse(t, filepath.Join("testdata", "corpus", tc.name+".yaml")).CurrentContext {
				t.Error("merge without SetCurrent changed current-context")
			}
			rep, err = Merge(ctx, NewTarget(path), dev, "dev", MergeOptions{})
			if err != nil || len(rep.Written) != 0 || len(rep.Changed) != 0 {
				t.Errorf("second merge: %v, report %+v; want no change", err, rep)
			}
			if !bytes.Equal(readOrNil(t, path), merged) {
				t.Error("second merge rewrote the file")
			}
			noStrayFiles(t, filepath.Dir(path))

			// remove(merge(x)) == remove(x): merge touches nothing but dev.
			if _, err := Remove(ctx, NewTarget(path), "dev"); err != nil {
				t.Fatal(err)
			}
			direct := copyCorpus(t, tc.name, 0o640)
			rep, err = Remove(ctx, NewTarget(direct), "dev")
			if err != nil {
				t.Fatal(err)
			}
			sameConfig(t, "remove(merge(x)) vs remove(x)", parse(t, path), parse(t, direct))
			if tc.hasDev {
				golden.Check(t, "testdata/golden/"+tc.name+".remove.yaml", readOrNil(t, direct))
			} else {
				// Nothing of marina's: remove(x) is x, byte for byte.
				if len(rep.Written) != 0 || !bytes.Equal(readOrNil(t, direct), orig) {
					t.Errorf("remove of an absent cluster rewrote the file: %+v", rep)
				}
				sameConfig(t, "remove(merge(x)) vs x", parse(t, path), parse(t, filepath.Join("testdata", "corpus", tc.name+".yaml")))
			}

			// use: merge + current-context, then remove puts back the
			// current-context the file had.
			path = copyCorpus(t, tc.name, 0o600)
			if _, err := Merge(ctx, NewTarget(path), dev, "dev", MergeOptions{SetCurrent: true}); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/"+tc.name+".use.yaml", readOrNil(t, path))
			if c := parse(t, path).CurrentContext; c != "dev" {
				t.Errorf("current-context %q after use", c)
			}
			if _, err := Remove(ctx, NewTarget(path), "dev"); err != nil {
				t.Fatal(err)
			}
			want := parse(t, filepath.Join("testdata", "corpus", tc.name+".yaml")).CurrentContext
			if want == "dev" {
				want = "" // it was marina's dev already: gone with it
			}
			if c := parse(t, path).CurrentContext; c != want {
				t.Errorf("current-context %q after remove, want %q as before use", c, want)
			}
			if _, err := os.Stat(path + StateSuffix); err == nil {
				t.Error("the state file outlived the remove that had nothing left to keep")
			}
		})
	}
}

// testConflict: a user's own "dev" is never replaced without Overwrite.
func testConflict(t *testing.T, name string, dev *clientcmdapi.Config) {
	ctx := context.Background()
	path := copyCorpus(t, name, 0o600)
	orig := readOrNil(t, path)
	_, err := Merge(ctx, NewTarget(path), dev, "dev", MergeOptions{SetCurrent: true})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Entries) != 3 {
		t.Fatalf("err = %v, want *ConflictError on context, cluster and user", err)
	}
	golden.Check(t, "testdata/golden/"+name+".merge-error.txt", []byte(strings.ReplaceAll(err.Error(), filepath.Dir(path), "$DIR")+"\n"))
	if !bytes.Equal(readOrNil(t, path), orig) {
		t.Error("a refused merge changed the file")
	}
	if lastBackup(t, path) != nil {
		t.Error("a refused merge wrote a backup")
	}

	// Remove leaves the user's entries and says so.
	rep, err := Remove(ctx, NewTarget(path), "dev")
	if err != nil || len(rep.Skipped) != 3 || len(rep.Changed) != 0 || !bytes.Equal(readOrNil(t, path), orig) {
		t.Fatalf("remove of the user's own dev: %v %+v", err, rep)
	}

	// Overwrite adopts them: marina's entries replace the user's.
	if _, err := Merge(ctx, NewTarget(path), dev, "dev", MergeOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	got := parse(t, path)
	if !IsMarina(got.AuthInfos["dev"].Extensions) || got.AuthInfos["dev"].Token != "" || got.Clusters["dev"].Server != devServer {
		t.Errorf("overwrite did not replace the entries: %+v", got.AuthInfos["dev"])
	}
	if !bytes.Equal(lastBackup(t, path), orig) {
		t.Error("overwrite did not back up the user's entries")
	}
}

func TestPartialConflict(t *testing.T) {
	// Only the user entry "dev" is the user's: still refused, naming just it.
	path := copyCorpus(t, "marina-prior", 0o600)
	cfg := parse(t, path)
	delete(cfg.AuthInfos["dev"].Extensions, Marker)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	_, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{})
	var ce *ConflictError
	if !errors.As(err, &ce) || len(ce.Entries) != 1 || ce.Entries[0] != (Entry{Kind: KindUser, Name: "dev", File: path}) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "kubectl config delete-user dev") || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("error does not name the fix: %v", err)
	}
}

func TestMergeInputErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	kind, err := ReadCluster(filepath.Join("testdata", "cluster", "kind-dev.kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	dangling := clusterConfig(t, "dev")
	delete(dangling.AuthInfos, "dev")
	tests := []struct {
		name    string
		cfg     *clientcmdapi.Config
		cluster string
		wantErr string
	}{
		{"not renamed", kind, "dev", `has no context "dev" (it has [kind-dev])`},
		{"nil", nil, "dev", "is nil"},
		{"dangling user", dangling, "dev", `refers to user "dev"`},
		{"bad name", clusterConfig(t, "dev"), "-dev", "is not valid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(context.Background(), NewTarget(path), tt.cfg, tt.cluster, MergeOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if _, err := os.Stat(path); err == nil {
				t.Error("a failed merge created the file")
			}
		})
	}
	// A file that does not parse is never rewritten.
	if err := os.WriteFile(path, []byte("clusters: {not: [a list"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{}); err == nil || !strings.Contains(err.Error(), "does not rewrite a kubeconfig it cannot parse") {
		t.Fatalf("unparsable file: %v", err)
	}
}

func TestBackupOncePerRun(t *testing.T) {
	ctx := context.Background()
	path := copyCorpus(t, "gke", 0o600)
	orig := readOrNil(t, path)

	// One run (one Target): the backup keeps the content from before the
	// run's first change, not an intermediate one.
	run := NewTarget(path)
	rep1, err := Merge(ctx, run, clusterConfig(t, "dev"), "dev", MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep2, err := Merge(ctx, run, clusterConfig(t, "qa"), "qa", MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep1.Backups) != 1 || len(rep2.Backups) != 0 {
		t.Errorf("backups %v then %v; want one, then none", rep1.Backups, rep2.Backups)
	}
	if !bytes.Equal(lastBackup(t, path), orig) {
		t.Error("backup does not hold the content from before the run")
	}

	// A new run backs up again: now the file with dev and qa.
	before := readOrNil(t, path)
	if _, err := Remove(ctx, NewTarget(path), "qa"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lastBackup(t, path), before) {
		t.Error("the next run did not refresh the backup")
	}
}

func TestUpdateOnly(t *testing.T) {
	ctx := context.Background()
	moved := clusterConfig(t, "dev")
	if err := SetServer(moved, "https://192.168.105.9:7001"); err != nil {
		t.Fatal(err)
	}
	// Not merged before (or removed by the user): nothing is added.
	path := copyCorpus(t, "gke", 0o600)
	orig := readOrNil(t, path)
	if rep, err := Merge(ctx, NewTarget(path), moved, "dev", MergeOptions{UpdateOnly: true}); err != nil || len(rep.Written) != 0 || !bytes.Equal(readOrNil(t, path), orig) {
		t.Fatalf("UpdateOnly added an absent cluster: %v %+v", err, rep)
	}
	// The user's own "dev" is not touched either.
	path = copyCorpus(t, "conflict", 0o600)
	orig = readOrNil(t, path)
	if rep, err := Merge(ctx, NewTarget(path), moved, "dev", MergeOptions{UpdateOnly: true}); err != nil || len(rep.Written) != 0 || !bytes.Equal(readOrNil(t, path), orig) {
		t.Fatalf("UpdateOnly touched the user's dev: %v %+v", err, rep)
	}
	// Merged before: the server follows (cluster and user entries change,
	// the context is already right), current-context stays.
	path = copyCorpus(t, "marina-prior", 0o600)
	rep, err := Merge(ctx, NewTarget(path), moved, "dev", MergeOptions{UpdateOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got := parse(t, path)
	if got.Clusters["dev"].Server != "https://192.168.105.9:7001" || got.CurrentContext != "dev" || len(rep.Changed) != 2 {
		t.Errorf("server %q, current %q, changed %v", got.Clusters["dev"].Server, got.CurrentContext, rep.Changed)
	}
}

// TestSymlinkedKubeconfig: a ~/.kube/config that is a symlink (dotfiles
// managers) stays a symlink; the file it points to gets the change, and the
// backup is named after that file.
func TestSymlinkedKubeconfig(t *testing.T) {
	real := copyCorpus(t, "oidc", 0o600)
	link := filepath.Join(t.TempDir(), "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	orig := readOrNil(t, real)
	if _, err := Merge(context.Background(), NewTarget(link), clusterConfig(t, "dev"), "dev", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced by a file: %v", err)
	}
	if parse(t, real).Contexts["dev"] == nil {
		t.Error("the symlink's target did not get the merge")
	}
	if !bytes.Equal(lastBackup(t, link), orig) || !bytes.Equal(lastBackup(t, real), orig) {
		t.Error("no backup of the symlink's target")
	}
}

// TestUnknownFieldsWarned: what clientcmd cannot keep (a typo'd key, another
// tool's field) is named in the report, with the backup that still has it.
func TestUnknownFieldsWarned(t *testing.T) {
	path := copyCorpus(t, "client-certs", 0o600)
	data := bytes.Replace(readOrNil(t, path), []byte("tokenFile:"), []byte("token-file:"), 1)
	data = append(data, []byte("x-acme-owner: platform\n")...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Warnings) != 1 {
		t.Fatalf("warnings %v, want one for the file", rep.Warnings)
	}
	if len(rep.Backups) != 1 {
		t.Fatalf("backups %v, want one", rep.Backups)
	}
	for _, want := range []string{`"users[2].user.token-file"`, `"x-acme-owner"`, rep.Backups[0]} {
		if !strings.Contains(rep.Warnings[0], want) {
			t.Errorf("warning lacks %s: %s", want, rep.Warnings[0])
		}
	}
	if !bytes.Equal(lastBackup(t, path), data) {
		t.Error("the backup does not keep the dropped fields")
	}
	// The rewritten file has nothing left to drop.
	if rep, err := Remove(context.Background(), NewTarget(path), "dev"); err != nil || len(rep.Warnings) != 0 {
		t.Errorf("second rewrite: %v %v", err, rep.Warnings)
	}
}
