package pluginstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bcollard/marina/sdk"
)

// TestLockUpdatesAreSerialised: read-only commands such as `plugin list`
// now pin the config's selection without marina's process lock, so lock
// file updates must not lose each other's entries even across Stores (each
// marina process opens its own; within one, each openStore call does):
// every Pin's read-modify-write holds the flock beside the lock file.
func TestLockUpdatesAreSerialised(t *testing.T) {
	dir := t.TempDir()
	root, lockPath := filepath.Join(dir, "plugins"), filepath.Join(dir, "plugins.lock")
	const writers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				s := Open(root, lockPath, nil) // a Store of its own, as another process has
				name := fmt.Sprintf("p%d-%d", w, r)
				inst := &Installed{Name: name, Version: "1.0.0", Platform: HostPlatform().String(), SHA256: strings.Repeat("a", 64),
					Description: &sdk.Description{Name: name, Version: "1.0.0", Protocol: "1.0"}}
				if err := s.Pin(inst, ""); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	lf, err := Open(root, lockPath, nil).ReadLock()
	if err != nil {
		t.Fatal(err)
	}
	if len(lf.Plugins) != writers*rounds {
		t.Fatalf("the lock file pins %d plugins after %d concurrent pins: updates were lost", len(lf.Plugins), writers*rounds)
	}
}

// TestLockFilePins: Pins is true only for exactly the recorded selection.
func TestLockFilePins(t *testing.T) {
	inst := &Installed{Name: "acme", Version: "1.0.0", Platform: "linux/amd64", SHA256: strings.Repeat("a", 64)}
	lf := &LockFile{Plugins: map[string]LockEntry{"acme": {Version: "1.0.0", Constraint: "^1", SHA256: map[string]string{"linux/amd64": inst.SHA256}}}}
	if !lf.Pins(inst, "^1") {
		t.Error("Pins is false for the recorded selection")
	}
	other := *inst
	other.SHA256 = strings.Repeat("b", 64)
	arm := *inst
	arm.Platform = "linux/arm64"
	v2 := *inst
	v2.Version = "2.0.0"
	for what, ok := range map[string]bool{
		"another constraint": lf.Pins(inst, "~1.0"),
		"another build":      lf.Pins(&other, "^1"),
		"another platform":   lf.Pins(&arm, "^1"),
		"another version":    lf.Pins(&v2, "^1"),
		"a nil lock file":    (*LockFile)(nil).Pins(inst, "^1"),
	} {
		if ok {
			t.Errorf("Pins is true for %s", what)
		}
	}
}
