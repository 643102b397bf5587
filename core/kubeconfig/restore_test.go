package kubeconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// userEntries returns the context, cluster and user named name of cfg, for
// comparing the user's own entries before and after.
func userEntries(cfg *clientcmdapi.Config, name string) *clientcmdapi.Config {
	out := clientcmdapi.NewConfig()
	for _, k := range entryKinds {
		if _, ok := entryExt(cfg, k, name); ok {
			setEntry(out, cfg, k, name)
		}
	}
	return out
}

// TestOverwriteThenRemoveRestoresUserEntries: merge --overwrite replaces
// the user's own dev; more runs than backups are kept follow, so no backup
// has the user's dev any more; remove still puts the user's entries back,
// byte for byte what the file had.
func TestOverwriteThenRemoveRestoresUserEntries(t *testing.T) {
	ctx := context.Background()
	path := copyCorpus(t, "conflict", 0o600)
	orig := parse(t, path)

	// use --overwrite: current-context is dev (the user's) already.
	rep, err := Merge(ctx, NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{Overwrite: true, SetCurrent: true})
	if err != nil {
		t.Fatal(err)
	}
	wantReplaced := []Entry{{KindContext, "dev", path}, {KindCluster, "dev", path}, {KindUser, "dev", path}}
	if !slices.Equal(rep.Replaced, wantReplaced) {
		t.Errorf("Replaced = %v, want %v", rep.Replaced, wantReplaced)
	}
	if fi, err := os.Stat(path + StateSuffix); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v (mode %v), want it with mode 0600", err, fi)
	}
	if got := parse(t, path); !IsMarina(got.AuthInfos["dev"].Extensions) {
		t.Fatal("overwrite did not replace the user's dev")
	}

	// Later runs: qa comes and goes, more often than backups are kept.
	for i := range KeepBackups + 1 {
		if i%2 == 0 {
			_, err = Merge(ctx, NewTarget(path), clusterConfig(t, "qa"), "qa", MergeOptions{})
		} else {
			_, err = Remove(ctx, NewTarget(path), "qa")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	baks, err := Backups(path)
	if err != nil || len(baks) != KeepBackups {
		t.Fatalf("backups %v (%v), want %d", baks, err, KeepBackups)
	}
	for _, b := range baks {
		if c := parse(t, b); c.AuthInfos["dev"] != nil && !IsMarina(c.AuthInfos["dev"].Extensions) {
			t.Fatalf("%s still has the user's dev: the test does not show the state file keeps it", b)
		}
	}

	rep, err = Remove(ctx, NewTarget(path), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Restored, wantReplaced) {
		t.Errorf("Restored = %v, want %v", rep.Restored, wantReplaced)
	}
	got := parse(t, path)
	sameConfig(t, "the user's dev after remove", userEntries(got, "dev"), userEntries(orig, "dev"))
	if got.CurrentContext != "dev" {
		t.Errorf("current-context %q, want the user's dev still current", got.CurrentContext)
	}
	if _, err := Remove(ctx, NewTarget(path), "qa"); err != nil {
		t.Fatal(err)
	}
	sameConfig(t, "the file after removing everything marina added", parse(t, path), orig)
	if _, err := os.Stat(path + StateSuffix); !os.IsNotExist(err) {
		t.Errorf("state file left with nothing to keep: %v", err)
	}

	// A second remove finds nothing of marina's and changes nothing.
	if rep, err := Remove(ctx, NewTarget(path), "dev"); err != nil || len(rep.Written)+len(rep.Changed)+len(rep.Restored) != 0 {
		t.Errorf("second remove: %v %+v", err, rep)
	}
}

// TestRemoveKeepsSavedEntryWhenNameTaken: after an overwrite the user put a
// new dev context of their own in place of marina's; remove leaves it, keeps
// the replaced one in the state file and says so.
func TestRemoveKeepsSavedEntryWhenNameTaken(t *testing.T) {
	ctx := context.Background()
	path := copyCorpus(t, "conflict", 0o600)
	orig := parse(t, path)
	if _, err := Merge(ctx, NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, path)
	cfg.Contexts["dev"] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "dev", Namespace: "mine"}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rep, err := Remove(ctx, NewTarget(path), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := []Entry{{KindCluster, "dev", path}, {KindUser, "dev", path}}; !slices.Equal(rep.Restored, want) {
		t.Errorf("Restored = %v, want %v", rep.Restored, want)
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], `context "dev"`) || !strings.Contains(rep.Warnings[0], StateSuffix) {
		t.Errorf("warnings %q, want one naming the context and the state file", rep.Warnings)
	}
	if got := parse(t, path); got.Contexts["dev"].Namespace != "mine" {
		t.Error("remove replaced the user's new dev context")
	}
	st, err := loadState(path + StateSuffix)
	if err != nil {
		t.Fatal(err)
	}
	s := st.Clusters["dev"]
	if s == nil || s.entries.Contexts["dev"] == nil || len(s.entries.Clusters)+len(s.entries.AuthInfos) != 0 {
		t.Fatalf("state %+v, want only the replaced context kept", s)
	}
	if !sameEntry(s.entries, orig, KindContext, "dev") {
		t.Errorf("kept context %+v, want the user's original %+v", s.entries.Contexts["dev"], orig.Contexts["dev"])
	}
}

// TestUseThenRemoveRestoresCurrentContext: remove puts current-context back
// to what it was before use, through a chain of uses, and clears it when
// that context is gone.
func TestUseThenRemoveRestoresCurrentContext(t *testing.T) {
	ctx := context.Background()
	const gke = "gke_acme-prod_europe-west1_web"
	path := copyCorpus(t, "gke", 0o600)
	use := func(name string) {
		t.Helper()
		if _, err := Merge(ctx, NewTarget(path), clusterConfig(t, name), name, MergeOptions{SetCurrent: true}); err != nil {
			t.Fatal(err)
		}
	}
	remove := func(name, wantCurrent string) Report {
		t.Helper()
		rep, err := Remove(ctx, NewTarget(path), name)
		if err != nil {
			t.Fatal(err)
		}
		if c := parse(t, path).CurrentContext; c != wantCurrent {
			t.Errorf("after remove %s: current-context %q, want %q", name, c, wantCurrent)
		}
		return rep
	}

	use("dev")
	rep := remove("dev", gke)
	if want := []Entry{{KindCurrentContext, gke, path}}; !slices.Equal(rep.Restored, want) {
		t.Errorf("Restored = %v, want %v", rep.Restored, want)
	}

	// dev, then qa; removing dev leaves qa current; removing qa goes back
	// to what was current before dev.
	use("dev")
	use("qa")
	remove("dev", "qa")
	remove("qa", gke)

	// The previous context was deleted meanwhile: cleared, not dangling.
	use("dev")
	cfg := parse(t, path)
	delete(cfg.Contexts, gke)
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	remove("dev", "")

	// The user switched away after use: remove does not touch it.
	path = copyCorpus(t, "gke", 0o600)
	use("dev")
	cfg = parse(t, path)
	cfg.CurrentContext = "gke_acme-dev_us-central1-a_sandbox"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	remove("dev", "gke_acme-dev_us-central1-a_sandbox")
	if _, err := os.Stat(path + StateSuffix); !os.IsNotExist(err) {
		t.Errorf("state file left with nothing to keep: %v", err)
	}
}

// TestBackupGenerations: each run makes a timestamped backup; the newest
// KeepBackups are kept, oldest deleted, and other files that only look like
// backups are left alone.
func TestBackupGenerations(t *testing.T) {
	ctx := context.Background()
	path := copyCorpus(t, "gke", 0o600)
	foreign := path + BackupSuffix + ".mine"
	if err := os.WriteFile(foreign, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	t.Cleanup(func() { now = time.Now })
	var contents [][]byte
	var made []string
	for i := range KeepBackups + 2 {
		now = func() time.Time { return base.Add(time.Duration(i) * time.Second) }
		contents = append(contents, readOrNil(t, path))
		rep, err := Merge(ctx, NewTarget(path), clusterConfig(t, fmt.Sprintf("c%d", i)), fmt.Sprintf("c%d", i), MergeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Backups) != 1 {
			t.Fatalf("run %d: backups %v, want one", i, rep.Backups)
		}
		made = append(made, rep.Backups[0])
	}
	if want := path + BackupSuffix + ".20250102T150405.000000000Z"; made[0] != want {
		t.Errorf("first backup %s, want %s", made[0], want)
	}
	baks, err := Backups(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(baks, made[2:]) {
		t.Fatalf("backups %v, want the newest %d: %v", baks, KeepBackups, made[2:])
	}
	for i, b := range baks {
		if !bytes.Equal(readOrNil(t, b), contents[i+2]) {
			t.Errorf("%s does not hold the content from before run %d", b, i+2)
		}
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("pruning deleted a file that is not a backup: %v", err)
	}

	// Two runs in the same instant do not overwrite each other's backup.
	rep1, err1 := Remove(ctx, NewTarget(path), "c0")
	rep2, err2 := Remove(ctx, NewTarget(path), "c1")
	if err1 != nil || err2 != nil || len(rep1.Backups) != 1 || len(rep2.Backups) != 1 || rep1.Backups[0] == rep2.Backups[0] {
		t.Errorf("same-instant backups: %v %v, %v %v", rep1.Backups, err1, rep2.Backups, err2)
	}
}

// TestStateFileErrors: a state file marina cannot read stops the change
// with an error naming the file and the way out, and nothing is written.
func TestStateFileErrors(t *testing.T) {
	for name, content := range map[string]string{
		"not json":      "{",
		"other version": `{"version": 99, "clusters": {}}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := copyCorpus(t, "gke", 0o600)
			orig := readOrNil(t, path)
			if err := os.WriteFile(path+StateSuffix, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{})
			if err == nil || !strings.Contains(err.Error(), path+StateSuffix) || !strings.Contains(err.Error(), "delete") {
				t.Fatalf("err = %v, want one naming %s and the fix", err, path+StateSuffix)
			}
			if !bytes.Equal(readOrNil(t, path), orig) {
				t.Error("the kubeconfig changed")
			}
		})
	}
}

// TestStateFileFormat: the state file is JSON with the replaced entries as
// a kubeconfig and the previous current-context, as documented.
func TestStateFileFormat(t *testing.T) {
	path := copyCorpus(t, "conflict", 0o600)
	cfg := parse(t, path)
	cfg.CurrentContext = ""
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if _, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{Overwrite: true, SetCurrent: true}); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Version  int `json:"version"`
		Clusters map[string]struct {
			Replaced               string  `json:"replaced"`
			PreviousCurrentContext *string `json:"previousCurrentContext"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal(readOrNil(t, path+StateSuffix), &raw); err != nil {
		t.Fatal(err)
	}
	dev := raw.Clusters["dev"]
	if raw.Version != 1 || dev.PreviousCurrentContext == nil || *dev.PreviousCurrentContext != "" {
		t.Fatalf("state %+v", raw)
	}
	saved, err := clientcmd.Load([]byte(dev.Replaced))
	if err != nil {
		t.Fatal(err)
	}
	sameConfig(t, "the replaced entries", saved, userEntries(cfg, "dev"))
}
