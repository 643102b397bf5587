package pluginstore

import (
	"os"
	"path/filepath"
	"testing"
)

// TestInstallRefusesEmptySource: an empty source used to become the working
// directory (filepath.Abs("")), so `plugin install ""` in a plugin's build
// directory installed whatever was there.
func TestInstallRefusesEmptySource(t *testing.T) {
	s := newStore(t)
	cwd := t.TempDir()
	data, err := os.ReadFile(bins.v120)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, BinaryPrefix+"acme"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd) // a directory `plugin install .` would install
	for _, src := range []string{"", "  "} {
		_, err := s.Install(testCtx(t), src, InstallOptions{})
		wantErr(t, err, ErrInvalid, "plugin source is empty", "write .")
	}
	if got, err := s.List(); err != nil || len(got) != 0 {
		t.Fatalf("after refused installs the store holds %+v (%v)", got, err)
	}
	// "." still means the working directory, on purpose.
	if inst := mustInstall(t, s, ".", InstallOptions{}); inst.Name != "acme" || inst.Version != "1.2.0" {
		t.Fatalf("install . = %+v", inst)
	}
}

// TestInstallRefusesBuiltinName: a plugin calling itself metallb installed
// fine and was then never run nor listed (the built-in wins). With the
// built-in names set, Install refuses it and leaves nothing behind.
func TestInstallRefusesBuiltinName(t *testing.T) {
	s := newStore(t)
	s.BuiltinNames = []string{"coredns", "metallb"}
	_, err := s.Install(testCtx(t), bins.metallb, InstallOptions{})
	wantErr(t, err, ErrBuiltinName, "calls itself metallb", "built into marina", "Rename it", "nothing was installed")
	if got, err := s.List(); err != nil || len(got) != 0 {
		t.Fatalf("after the refused install the store holds %+v (%v)", got, err)
	}
	assertNoLeftovers(t, s.Root())
	// Other names install as before.
	mustInstall(t, s, bins.v120, InstallOptions{})
}

// TestResolveAfterRemove: what the config would select once a version is
// removed (plugin remove uses it to refuse leaving an enabled plugin with
// nothing to run).
func TestResolveAfterRemove(t *testing.T) {
	s := newStore(t)
	mustInstall(t, s, bins.v120, InstallOptions{})
	mustInstall(t, s, bins.v130, InstallOptions{})
	if inst, err := s.ResolveAfterRemove("acme", "^1", "1.3.0"); err != nil || inst.Version != "1.2.0" {
		t.Fatalf("^1 without 1.3.0 = %+v, %v; want 1.2.0", inst, err)
	}
	if inst, err := s.ResolveAfterRemove("acme", "^1", "1.2.0"); err != nil || inst.Version != "1.3.0" {
		t.Fatalf("^1 without 1.2.0 = %+v, %v; want 1.3.0", inst, err)
	}
	_, err := s.ResolveAfterRemove("acme", "~1.3", "1.3.0")
	wantErr(t, err, ErrNoMatch, "1.2.0")
	_, err = s.ResolveAfterRemove("acme", "", "")
	wantErr(t, err, ErrNotInstalled)
	// Nothing was removed.
	if inst, err := s.Resolve("acme", ""); err != nil || inst.Version != "1.3.0" {
		t.Fatalf("Resolve after the dry runs = %+v, %v", inst, err)
	}
}

// TestVerifyInstallsWithoutLock: with the lock file unreadable, binaries are
// still checked against their manifests.
func TestVerifyInstallsWithoutLock(t *testing.T) {
	s := newStore(t)
	good := mustInstall(t, s, bins.v120, InstallOptions{})
	bad := mustInstall(t, s, bins.v130, InstallOptions{})
	data, err := os.ReadFile(bad.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(bad.Path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.LockPath(), []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.VerifyAll(); err == nil {
		t.Fatal("VerifyAll accepted a corrupt lock file")
	}
	results, err := s.VerifyInstalls(nil)
	if err != nil {
		t.Fatal(err)
	}
	listedResults, err := s.ListInstalls(nil) // what `plugin list` shows
	if err != nil {
		t.Fatal(err)
	}
	results = append(results, listedResults...)
	if len(results) != 4 {
		t.Fatalf("results = %+v", results)
	}
	for _, r := range results {
		switch r.Installed.Version {
		case good.Version:
			if r.Err != nil {
				t.Errorf("intact %s: %v", r.Installed.Version, r.Err)
			}
		case bad.Version:
			wantErr(t, r.Err, ErrModified, "modified after install")
		}
	}
}
