package vm

import (
	"runtime"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	auto := "host"
	if runtime.GOOS == "darwin" {
		auto = "lima"
	}
	for in, want := range map[string]string{"": auto, "auto": auto, "lima": "lima", "host": "host"} {
		if got, err := Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Resolve("qemu"); err == nil || !strings.Contains(err.Error(), "vm.driver") {
		t.Errorf("Resolve(qemu) = %v, want an error naming vm.driver", err)
	}
}
