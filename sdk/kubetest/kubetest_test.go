package kubetest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// TestCluster starts one cluster and checks, against it, what marina's tier-3 tests
// rely on: client-go, the dynamic client, server-side apply, RBAC, the kubeconfig
// and the kubectl built with the server.
func TestCluster(t *testing.T) {
	c := Start(t)
	cs := c.Clientset(t)

	t.Run("kubeconfig", func(t *testing.T) {
		cfg, err := clientcmd.Load(c.Kubeconfig)
		if err != nil {
			t.Fatalf("parse Kubeconfig: %v", err)
		}
		onDisk, err := os.ReadFile(c.KubeconfigPath)
		if err != nil || string(onDisk) != string(c.Kubeconfig) {
			t.Errorf("KubeconfigPath %s does not hold Kubeconfig (err %v)", c.KubeconfigPath, err)
		}
		cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
		u, err := url.Parse(cluster.Server)
		if err != nil || u.Scheme != "https" || u.Hostname() != "127.0.0.1" || u.Port() == "" {
			t.Errorf("server = %q, want https://127.0.0.1:<port>", cluster.Server)
		}
		if cluster.InsecureSkipTLSVerify || len(cluster.CertificateAuthorityData) == 0 {
			t.Errorf("cluster trusts no CA (insecure %v, %d bytes of CA data)", cluster.InsecureSkipTLSVerify, len(cluster.CertificateAuthorityData))
		}
		// The user the API server sees is the token file's admin.
		review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx(t), &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectReview: %v", err)
		}
		if u := review.Status.UserInfo; u.Username != AdminUser || !contains(u.Groups, AdminGroup) {
			t.Errorf("authenticated as %q %v, want %q in %q", u.Username, u.Groups, AdminUser, AdminGroup)
		}
	})

	t.Run("client-go round trip", func(t *testing.T) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "round-trip"}}
		if _, err := cs.CoreV1().Namespaces().Create(ctx(t), ns, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create namespace: %v", err)
		}
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns.Name},
			Data:       map[string]string{"zone": "marina.test", "slot": "3"},
		}
		if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(ctx(t), cm, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create configmap: %v", err)
		}
		got, err := cs.CoreV1().ConfigMaps(ns.Name).Get(ctx(t), cm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get configmap: %v", err)
		}
		if fmt.Sprint(got.Data) != fmt.Sprint(cm.Data) || got.UID == "" || got.ResourceVersion == "" {
			t.Errorf("read back %v (uid %q, rv %q), want %v stored", got.Data, got.UID, got.ResourceVersion, cm.Data)
		}
		// The same object through the dynamic client.
		u, err := c.Dynamic(t).Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).
			Namespace(ns.Name).Get(ctx(t), cm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("dynamic get configmap: %v", err)
		}
		if u.GetUID() != got.UID {
			t.Errorf("dynamic client read uid %q, typed client %q", u.GetUID(), got.UID)
		}
		// Validation is real: an invalid name is refused by the server.
		bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Not_A_Name", Namespace: ns.Name}}
		if _, err := cs.CoreV1().ConfigMaps(ns.Name).Create(ctx(t), bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("create configmap %q: err = %v, want Invalid", bad.Name, err)
		}
	})

	t.Run("server-side apply", func(t *testing.T) {
		cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)
		ac := corev1ac.ConfigMap("coredns-patch", metav1.NamespaceDefault).WithData(map[string]string{"Corefile": "a"})
		got, err := cms.Apply(ctx(t), ac, metav1.ApplyOptions{FieldManager: "marina"})
		if err != nil {
			t.Fatalf("apply as marina: %v", err)
		}
		if m := managers(got); m["marina"] != metav1.ManagedFieldsOperationApply {
			t.Errorf("managed fields %v, want marina: Apply", m)
		}
		// Another manager setting the same field conflicts unless it forces.
		other := corev1ac.ConfigMap("coredns-patch", metav1.NamespaceDefault).WithData(map[string]string{"Corefile": "b"})
		if _, err := cms.Apply(ctx(t), other, metav1.ApplyOptions{FieldManager: "someone-else"}); !apierrors.IsConflict(err) {
			t.Fatalf("apply of a field owned by marina as someone-else: err = %v, want Conflict", err)
		}
		got, err = cms.Apply(ctx(t), other, metav1.ApplyOptions{FieldManager: "someone-else", Force: true})
		if err != nil {
			t.Fatalf("forced apply: %v", err)
		}
		if got.Data["Corefile"] != "b" {
			t.Errorf("after forced apply Corefile = %q, want b", got.Data["Corefile"])
		}
		// Re-applying marina's config with a field it no longer lists removes
		// nothing it does not own.
		ac = corev1ac.ConfigMap("coredns-patch", metav1.NamespaceDefault).WithData(map[string]string{"extra": "x"})
		got, err = cms.Apply(ctx(t), ac, metav1.ApplyOptions{FieldManager: "marina"})
		if err != nil {
			t.Fatalf("second apply as marina: %v", err)
		}
		if fmt.Sprint(got.Data) != "map[Corefile:b extra:x]" {
			t.Errorf("data after second apply = %v, want Corefile from someone-else and extra from marina", got.Data)
		}
	})

	t.Run("rbac", func(t *testing.T) {
		// Anonymous requests are authenticated (system:anonymous) but not allowed.
		anon := rest.AnonymousClientConfig(c.Config)
		acs, err := kubernetes.NewForConfig(anon)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acs.CoreV1().Namespaces().List(ctx(t), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("anonymous list namespaces: err = %v, want Forbidden", err)
		}
		// A user without bindings is refused until a Role and RoleBinding allow it.
		alice := rest.CopyConfig(c.Config)
		alice.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
		alcs, err := kubernetes.NewForConfig(alice)
		if err != nil {
			t.Fatal(err)
		}
		list := func() error {
			_, err := alcs.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx(t), metav1.ListOptions{})
			return err
		}
		if err := list(); !apierrors.IsForbidden(err) {
			t.Fatalf("alice lists configmaps before any binding: err = %v, want Forbidden", err)
		}
		role := &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-reader", Namespace: metav1.NamespaceDefault},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
		}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "alice-cm-reader", Namespace: metav1.NamespaceDefault},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		}
		if _, err := cs.RbacV1().Roles(role.Namespace).Create(ctx(t), role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.RbacV1().RoleBindings(binding.Namespace).Create(ctx(t), binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The RBAC authorizer reads through an informer: allow it a moment.
		deadline := time.Now().Add(10 * time.Second)
		for err := list(); err != nil; err = list() {
			if time.Now().After(deadline) {
				t.Fatalf("alice lists configmaps after the RoleBinding: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("kubectl version", func(t *testing.T) {
		kubectl := KubectlPath(t)
		cmd := exec.CommandContext(ctx(t), kubectl, "--kubeconfig", c.KubeconfigPath, "version", "-o", "json")
		cmd.Env = []string{"HOME=" + t.TempDir()}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s version -o json: %v\n%s", kubectl, err, stderrOf(err))
		}
		var v struct {
			ClientVersion struct{ GitVersion, Major, Minor string }
			ServerVersion *struct{ GitVersion, Major, Minor string }
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("kubectl version -o json printed %q: %v", out, err)
		}
		if v.ServerVersion == nil {
			t.Fatalf("kubectl version -o json has no serverVersion: %s", out)
		}
		for what, got := range map[string]string{
			"client": v.ClientVersion.GitVersion, "server": v.ServerVersion.GitVersion,
			"server major.minor": v.ServerVersion.Major + "." + v.ServerVersion.Minor,
		} {
			want := Version
			if what == "server major.minor" {
				want = strings.Join(strings.Split(strings.TrimPrefix(Version, "v"), ".")[:2], ".")
			}
			if got != want {
				t.Errorf("%s version %q, want %q", what, got, want)
			}
		}
	})

	t.Run("Kubectl helper", func(t *testing.T) {
		out := c.Kubectl(t, "get", "namespaces", "-o", "name")
		for _, want := range []string{"namespace/default", "namespace/kube-system"} {
			if !strings.Contains(out, want+"\n") {
				t.Errorf("kubectl get namespaces -o name = %q, want %s listed", out, want)
			}
		}
	})
}

// TestCleanupStopsProcesses starts two clusters at once (distinct ports) and
// checks, from /proc, that their processes run during the test and are gone once
// its cleanup has run.
func TestCleanupStopsProcesses(t *testing.T) {
	var (
		mu   sync.Mutex
		pids = map[int]string{}
	)
	t.Run("clusters", func(t *testing.T) {
		for i := range 2 {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				c := Start(t)
				if _, err := c.Clientset(t).CoreV1().Namespaces().Get(ctx(t), "default", metav1.GetOptions{}); err != nil {
					t.Fatalf("cluster %d: %v", i, err)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, p := range []*process{c.etcd, c.apiserver} {
					if s := procState(p.pid); s == "" || s == "Z" {
						t.Errorf("%s pid %d state %q while the cluster is up, want running", p.name, p.pid, s)
					}
					pids[p.pid] = p.name
				}
			})
		}
	})
	if len(pids) != 4 {
		t.Fatalf("recorded %d processes (%v), want 4", len(pids), pids)
	}
	for pid, name := range pids {
		if s := procState(pid); s != "" {
			t.Errorf("%s pid %d still exists after cleanup (state %q)", name, pid, s)
		}
	}
}

// helperEnv makes TestChildrenDieWithTestProcess, run as a child test process,
// start a cluster, print its pids and wait to be killed.
const helperEnv = "MARINA_KUBETEST_HELPER"

// TestChildrenDieWithTestProcess kills (SIGKILL, no cleanup) a test process that
// has a cluster up, and checks that etcd and kube-apiserver die with it.
func TestChildrenDieWithTestProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		c := Start(t)
		fmt.Printf("KUBETEST_PIDS %d %d\n", c.etcd.pid, c.apiserver.pid)
		time.Sleep(2 * time.Minute) // the parent kills this process long before
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("only Linux has a parent-death signal; elsewhere a killed test leaves its cluster running")
	}
	RequireAssets(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildrenDieWithTestProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var pids []int
	timeout := time.After(StartTimeout + 30*time.Second)
	for pids == nil {
		select {
		case line, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("helper test process ended without starting a cluster:\n%s", stderr.String())
			}
			if f := strings.Fields(line); len(f) == 3 && f[0] == "KUBETEST_PIDS" {
				for _, s := range f[1:] {
					pid, err := strconv.Atoi(s)
					if err != nil {
						t.Fatalf("helper printed %q", line)
					}
					pids = append(pids, pid)
				}
			}
		case <-timeout:
			t.Fatalf("helper test process printed no pids in %s:\n%s", StartTimeout+30*time.Second, stderr.String())
		}
	}
	for _, pid := range pids {
		if s := procState(pid); s == "" || s == "Z" {
			t.Fatalf("pid %d state %q before the kill, want running", pid, s)
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true
	go func() {
		for range lines { // drain until the pipe closes
		}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for s := procState(pid); s != "" && s != "Z"; s = procState(pid) {
			if time.Now().After(deadline) {
				for _, pid := range pids { // do not leak them into the rest of the run
					signalGroup(pid, syscall.SIGKILL)
				}
				t.Fatalf("pid %d (state %q) survived its test process by 10s", pid, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestStopEscalatesToKill stops a process group whose members ignore SIGTERM:
// stop must SIGKILL the leader and the member it started.
func TestStopEscalatesToKill(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	p, err := startProcess("stubborn", "/bin/sh",
		[]string{"-c", `trap "" TERM; sleep 60 & echo $! > "$0"; wait`, pidFile}, dir, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(pidFile)
		if err == nil {
			if child, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			signalGroup(p.pid, syscall.SIGKILL)
			t.Fatalf("the stub wrote no child pid in 10s (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	const timeout = 300 * time.Millisecond
	begin := time.Now()
	if err := p.stop(timeout); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if took := time.Since(begin); took < timeout {
		t.Errorf("stop returned after %s, before the SIGTERM grace of %s: SIGTERM was not ignored?", took, timeout)
	}
	if exited, err := p.exited(); !exited || !strings.Contains(err.Error(), "killed") {
		t.Errorf("leader exited %v with %v, want killed", exited, err)
	}
	for _, pid := range []int{p.pid, child} {
		if s := procState(pid); s != "" && s != "Z" {
			t.Errorf("pid %d still running (state %q) after stop", pid, s)
		}
	}
}

// procState returns the state letter of pid from /proc/<pid>/stat ("R", "S", "Z",
// ...) or "" when no such process exists.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func managers(o metav1.Object) map[string]metav1.ManagedFieldsOperationType {
	m := map[string]metav1.ManagedFieldsOperationType{}
	for _, f := range o.GetManagedFields() {
		m[f.Manager] = f.Operation
	}
	return m
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
