package dockertest

import (
	"os"
	"strings"
	"testing"
)

// TestImageTagsMatchGoMod checks that the tags Image returns are the ones
// test/images/build.sh produces: marina-test/<name>:<version of the upstream module
// in test/images/go.mod>. Bumping a version in one place only fails here.
func TestImageTagsMatchGoMod(t *testing.T) {
	gomod, err := os.ReadFile("../../test/images/go.mod")
	if err != nil {
		t.Fatalf("read test/images/go.mod: %v", err)
	}
	versions := map[string]string{}
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 {
			versions[f[0]] = f[1]
		}
	}
	modules := map[string]string{ // the same table as module() in build.sh
		"registry": "github.com/distribution/distribution/v3",
		"etcd":     "go.etcd.io/etcd/server/v3",
		"coredns":  "github.com/coredns/coredns",
	}
	if len(modules) != len(images) {
		t.Fatalf("images has %d entries, this test knows %d: keep them in step", len(images), len(modules))
	}
	for name, mod := range modules {
		v, ok := versions[mod]
		if !ok {
			t.Errorf("%s: module %s not required in test/images/go.mod", name, mod)
			continue
		}
		if want := "marina-test/" + name + ":" + v; images[name] != want {
			t.Errorf("images[%q] = %q, want %q (the version in test/images/go.mod)", name, images[name], want)
		}
	}
}
