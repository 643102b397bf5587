package kubeconfig

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestTargetMatchesKubectl checks Precedence and DefaultFile against
// client-go's own PathOptions (what kubectl config uses) for the same
// $KUBECONFIG and files on disk.
func TestTargetMatchesKubectl(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	sep := string(os.PathListSeparator)
	tests := []struct {
		name   string
		env    string
		exist  []string
		wantTo string // DefaultFile
	}{
		{name: "unset", env: "", wantTo: filepath.Join(home, ".kube", "config")},
		{name: "one file, missing", env: a, wantTo: a},
		{name: "list, first exists", env: strings.Join([]string{a, b, c}, sep), exist: []string{a, c}, wantTo: a},
		{name: "list, middle exists", env: strings.Join([]string{a, b, c}, sep), exist: []string{b}, wantTo: b},
		{name: "list, none exists: the last", env: strings.Join([]string{a, b, c}, sep), wantTo: c},
		{name: "duplicates", env: strings.Join([]string{b, a, b}, sep), exist: []string{a}, wantTo: a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []string{a, b, c} {
				_ = os.Remove(f)
			}
			for _, f := range tt.exist {
				if err := os.WriteFile(f, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(clientcmd.RecommendedConfigPathEnvVar, tt.env)
			kubectl := &clientcmd.PathOptions{
				GlobalFile:   filepath.Join(home, ".kube", "config"),
				EnvVar:       clientcmd.RecommendedConfigPathEnvVar,
				LoadingRules: &clientcmd.ClientConfigLoadingRules{},
			}
			tg := DefaultTarget(home)
			if want := kubectl.GetLoadingPrecedence(); !slices.Equal(tg.Files, want) {
				t.Errorf("Files = %v, kubectl loads %v", tg.Files, want)
			}
			if got, want := tg.DefaultFile(), kubectl.GetDefaultFilename(); got != want || got != tt.wantTo {
				t.Errorf("DefaultFile = %s, kubectl writes to %s, want %s", got, want, tt.wantTo)
			}
		})
	}
	// Empty entries (a stray ':') are ignored; an all-empty list is unset.
	if got := Precedence(home, sep+a+sep+sep); !slices.Equal(got, []string{a}) {
		t.Errorf("Precedence with empty entries = %v", got)
	}
	if got := Precedence(home, sep); !slices.Equal(got, []string{filepath.Join(home, ".kube", "config")}) {
		t.Errorf("Precedence(%q) = %v", sep, got)
	}
}

// TestKubeconfigList merges into and removes from a $KUBECONFIG list and
// checks each entry lands in the file kubectl would use, and that kubectl's
// merged view shows the result.
func TestKubeconfigList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	for src, dst := range map[string]string{"gke": a, "marina-prior": b} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", src+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	origA, origB := readOrNil(t, a), readOrNil(t, b)
	files := []string{a, b, c}
	kubectlView := func() *clientcmdapi.Config {
		t.Helper()
		cfg, err := (&clientcmd.ClientConfigLoadingRules{Precedence: files}).Load()
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}

	// dev exists in b (marina's): it is updated there; current-context goes
	// to the default file a, where kubectl would put it.
	rep, err := Merge(ctx, NewTarget(files...), clusterConfig(t, "dev"), "dev", MergeOptions{SetCurrent: true})
	if err != nil {
		t.Fatal(err)
	}
	wantChanged := []Entry{{KindCurrentContext, "dev", a}, {KindCluster, "dev", b}, {KindUser, "dev", b}}
	if !slices.Equal(rep.Changed, wantChanged) || !slices.Equal(rep.Written, []string{a, b}) {
		t.Fatalf("changed %v written %v; want %v in [a b]", rep.Changed, rep.Written, wantChanged)
	}
	if pa := parse(t, a); len(pa.Contexts) != 2 || pa.CurrentContext != "dev" {
		t.Errorf("a: contexts %v current %q; want only current-context added", sortedKeys(pa.Contexts), pa.CurrentContext)
	}
	if _, err := os.Stat(c); err == nil {
		t.Error("c was created")
	}
	if !bytes.Equal(lastBackup(t, a), origA) || !bytes.Equal(lastBackup(t, b), origB) {
		t.Error("backups do not hold the original files")
	}

	// A new cluster goes to the default file a.
	if _, err := Merge(ctx, NewTarget(files...), clusterConfig(t, "qa"), "qa", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if pa := parse(t, a); pa.Contexts["qa"] == nil || pa.Clusters["qa"] == nil || pa.AuthInfos["qa"] == nil {
		t.Errorf("qa not in a: %v", sortedKeys(pa.Contexts))
	}
	view := kubectlView()
	if view.CurrentContext != "dev" || view.Clusters["dev"].Server != devServer || view.Contexts["qa"] == nil || view.Contexts["dev-shop"] == nil {
		t.Errorf("kubectl sees current %q, dev server %q, contexts %v", view.CurrentContext, view.Clusters["dev"].Server, sortedKeys(view.Contexts))
	}

	// A shadowed copy of marina's dev in c: Merge leaves it (kubectl never
	// reads it), Remove deletes it too so it cannot resurface. current-context
	// goes back to a's from before the merge; c's, which marina did not set,
	// is cleared.
	shadow := clusterConfig(t, "dev")
	shadow.CurrentContext = "dev"
	if err := clientcmd.WriteToFile(*shadow, c); err != nil {
		t.Fatal(err)
	}
	rep, err = Remove(ctx, NewTarget(files...), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Written, []string{a, b, c}) {
		t.Errorf("remove wrote %v, want a, b and c", rep.Written)
	}
	view = kubectlView()
	if view.CurrentContext != "gke_acme-prod_europe-west1_web" || parse(t, c).CurrentContext != "" || view.Contexts["dev"] != nil || view.Clusters["dev"] != nil || view.AuthInfos["dev"] != nil {
		t.Errorf("after remove kubectl sees current %q, contexts %v", view.CurrentContext, sortedKeys(view.Contexts))
	}
	if view.Contexts["qa"] == nil || view.Contexts["gke_acme-prod_europe-west1_web"] == nil || view.Contexts["dev-shop"] == nil {
		t.Errorf("remove took other entries: %v", sortedKeys(view.Contexts))
	}
	noStrayFiles(t, dir)

	// No file of the list exists: new entries go to the last one.
	x, y := filepath.Join(dir, "x"), filepath.Join(dir, "sub", "y")
	if _, err := Merge(ctx, NewTarget(x, y), clusterConfig(t, "dev"), "dev", MergeOptions{SetCurrent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(x); err == nil || parse(t, y).CurrentContext != "dev" {
		t.Errorf("with no file in the list, want the entries in the last one (y)")
	}
	if fi, err := os.Stat(filepath.Dir(y)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v %v", fi.Mode().Perm(), err)
	}
}

func TestRemoveKeepsCurrentContextElsewhere(t *testing.T) {
	ctx := context.Background()
	path := copyCorpus(t, "gke", 0o600)
	if _, err := Merge(ctx, NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := Remove(ctx, NewTarget(path), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if c := parse(t, path).CurrentContext; c != "gke_acme-prod_europe-west1_web" {
		t.Errorf("current-context %q: remove must clear it only when it named the removed context", c)
	}
	for _, e := range rep.Changed {
		if e.Kind == KindCurrentContext {
			t.Errorf("report claims current-context changed: %v", rep.Changed)
		}
	}
	// Removing again, or a name that was never there, is a no-op.
	for _, name := range []string{"dev", "never"} {
		if rep, err := Remove(ctx, NewTarget(path), name); err != nil || len(rep.Written)+len(rep.Changed)+len(rep.Skipped) != 0 {
			t.Errorf("remove %s: %v %+v", name, err, rep)
		}
	}
}
