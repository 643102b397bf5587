// Package limatest makes Lima instance directories for tests of the
// programs that read them (cmd/marina).
package limatest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm"
	"github.com/bcollard/marina/core/vm/lima"
)

// CreatedVM writes, under home, the instance directory of the default
// config's Lima VM as Lima's create leaves it (lima.yaml rendered from
// marina's template for this Linux machine, lima-version), never started:
// marina's Lima reader reports it stopped. It returns the directory.
func CreatedVM(t testing.TB, home string) string {
	t.Helper()
	cfg := config.Default()
	y, err := lima.Template(cfg, lima.TemplateOptions{GOOS: "linux", Home: home})
	if err != nil {
		t.Fatal(err)
	}
	b, err := lima.Render(y)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(vm.LimaHome(home), cfg.VM.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{"lima.yaml": b, "lima-version": []byte(lima.LimaVersion + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
