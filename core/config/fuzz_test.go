package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCheckFile feeds arbitrary bytes to the strict decoder: it must never
// panic, and whatever it keeps as clean must itself pass the strict check.
func FuzzCheckFile(f *testing.F) {
	for _, name := range []string{"testdata/typo.yaml", "testdata/five-problems.yaml", "testdata/full.yaml"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	tmpl, _ := InitTemplate()
	f.Add(tmpl)
	f.Add([]byte("vm: {cpus: 2, cpus: 3}\nplugins: {x: {config: {a: [1, 2]}}}\n&a vm: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf := checkFile("fuzz.yaml", data)
		if sf.clean == nil {
			return
		}
		var c Config
		if err := sf.clean.Decode(&c); err != nil && len(sf.problems) == 0 {
			t.Fatalf("strict check passed but the document does not decode: %v", err)
		}
	})
}

// FuzzLoad runs the whole pipeline (strict check, viper layering, validation)
// on arbitrary files: it must return a config or a ValidationError, never panic.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("vm:\n  cpus: 2\n"), "vm.cpus=3")
	f.Add([]byte("registries:\n  mirrors: []\n"), "plugins.x.config.a.b=1")
	f.Add([]byte("plugins:\n  metallb:\n    timeout: 5m\n"), "dns.zone=x.y")
	f.Fuzz(func(t *testing.T, data []byte, set string) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Load(LoadOptions{Path: path, Sets: []string{set}})
		var verr *ValidationError
		switch {
		case err == nil && l.Config == nil:
			t.Fatal("nil config without error")
		case err != nil && !errors.As(err, &verr):
			t.Fatalf("want a ValidationError, got %T: %v", err, err)
		}
	})
}
