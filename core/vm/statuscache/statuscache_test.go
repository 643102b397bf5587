package statuscache

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
)

// fixture is a Lima home with one stopped instance, as far as files go.
func fixture(t *testing.T) (inst, conf string) {
	t.Helper()
	home := t.TempDir()
	inst = filepath.Join(home, "marina")
	conf = filepath.Join(home, LimaConfigDir)
	if err := os.MkdirAll(inst, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"lima.yaml": "cpus: 4\n", "marina-vm.json": `{"cpus": 4}`, "lima-version": "2.2.0\n"} {
		if err := os.WriteFile(filepath.Join(inst, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A large file (a disk image) counts by size and time only.
	if err := os.WriteFile(filepath.Join(inst, "diffdisk"), make([]byte, hashLimit+1), 0o644); err != nil {
		t.Fatal(err)
	}
	return inst, conf
}

func mustFingerprint(t *testing.T, inst, conf string) string {
	t.Helper()
	fp, err := Fingerprint(inst, conf)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// TestFingerprint: stable while nothing changes; different after any change
// a VM's status could depend on, in the instance dir or Lima's config dir.
func TestFingerprint(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, inst, conf string)
	}{
		{"the host agent's pid file appears", func(t *testing.T, inst, _ string) { write(t, filepath.Join(inst, "ha.pid"), "123\n") }},
		{"a socket dir appears", func(t *testing.T, inst, _ string) { mkdir(t, filepath.Join(inst, "sock")) }},
		{"lima.yaml edited, same size and time", func(t *testing.T, inst, _ string) {
			p := filepath.Join(inst, "lima.yaml")
			fi, _ := os.Stat(p)
			write(t, p, "cpus: 8\n")
			_ = os.Chtimes(p, fi.ModTime(), fi.ModTime())
		}},
		{"marina's record removed", func(t *testing.T, inst, _ string) { _ = os.Remove(filepath.Join(inst, "marina-vm.json")) }},
		{"the disk image rewritten", func(t *testing.T, inst, _ string) {
			_ = os.Chtimes(filepath.Join(inst, "diffdisk"), time.Now().Add(time.Hour), time.Now().Add(time.Hour))
		}},
		{"lima.yaml made read-only", func(t *testing.T, inst, _ string) { _ = os.Chmod(filepath.Join(inst, "lima.yaml"), 0o444) }},
		{"Lima's override.yaml appears", func(t *testing.T, _, conf string) {
			mkdir(t, conf)
			write(t, filepath.Join(conf, "override.yaml"), "cpus: 2\n")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inst, conf := fixture(t)
			before := mustFingerprint(t, inst, conf)
			if again := mustFingerprint(t, inst, conf); again != before {
				t.Fatal("the fingerprint changed while nothing did")
			}
			c.change(t, inst, conf)
			if after := mustFingerprint(t, inst, conf); after == before {
				t.Error("the fingerprint did not change")
			}
		})
	}
	if _, err := Fingerprint(filepath.Join(t.TempDir(), "none"), filepath.Join(t.TempDir(), "none")); err != nil {
		t.Errorf("absent directories: %v (an absent directory is a state, not an error)", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	write(t, f, "")
	if _, err := Fingerprint(f, ""); err == nil {
		t.Error("a file where the instance dir should be: no error")
	}
}

// TestSaveLookup: an answer comes back only for the same config and
// fingerprint, and only if it is a stopped Lima VM of that config's name.
func TestSaveLookup(t *testing.T) {
	home := t.TempDir()
	cfg := config.Default()
	path := Path(home, cfg.VM.Name)
	st := vm.Status{Driver: "lima", Name: cfg.VM.Name, State: vm.Stopped, Detail: "the VM is stopped; `marina up` starts it",
		DockerHost: "unix:///x/docker.sock", CPUs: 4, Memory: "8GiB", Disk: "100GiB", Arch: "arm64", Drift: []string{"vm.cpus: 4 -> 2"}}
	if _, ok := Lookup(path, cfg, "fp"); ok {
		t.Fatal("Lookup before Save: hit")
	}
	if err := Save(path, cfg, "fp", st); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("entry file: %v, %v (want 0600)", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("entry dir: %v, %v (want 0700)", fi, err)
	}
	got, ok := Lookup(path, cfg, "fp")
	if !ok || got.Detail != st.Detail || got.CPUs != 4 || got.Arch != "arm64" || len(got.Drift) != 1 || got.Drift[0] != st.Drift[0] || got.DockerHost != st.DockerHost {
		t.Errorf("Lookup = %+v, %v; want %+v", got, ok, st)
	}
	if _, ok := Lookup(path, cfg, "other"); ok {
		t.Error("another fingerprint: hit")
	}
	other := config.Default()
	other.VM.CPUs++
	if _, ok := Lookup(path, other, "fp"); ok {
		t.Error("another config: hit")
	}
	for name, bad := range map[string]vm.Status{
		"running": {Driver: "lima", Name: cfg.VM.Name, State: vm.Running},
		"host":    {Driver: "host", Name: cfg.VM.Name, State: vm.Stopped},
		"name":    {Driver: "lima", Name: "other", State: vm.Stopped},
	} {
		if err := Save(path, cfg, "fp", bad); err != nil {
			t.Fatal(err)
		}
		if _, ok := Lookup(path, cfg, "fp"); ok {
			t.Errorf("an entry for a %s VM: hit", name)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := Lookup(path, cfg, "fp"); ok { // and no hang
		t.Error("a FIFO entry: hit")
	}
	_ = os.Remove(path)
	for name, body := range map[string]string{
		"corrupt":        "{",
		"unknown fields": `{"format":1,"extra":true}`,
		"other format":   `{"format":2}`,
	} {
		write(t, path, body)
		if _, ok := Lookup(path, cfg, "fp"); ok {
			t.Errorf("a %s entry: hit", name)
		}
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
}
