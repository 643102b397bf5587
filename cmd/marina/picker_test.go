package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/lab"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
)

func TestPickerParseSelection(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want []int
		err  string
	}{
		{"1 3", 4, []int{0, 2}, ""},
		{"3,1", 4, []int{0, 2}, ""},
		{"2-4", 5, []int{1, 2, 3}, ""},
		{" 1, 2-3  5 ", 5, []int{0, 1, 2, 4}, ""},
		{"2 2 1-2", 3, []int{0, 1}, ""},
		{"4-4", 4, []int{3}, ""},
		{"all", 3, []int{0, 1, 2}, ""},
		{"ALL", 2, []int{0, 1}, ""},
		{"0", 3, nil, `"0" is out of range: choose between 1 and 3`},
		{"4", 3, nil, `"4" is out of range: choose between 1 and 3`},
		{"2-9", 3, nil, `"2-9" is out of range`},
		{"3-1", 3, nil, `range "3-1" goes backwards; write 1-3`},
		{"dev", 3, nil, `"dev" is not a number, a range like 2-4, or all`},
		{"1 x", 3, nil, `"x" is not a number`},
		{"1-", 3, nil, `"1-" is not a number`},
		{"-2", 3, nil, `"-2" is not a number`},
		{"all 1", 3, nil, `"all" is not a number`},
		{" , ", 3, nil, "nothing chosen"},
	} {
		got, err := parseSelection(tc.in, tc.n)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseSelection(%q, %d) = %v, %v; want error %q", tc.in, tc.n, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSelection(%q, %d) = %v, %v; want %v", tc.in, tc.n, got, err, tc.want)
		}
	}
}

func pickerList() []lab.ClusterInfo {
	return []lab.ClusterInfo{
		{Name: "dev", Slot: 1, Fleet: "demo", Age: "5m"},
		{Name: "qa", Slot: 2, Age: "3h"},
		{Name: "prod", Slot: 7, Fleet: "demo", Age: "2d"},
	}
}

func TestPickerPick(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		want        string // picked names, comma-separated
		err         string
		prompts     int // how many times the question was asked
		output      []string
	}{
		{name: "numbers", input: "1 3\n", want: "dev,prod", prompts: 1},
		{name: "range", input: "2-3\n", want: "qa,prod", prompts: 1},
		{name: "all", input: "all\n", want: "dev,qa,prod", prompts: 1},
		{name: "no newline at the end", input: "2", want: "qa", prompts: 1},
		{name: "empty cancels", input: "\n", err: "cancelled", prompts: 1},
		{name: "q cancels", input: "q\n", err: "cancelled", prompts: 1},
		{name: "end of input cancels", input: "", err: "cancelled", prompts: 1},
		{name: "out of range, then valid", input: "4\n1\n", want: "dev", prompts: 2,
			output: []string{`"4" is out of range: choose between 1 and 3; try again (2 of 3 tries left)`}},
		{name: "garbage, then cancel", input: "dev\n\n", err: "cancelled", prompts: 2,
			output: []string{`"dev" is not a number, a range like 2-4, or all; try again`}},
		{name: "retries exhausted", input: "x\n9\n3-1\n1\n", err: "no valid choice after 3 tries", prompts: 3},
		{name: "garbage then end of input", input: "x\n", err: "cancelled", prompts: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			got, err := pickClusters(bufio.NewReader(strings.NewReader(tc.input)), &out, "delete", pickerList())
			var names []string
			for _, ci := range got {
				names = append(names, ci.Name)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("picked %v, %v; want error %q", names, err, tc.err)
				}
				if tc.err == "cancelled" && !errors.Is(err, errPickCancelled) {
					t.Fatalf("a cancel is %v, not errPickCancelled", err)
				}
			} else if err != nil || strings.Join(names, ",") != tc.want {
				t.Fatalf("picked %v, %v; want %s", names, err, tc.want)
			}
			text := out.String()
			if n := strings.Count(text, "Clusters to delete (e.g. 1 3, 2-4, all; empty or q to cancel): "); n != tc.prompts {
				t.Errorf("asked %d times, want %d:\n%s", n, tc.prompts, text)
			}
			for _, want := range append(tc.output, "#  NAME  SLOT  FLEET  AGE", "1  dev   1     demo   5m", "2  qa    2     -      3h", "3  prod  7     demo   2d") {
				if !strings.Contains(text, want) {
					t.Errorf("output lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

func TestPickerConfirmOn(t *testing.T) {
	for in, want := range map[string]bool{"y\n": true, "YES\n": true, " yes \n": true, "n\n": false, "\n": false, "": false, "yep\n": false} {
		var out bytes.Buffer
		if got := confirmOn(bufio.NewReader(strings.NewReader(in)), &out, "Delete 2 clusters (a, b)?"); got != want {
			t.Errorf("confirmOn(%q) = %v, want %v", in, got, want)
		}
		if !strings.HasPrefix(out.String(), "Delete 2 clusters (a, b)? [y/N] ") {
			t.Errorf("question = %q", out.String())
		}
	}
}

func TestDeleteForms(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		selector string
		selSet   bool
		all      bool
		want     deleteForm
		err      string
	}{
		{nil, "", false, false, deletePick, ""},
		{[]string{"dev", "qa"}, "", false, false, deleteNames, ""},
		{nil, "team=a", true, false, deleteSelector, ""},
		{nil, "", false, true, deleteAll, ""},
		{[]string{"dev"}, "", false, true, 0, "cluster names and --all cannot be combined"},
		{[]string{"dev"}, "team=a", true, false, 0, "cluster names and -l/--selector cannot be combined"},
		{nil, "team=a", true, true, 0, "-l/--selector and --all cannot be combined"},
		{nil, " ", true, false, 0, "-l/--selector is empty"},
	} {
		got, err := deleteFormOf(tc.args, tc.selector, tc.selSet, tc.all)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || exitcode.Of(err) != exitcode.Usage {
				t.Errorf("deleteFormOf(%v, %q, %v) = %v, %v; want a usage error %q", tc.args, tc.selector, tc.all, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("deleteFormOf(%v, %q, %v) = %v, %v; want %v", tc.args, tc.selector, tc.all, got, err, tc.want)
		}
	}

	// Without a terminal: picking is impossible, -l and --all need --yes.
	for _, tc := range []struct {
		form          deleteForm
		yes, terminal bool
		err           string
	}{
		{deletePick, false, false, "no terminal to pick clusters on"},
		{deletePick, true, false, "no terminal to pick clusters on"},
		{deleteAll, false, false, "pass --yes"},
		{deleteSelector, false, false, "pass --yes"},
		{deleteAll, true, false, ""},
		{deleteSelector, true, false, ""},
		{deleteNames, false, false, ""},
		{deletePick, false, true, ""},
		{deleteAll, false, true, ""},
	} {
		err := checkCanAsk(tc.form, tc.yes, tc.terminal)
		if tc.err == "" {
			if err != nil {
				t.Errorf("checkCanAsk(%v, yes %v, terminal %v) = %v", tc.form, tc.yes, tc.terminal, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "nothing was deleted") || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("checkCanAsk(%v, yes %v, terminal %v) = %v; want a usage error %q", tc.form, tc.yes, tc.terminal, err, tc.err)
		}
	}
}

func TestDeleteUnknownClusters(t *testing.T) {
	live := map[string]int{"dev": 1, "qa": 2}
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{[]string{"dev", "qa"}, ""},
		{[]string{"dev", "nope"}, "no cluster named nope (see marina cluster list); nothing was deleted"},
		{[]string{"b", "dev", "a", "b"}, "no clusters named b, a (see marina cluster list); nothing was deleted"},
	} {
		unknown := unknownClusters(tc.names, live)
		got := ""
		if len(unknown) > 0 {
			got = errUnknownClusters(unknown).Error()
		}
		if got != tc.want {
			t.Errorf("unknown of %v: %q, want %q", tc.names, got, tc.want)
		}
	}
}

// TestDeleteExitCodesWithoutTerminal: without a terminal, a delete that
// would have to ask (pick, or confirm -l/--all) exits 2 and deletes
// nothing, as do malformed requests; it never says "aborted" and exits 0.
// These are refused before the lab is touched.
func TestDeleteExitCodesWithoutTerminal(t *testing.T) {
	home := t.TempDir()
	writeClusterKubeconfig(t, home, "dev", "https://127.0.0.1:7001")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"cluster", "delete"}, []string{"no terminal to pick clusters on", "marina cluster delete NAME", "--yes", "nothing was deleted"}},
		{[]string{"cluster", "delete", "--yes"}, []string{"no terminal to pick clusters on"}},
		{[]string{"cluster", "delete", "--all"}, []string{"no terminal to confirm on", "--yes", "nothing was deleted"}},
		{[]string{"cluster", "delete", "-l", "team=a"}, []string{"no terminal to confirm on", "--yes", "nothing was deleted"}},
		{[]string{"cluster", "rm", "--selector", "team=a"}, []string{"no terminal to confirm on"}},
		{[]string{"cluster", "delete", "dev", "--all", "--yes"}, []string{"cluster names and --all cannot be combined"}},
		{[]string{"cluster", "delete", "dev", "-l", "team=a", "--yes"}, []string{"cluster names and -l/--selector cannot be combined"}},
		{[]string{"cluster", "delete", "-l", "team=a", "--all", "--yes"}, []string{"cannot be combined"}},
		{[]string{"cluster", "delete", "-l", "team in (a", "--yes"}, []string{`-l/--selector "team in (a"`}},
		{[]string{"cluster", "delete", "-l", "", "--yes"}, []string{"-l/--selector is empty"}},
		{[]string{"cluster", "delete", "Dev_1"}, []string{`cluster name "Dev_1"`}},
		{[]string{"cluster", "list", "-l", "!!"}, []string{`-l/--selector "!!"`}},
		{[]string{"cluster", "ls", "--selector", "a=b,"}, []string{`-l/--selector "a=b,"`}},
		{[]string{"cluster", "list", "-o", "xml"}, []string{`--output "xml" is not supported`}},
	} {
		r := marina(t, home, nil, tc.args...)
		if r.code != 2 {
			t.Errorf("%q: exit %d, want 2\n%s%s", tc.args, r.code, r.stdout, r.stderr)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
		if strings.Contains(strings.ToLower(r.stdout+r.stderr), "aborted") {
			t.Errorf("%q says aborted:\n%s%s", tc.args, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(slot.KubeconfigPath(home, "dev")); err != nil {
		t.Errorf("dev's kubeconfig after refused deletes: %v", err)
	}
}

// deleteTestCluster is a cluster for the end-to-end test: a real API server for
// its API and a container on the lab's network standing in for its
// control-plane node (kind nodes need privileged containers, which do not
// start here).
type deleteTestCluster struct {
	name   string
	slot   string
	labels map[string]string
	// complete writes the completion marker.
	complete bool
}

// startDeleteTestCluster makes c: registers the control-plane Node with c's labels
// (and the marker), writes its kubeconfig as create does, and starts the
// node container: kind's labels, on network, publishing the API port.
func startDeleteTestCluster(t *testing.T, home, network string, c deleteTestCluster) string {
	t.Helper()
	srv := kubetest.Start(t)
	cs := srv.Clientset(t)
	ctx := context.Background()
	labels := map[string]string{"node-role.kubernetes.io/control-plane": ""}
	for k, v := range c.labels {
		labels[k] = v
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.name + "-control-plane", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c.complete {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: lab.MarkerConfigMap, Namespace: "kube-system"}, Data: map[string]string{"complete": "true", "createdAt": "2020-01-02T03:04:05Z"}}
		if _, err := cs.CoreV1().ConfigMaps("kube-system").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := clientcmd.Load(srv.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := kubeconfig.Rename(cfg, c.name); err != nil {
		t.Fatal(err)
	}
	if err := kubeconfig.WriteCluster(slot.KubeconfigPath(home, c.name), cfg); err != nil {
		t.Fatal(err)
	}
	// Created, not started: the slot is read from the port binding, and
	// nothing listens on the port (tests running at the same time cannot
	// collide on it).
	container := c.name + "-control-plane"
	args := []string{"create", "--name", container, "--network", network,
		"--label", "io.x-k8s.kind.cluster=" + c.name, "--label", "io.x-k8s.kind.role=control-plane",
		"-p", "127.0.0.1:70" + c.slot + ":6443"}
	args = append(args, dockertest.LabelArgs(t)...)
	id := dockertest.Docker(t, append(args, dockertest.Image(t, "registry"))...)
	dockertest.Cleanup(t, []string{container}, nil)
	return id
}

// writeDeleteTestConfig writes a config for a host-driver lab on network
// with no plugins (no hooks to run on delete).
func writeDeleteTestConfig(t *testing.T, home, network, subnet string) {
	t.Helper()
	prefix := strings.TrimSuffix(subnet, ".0.0/16")
	cfg := `vm:
  name: e2e
  driver: host
network:
  name: ` + network + `
  bridgeCIDR: ` + subnet + `
dns:
  etcdIP: ` + prefix + `.255.52
  serverIP: ` + prefix + `.255.53
plugins:
  localdns: {enabled: false}
  registries: {enabled: false}
  metallb: {enabled: false}
  coredns: {enabled: false}
  externaldns: {enabled: false}
`
	dir := filepath.Join(home, ".marina")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// marinaOnTerminal runs the binary like marina does, but on a terminal
// (a pseudo-terminal from util-linux's script) that is fed input; stdout
// and stderr both arrive in result.stdout.
func marinaOnTerminal(t *testing.T, home, input string, args ...string) result {
	t.Helper()
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatalf("script (util-linux) is needed to run marina on a terminal: apt-get install bsdutils (%v)", err)
	}
	line := shellQuote(marinaBin)
	for _, a := range args {
		line += " " + shellQuote(a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "script", "-qec", line, "/dev/null")
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SHELL=/bin/sh", "TERM=dumb"}
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{stdout: strings.ReplaceAll(string(out), "\r\n", "\n"), code: code}
}

// containerExists reports whether the container id exists.
func containerExists(id string) bool {
	out, _ := dockerOK("inspect", "--format", "{{.Id}}", id)
	return out != ""
}

// TestDeleteAndListEndToEnd (tier 2 + 3) runs list, delete and refresh
// through the binary on the host driver: the clusters' slots come from
// their node containers in the real Docker engine, their labels and
// completion from real API servers; delete removes node containers through
// kind, kubeconfig files and entries.
func TestDeleteAndListEndToEnd(t *testing.T) {
	dockertest.Require(t)
	kubetest.RequireAssets(t)
	const subnet = "172.22.0.0/16" // this test's bridge (see e2eSubnet for the others)
	network := dockertest.Network(t, subnet)
	home := t.TempDir()
	writeDeleteTestConfig(t, home, network.Name, subnet)
	// kind deletes nodes by cluster label on every network: names unique to
	// this process keep other tests' clusters out of reach.
	p := fmt.Sprintf("d%d-", os.Getpid())
	an, bn := p+"alpha", p+"beta"
	alpha := startDeleteTestCluster(t, home, network.Name, deleteTestCluster{name: an, slot: "93", labels: map[string]string{"team": "a", "marina.dev/fleet": "demo"}, complete: true})
	beta := startDeleteTestCluster(t, home, network.Name, deleteTestCluster{name: bn, slot: "94", labels: map[string]string{"team": "b"}})

	// list -o json: slots from Docker, labels, fleet, completion and age
	// from the API servers.
	r := marina(t, home, nil, "cluster", "list", "-o", "json")
	var list []lab.ClusterInfo
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil || len(list) != 2 {
		t.Fatalf("list -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if a := list[0]; a.Name != an || a.Slot != 93 || a.APIPort != 7093 || a.Labels["team"] != "a" || a.Fleet != "demo" || !a.Complete || a.CreatedAt != "2020-01-02T03:04:05Z" || !strings.Contains(a.Age, "y") {
		t.Errorf("alpha = %+v", a)
	}
	if b := list[1]; b.Name != bn || b.Slot != 94 || b.Labels["team"] != "b" || b.Complete || b.CreatedAt == "" || b.Age == "" {
		t.Errorf("beta = %+v", b)
	}
	if r := marina(t, home, nil, "cluster", "list", "-o", "yaml"); r.code != 0 || !strings.Contains(r.stdout, "labels:") || !strings.Contains(r.stdout, "createdAt:") || !strings.Contains(r.stdout, "age:") {
		t.Errorf("list -o yaml: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Text: a STATUS column because beta is incomplete, saying so.
	r = marina(t, home, nil, "cluster", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SLOT API NODES READY VERSION FLEET AGE STATUS" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), an+" 93 7093 1 0 - demo ") ||
		!strings.Contains(lines[2], "incomplete (a failed create; delete it: marina cluster delete "+bn+")") {
		t.Errorf("list:\n%s%s", r.stdout, r.stderr)
	}
	// -l: only alpha, which is fine: no STATUS column.
	r = marina(t, home, nil, "cluster", "list", "-l", "team=a")
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SLOT API NODES READY VERSION FLEET AGE" || !strings.HasPrefix(lines[1], an+" ") {
		t.Errorf("list -l team=a:\n%s%s", r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "cluster", "list", "-l", "team=z"); r.code != 0 || !strings.Contains(r.stdout, "No clusters match -l team=z") {
		t.Errorf("list -l team=z: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// A name that does not exist: nothing deleted, alpha included.
	r = marina(t, home, nil, "cluster", "delete", an, "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "no cluster named nope (see marina cluster list); nothing was deleted") || !containerExists(alpha) {
		t.Fatalf("delete alpha nope: exit %d, alpha exists %v\n%s%s", r.code, containerExists(alpha), r.stdout, r.stderr)
	}
	// -l without --yes and without a terminal: nothing deleted.
	if r := marina(t, home, nil, "cluster", "delete", "-l", "team=a"); r.code != 2 || !containerExists(alpha) {
		t.Fatalf("delete -l without --yes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := marina(t, home, nil, "cluster", "delete", "-l", "team=z", "--yes"); r.code != 0 || !strings.Contains(r.stdout, "No clusters match -l team=z; nothing was deleted") {
		t.Fatalf("delete -l team=z: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// -l --yes: exactly the matching cluster, its node and kubeconfig.
	r = marina(t, home, nil, "cluster", "delete", "-l", "marina.dev/fleet=demo", "--yes", "--progress", "plain")
	if r.code != 0 || !strings.Contains(r.stdout, "Delete cluster "+an+" (kind)") {
		t.Fatalf("delete -l fleet=demo: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if containerExists(alpha) || !containerExists(beta) {
		t.Fatalf("after delete -l: alpha exists %v (want false), beta exists %v (want true)", containerExists(alpha), containerExists(beta))
	}
	if _, err := os.Stat(slot.KubeconfigPath(home, an)); !os.IsNotExist(err) {
		t.Errorf("alpha's kubeconfig after delete: %v", err)
	}

	// refresh (all): beta follows its address; a leftover file stands for a
	// deleted cluster's.
	if err := os.WriteFile(slot.KubeconfigPath(home, "old"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = marina(t, home, nil, "kubeconfig", "refresh")
	if r.code != 0 || !strings.Contains(r.stdout, slot.KubeconfigPath(home, bn)+" now points at https://127.0.0.1:7094") || !strings.Contains(r.stdout, "Skipped old: no cluster of this name") {
		t.Fatalf("refresh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := loadKubeconfig(t, slot.KubeconfigPath(home, bn)).Clusters[bn].Server; got != "https://127.0.0.1:7094" {
		t.Errorf("beta's server after refresh: %q", got)
	}
	r = marina(t, home, nil, "kubeconfig", "refresh", "nope")
	if r.code != 1 || !strings.Contains(r.stderr, "no cluster named nope") {
		t.Errorf("refresh nope: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// On a terminal: --all asks; no is exit 2 and nothing deleted.
	r = marinaOnTerminal(t, home, "n\n", "cluster", "delete", "--all")
	if r.code != 2 || !strings.Contains(r.stdout, "Delete 1 cluster ("+bn+")? [y/N]") || !strings.Contains(r.stdout, "not confirmed; nothing was deleted") || !containerExists(beta) {
		t.Fatalf("delete --all answered no: exit %d, beta exists %v\n%s", r.code, containerExists(beta), r.stdout)
	}
	// The picker: cancelled, then an invalid choice, a valid one and no,
	// then a choice and yes.
	r = marinaOnTerminal(t, home, "q\n", "cluster", "delete")
	if r.code != 2 || !strings.Contains(r.stdout, "Clusters to delete") || !strings.Contains(r.stdout, "cancelled; nothing was deleted") || !containerExists(beta) {
		t.Fatalf("picker cancelled: exit %d, beta exists %v\n%s", r.code, containerExists(beta), r.stdout)
	}
	r = marinaOnTerminal(t, home, "5\n1\nn\n", "cluster", "delete")
	if r.code != 2 || !strings.Contains(r.stdout, `"5" is out of range: choose between 1 and 1; try again`) || !strings.Contains(r.stdout, "not confirmed; nothing was deleted") || !containerExists(beta) {
		t.Fatalf("picker then no: exit %d, beta exists %v\n%s", r.code, containerExists(beta), r.stdout)
	}
	r = marinaOnTerminal(t, home, "1\ny\n", "cluster", "delete", "--progress", "plain")
	if r.code != 0 || containerExists(beta) || !strings.Contains(r.stdout, "Delete cluster "+bn+" (kind)") {
		t.Fatalf("picker then yes: exit %d, beta exists %v\n%s", r.code, containerExists(beta), r.stdout)
	}
	if r := marina(t, home, nil, "cluster", "list"); r.code != 0 || !strings.Contains(r.stdout, "No clusters.") {
		t.Errorf("list after deleting everything: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
