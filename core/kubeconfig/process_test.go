package kubeconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Helper processes: the test binary re-executes itself with
// helperEnv=<mode> to act as a separate marina process.
const (
	helperEnv   = "MARINA_KUBECONFIG_TEST_HELPER"
	helperFile  = "MARINA_KUBECONFIG_TEST_FILE"
	helperName  = "MARINA_KUBECONFIG_TEST_NAME"
	helperGo    = "MARINA_KUBECONFIG_TEST_GO"
	helperLimit = "MARINA_KUBECONFIG_TEST_FSIZE"
	helperOpts  = "MARINA_KUBECONFIG_TEST_OPTS"

	// exitMergeFailed is a helper's exit status when Merge returned an error.
	exitMergeFailed = 3
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper merges cluster $NAME into $FILE (a $KUBECONFIG-style list), as
// one marina process would, and prints Merge's report as JSON on stdout.
// $OPTS may hold "overwrite".
// Mode "merge" first waits for the file $GO to appear, so that all helpers
// start merging at the same moment; mode "fsize" first limits the size of
// files the process may write to $FSIZE bytes (RLIMIT_FSIZE), so that
// writing the new kubeconfig fails half-way like a full disk or a crash.
func runHelper(mode string) int {
	file, name := os.Getenv(helperFile), os.Getenv(helperName)
	switch mode {
	case "merge":
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(os.Getenv(helperGo)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				fmt.Fprintln(os.Stderr, "helper: no start signal within 20s")
				return 2
			}
			time.Sleep(time.Millisecond)
		}
	case "fsize":
		limit, err := strconv.ParseUint(os.Getenv(helperLimit), 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
			fmt.Fprintln(os.Stderr, "helper: setrlimit:", err)
			return 2
		}
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		return 2
	}
	cfg := clusterConfig(helperTB{}, name)
	opts := MergeOptions{Overwrite: os.Getenv(helperOpts) == "overwrite"}
	rep, err := Merge(context.Background(), NewTarget(filepath.SplitList(file)...), cfg, name, opts)
	if jerr := json.NewEncoder(os.Stdout).Encode(rep); jerr != nil {
		fmt.Fprintln(os.Stderr, "helper:", jerr)
		return 2
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitMergeFailed
	}
	return 0
}

// helperTB lets helpers use the tests' fixtures; a failure exits.
type helperTB struct{ testing.TB }

func (helperTB) Helper() {}
func (helperTB) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(2)
}

// helper returns a command running this test binary in helper mode.
func helper(ctx context.Context, mode string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// TestConcurrentMergesInSeparateProcesses: N marina processes merge N
// different clusters into one kubeconfig at the same moment. None of the
// changes is lost, the file parses, no temporary or kubectl lock file is
// left, and the backup exists.
func TestConcurrentMergesInSeparateProcesses(t *testing.T) {
	const n = 8
	path := copyCorpus(t, "gke", 0o600)
	dir := filepath.Dir(path)
	start := filepath.Join(t.TempDir(), "go")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		outs[i] = &bytes.Buffer{}
		cmds[i] = helper(ctx, "merge", helperFile+"="+path, helperName+"="+fmt.Sprintf("c%d", i), helperGo+"="+start)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper c%d: %v\n%s", i, err, outs[i])
		}
	}

	got := parse(t, path)
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		for _, k := range entryKinds {
			if ext, ok := entryExt(got, k, name); !ok || !IsMarina(ext) {
				t.Errorf("%s %s lost: a concurrent merge overwrote it", k, name)
			}
		}
	}
	orig := parse(t, filepath.Join("testdata", "corpus", "gke.yaml"))
	for ctxName := range orig.Contexts {
		if got.Contexts[ctxName] == nil {
			t.Errorf("the user's context %s was lost", ctxName)
		}
	}
	if len(got.Contexts) != len(orig.Contexts)+n {
		t.Errorf("%d contexts, want %d", len(got.Contexts), len(orig.Contexts)+n)
	}
	baks, err := Backups(path)
	if err != nil || len(baks) != KeepBackups {
		t.Fatalf("backups %v (%v): want the newest %d of the %d runs", baks, err, KeepBackups, n)
	}
	bak := parse(t, baks[len(baks)-1])
	if len(bak.Contexts) < len(orig.Contexts) || len(bak.Contexts) >= len(got.Contexts) {
		t.Errorf("backup has %d contexts; want the state before the last merge", len(bak.Contexts))
	}
	noStrayFiles(t, dir)
}

// TestWriteFailureMidFileKeepsOriginal: a marina process whose write of the
// new kubeconfig really fails half-way (the kernel refuses to let the
// temporary file grow past RLIMIT_FSIZE, as with a full disk) leaves the
// user's file exactly as it was, cleans up, and releases its locks.
func TestWriteFailureMidFileKeepsOriginal(t *testing.T) {
	path := copyCorpus(t, "gke", 0o600)
	orig := readOrNil(t, path)

	// How large the merged file is: merge into a copy.
	probe := copyCorpus(t, "gke", 0o600)
	if _, err := Merge(context.Background(), NewTarget(probe), clusterConfig(t, "dev"), "dev", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	newLen := len(readOrNil(t, probe))
	if newLen <= len(orig)+200 {
		t.Fatalf("merged file (%d bytes) not sufficiently larger than the original (%d)", newLen, len(orig))
	}
	// The backup (original size) fits; the new content does not.
	limit := (len(orig) + newLen) / 2

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := helper(ctx, "fsize", helperFile+"="+path, helperName+"=dev", helperLimit+"="+strconv.Itoa(limit))
	rep := runFailingHelper(t, cmd)
	if len(rep.Changed) != 0 || len(rep.Written) != 0 {
		t.Errorf("report after the failed write: changed %v, written %v; want both empty: nothing was written", rep.Changed, rep.Written)
	}
	if !bytes.Equal(readOrNil(t, path), orig) {
		t.Fatal("the kubeconfig changed although the write failed")
	}
	if !bytes.Equal(lastBackup(t, path), orig) {
		t.Error("backup missing or wrong")
	}
	noStrayFiles(t, filepath.Dir(path))

	// The failed process's locks are gone: a normal merge goes through at once.
	kubectlLockTimeout = time.Second
	t.Cleanup(func() { kubectlLockTimeout = 10 * time.Second })
	mctx, mcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer mcancel()
	if _, err := Merge(mctx, NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readOrNil(t, path), readOrNil(t, probe)) {
		t.Error("the retried merge differs from the probe merge")
	}
}

// runFailingHelper runs a helper whose write must fail with EFBIG and
// returns the report it printed.
func runFailingHelper(t *testing.T, cmd *exec.Cmd) Report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitMergeFailed || !strings.Contains(stderr.String(), syscall.EFBIG.Error()) {
		t.Fatalf("helper: %v, want exit %d with %q:\n%s%s", err, exitMergeFailed, syscall.EFBIG.Error(), stdout.String(), stderr.String())
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("helper's report: %v\n%s", err, stdout.String())
	}
	return rep
}

// TestKubectlLock: marina waits while kubectl's <file>.lock exists, goes on
// once kubectl removes it, and gives up with a message naming the file when
// it stays (a crashed kubectl).
func TestKubectlLock(t *testing.T) {
	kubectlLockTimeout = 500 * time.Millisecond
	t.Cleanup(func() { kubectlLockTimeout = 10 * time.Second })
	path := copyCorpus(t, "gke", 0o600)
	orig := readOrNil(t, path)
	kl := path + kubectlLockSuffix
	if err := os.WriteFile(kl, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	_, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{})
	if err == nil || !strings.Contains(err.Error(), kl+" still exists") || !strings.Contains(err.Error(), "delete "+kl) {
		t.Fatalf("stale kubectl lock: %v", err)
	}
	if !bytes.Equal(readOrNil(t, path), orig) {
		t.Fatal("merge wrote while kubectl held the lock")
	}
	if _, err := os.Stat(kl); err != nil {
		t.Fatal("marina removed kubectl's lock")
	}

	kubectlLockTimeout = 10 * time.Second
	released := make(chan struct{})
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = os.Remove(kl)
		close(released)
	}()
	began := time.Now()
	if _, err := Merge(context.Background(), NewTarget(path), clusterConfig(t, "dev"), "dev", MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	<-released
	if time.Since(began) < 200*time.Millisecond {
		t.Error("merge did not wait for kubectl's lock")
	}
	if parse(t, path).Contexts["dev"] == nil {
		t.Error("merge after kubectl released its lock did not happen")
	}
	noStrayFiles(t, filepath.Dir(path))
}

// TestConcurrentMergesThroughSymlinkAndRealPath: ten marina processes merge
// ten clusters into one kubeconfig at the same moment, half of them naming
// it by a symlink (a dotfiles-managed ~/.kube/config) and half by its real
// path. They must serialise on the one file: all ten contexts end up in it.
func TestConcurrentMergesThroughSymlinkAndRealPath(t *testing.T) {
	const n = 10
	real := copyCorpus(t, "gke", 0o600)
	link := filepath.Join(t.TempDir(), "config")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	start := filepath.Join(t.TempDir(), "go")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		file := real
		if i%2 == 0 {
			file = link
		}
		outs[i] = &bytes.Buffer{}
		cmds[i] = helper(ctx, "merge", helperFile+"="+file, helperName+"="+fmt.Sprintf("c%d", i), helperGo+"="+start)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper c%d: %v\n%s", i, err, outs[i])
		}
	}

	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink was replaced by a file: %v", err)
	}
	got := parse(t, real)
	var lost []string
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		for _, k := range entryKinds {
			if ext, ok := entryExt(got, k, name); !ok || !IsMarina(ext) {
				lost = append(lost, k+" "+name)
			}
		}
	}
	if len(lost) > 0 {
		t.Errorf("lost to a concurrent merge through the other path: %v", lost)
	}
	noStrayFiles(t, filepath.Dir(real))
	noStrayFiles(t, filepath.Dir(link))
}

// TestWriteFailureSecondFileReportsOnlyTheFirst: with $KUBECONFIG a:b, merge
// --overwrite writes a (new context and user) and then fails writing b
// (the user's own cluster "dev" being replaced) for real, in a separate
// process whose file size limit b's new content exceeds. The report lists
// a's entries as changed and nothing of b's, b is untouched, and a later
// remove cleans up without losing the user's cluster.
func TestWriteFailureSecondFileReportsOnlyTheFirst(t *testing.T) {
	setup := func() (a, b string) {
		dir := t.TempDir()
		a, b = filepath.Join(dir, "a"), filepath.Join(dir, "b")
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", "gke.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(a, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// b: the user's own cluster "dev", padded with contexts so that b
		// is larger than a will be after the merge.
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["dev"] = &clientcmdapi.Cluster{Server: "https://dev.example.com"}
		for i := range 150 {
			cfg.Contexts[fmt.Sprintf("pad-%03d", i)] = &clientcmdapi.Context{Cluster: "dev", AuthInfo: "someone", Namespace: "padding"}
		}
		if err := clientcmd.WriteToFile(*cfg, b); err != nil {
			t.Fatal(err)
		}
		return a, b
	}
	size := func(p string) int { return len(readOrNil(t, p)) }

	// Sizes: merge into a copy.
	pa, pb := setup()
	aOld, bOld := size(pa), size(pb)
	if _, err := Merge(context.Background(), NewTarget(pa, pb), clusterConfig(t, "dev"), "dev", MergeOptions{Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	aNew, bNew := size(pa), size(pb)
	limit := (bOld + bNew) / 2
	if aOld >= limit || aNew >= limit || bOld >= limit || bNew <= limit || size(StateFile(pb)) >= limit {
		t.Fatalf("sizes a %d->%d, b %d->%d, state %d: no limit fails only b's new content", aOld, aNew, bOld, bNew, size(StateFile(pb)))
	}

	a, b := setup()
	origB := readOrNil(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := helper(ctx, "fsize", helperFile+"="+a+string(os.PathListSeparator)+b, helperName+"=dev", helperOpts+"=overwrite", helperLimit+"="+strconv.Itoa(limit))
	rep := runFailingHelper(t, cmd)
	if want := []Entry{{KindContext, "dev", a}, {KindUser, "dev", a}}; !slices.Equal(rep.Changed, want) {
		t.Errorf("changed %v, want only a's entries %v", rep.Changed, want)
	}
	if !slices.Equal(rep.Written, []string{a}) || len(rep.Replaced) != 0 {
		t.Errorf("written %v, replaced %v; want [a] and nothing replaced", rep.Written, rep.Replaced)
	}
	if !bytes.Equal(readOrNil(t, b), origB) {
		t.Fatal("b changed although its write failed")
	}
	if got := parse(t, a); got.Contexts["dev"] == nil || got.AuthInfos["dev"] == nil {
		t.Error("a does not have what the report says was written")
	}

	// Remove takes marina's entries out of a and leaves the user's cluster
	// in b, which the failed run had already noted as replaced.
	rrep, err := Remove(context.Background(), NewTarget(a, b), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if len(rrep.Warnings) != 0 || len(rrep.Restored) != 0 || !bytes.Equal(readOrNil(t, b), origB) {
		t.Errorf("remove after the failed run: %+v; b changed: %v", rrep, !bytes.Equal(readOrNil(t, b), origB))
	}
	if got := parse(t, a); got.Contexts["dev"] != nil || got.AuthInfos["dev"] != nil {
		t.Error("remove left marina's entries in a")
	}
	if _, err := os.Stat(StateFile(b)); !os.IsNotExist(err) {
		t.Errorf("state file of b left behind: %v", err)
	}
	noStrayFiles(t, filepath.Dir(a))
}
