package kind

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// lateNodeEnv makes this test binary's helper (TestMain) serve lateNode
// instead of kind, with its state in the named directory.
const lateNodeEnv = "MARINA_KIND_TEST_LATE_NODE"

// lateNode is a HelperBackend whose Create fails and whose node container
// appears only after the first Delete: what the Docker daemon does with a
// node it was still creating when the helper was killed.
type lateNode struct{ dir string }

func (b lateNode) count(op string) int {
	n, _ := os.ReadFile(filepath.Join(b.dir, op))
	c, _ := strconv.Atoi(string(n))
	return c
}

func (b lateNode) bump(op string) {
	os.WriteFile(filepath.Join(b.dir, op), []byte(strconv.Itoa(b.count(op)+1)), 0o644)
}

func (b lateNode) Create(*v1alpha4.Cluster, bool, time.Duration) error {
	return errors.New("node container creation interrupted")
}

func (b lateNode) Delete(string) error { b.bump("delete"); return nil }

func (b lateNode) List() ([]string, error) { return nil, nil }

func (b lateNode) Kubeconfig(string, bool) (string, error) { return "", errors.New("no cluster") }

func (b lateNode) Nodes(name string) ([]string, error) {
	if b.count("delete") == 1 { // the late container, after the first Delete
		return []string{name + "-worker"}, nil
	}
	return nil, nil
}

func serveLateNode(dir string) int {
	return ServeHelperWith(os.Stdin, os.Stdout, os.Stderr, func(kindlog.Logger) (HelperBackend, func(), error) {
		return lateNode{dir: dir}, func() {}, nil
	})
}

// TestRollbackDeletesALateNode: a node that appears after the rollback's
// first Delete (the daemon finishing a create the killed helper started)
// is deleted too, so a failed Create leaves nothing.
func TestRollbackDeletesALateNode(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(lateNodeEnv, dir)
	p := &KindProvider{}
	cfg := &v1alpha4.Cluster{TypeMeta: v1alpha4.TypeMeta{Kind: "Cluster", APIVersion: "kind.x-k8s.io/v1alpha4"}, Name: "late"}
	v1alpha4.SetDefaultsCluster(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := p.Create(ctx, cfg, CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "node container creation interrupted") {
		t.Fatalf("Create = %v; want the backend's failure", err)
	}
	if n := (lateNode{dir}).count("delete"); n != 2 {
		t.Fatalf("rollback deleted %d times; want 2 (once more for the late node)", n)
	}
	if nodes, err := p.Nodes(ctx, "late"); err != nil || len(nodes) != 0 {
		t.Fatalf("after the rollback, Nodes = %v, %v; want none", nodes, err)
	}
}
