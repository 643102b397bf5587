package migrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bcollard/marina/core/config"
)

// FuzzParseKlimax feeds arbitrary klimax config files through the lenient
// parser, the key mapping and the config renderer: none may panic, and
// whatever the input, the migrated configuration is valid for marina.
// The package links client-go, whose coverage map makes the fuzzer's input
// minimisation slow: run it with -fuzzminimizetime 2s.
func FuzzParseKlimax(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "klimax", "*.yaml"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a: &a [*a, *a]\nvm: *a\n"))
	f.Add([]byte("registries:\n  mirrors:\n    - name: x\n      port: 1\n    - 3\n"))
	f.Add([]byte("kind:\n  customDnsResolvers:\n    - {domain: a.b, resolvers: []}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, drops, err := parseKlimax(data)
		if err != nil {
			return
		}
		for _, vm := range []VMInfo{{Name: k.VMName, State: VMAbsent}, {Name: k.VMName, State: VMStopped, Target: "/h/.marina/lima/" + k.VMName}} {
			m := newMapper(k, vm)
			if err := m.run(drops); err != nil {
				t.Fatalf("mapping failed: %v", err)
			}
			if ps := config.Validate(m.cfg); len(ps) > 0 {
				t.Fatalf("migrated config is invalid: %v", ps)
			}
			if _, err := renderConfig(m.cfg, m.written, "~/.klimax/config.yaml"); err != nil {
				t.Fatal(err)
			}
		}
	})
}
