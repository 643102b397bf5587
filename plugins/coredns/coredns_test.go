package coredns

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/bcollard/marina/plugins/coredns/corefile"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

var fixedNow = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

// newFakePlugin returns the plugin wired to a fake clientset holding objs.
func newFakePlugin(objs ...runtime.Object) (*Plugin, *fake.Clientset) {
	cs := fake.NewClientset(objs...)
	p := &Plugin{
		newClient:    func([]byte) (kubernetes.Interface, error) { return cs, nil },
		now:          func() time.Time { return fixedNow },
		pollInterval: 10 * time.Millisecond,
	}
	return p, cs
}

// writes lists the create/update/patch calls made on the fake, as "verb resource".
func writes(cs *fake.Clientset) []string {
	var out []string
	for _, a := range cs.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
		}
	}
	return out
}

func getCM(t *testing.T, cs kubernetes.Interface) *corev1.ConfigMap {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(Namespace).Get(context.Background(), ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func getDeploy(t *testing.T, cs kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	d, err := cs.AppsV1().Deployments(Namespace).Get(context.Background(), Deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const noWait = `{"rolloutTimeout": "0s"}`

// TestDescribe checks what marina learns from the plugin over the real
// protocol (in-process gRPC): identity, hook, dependency, capability, config.
func TestDescribe(t *testing.T) {
	h := plugintest.New(t, New())
	d := h.Describe()
	if d.Name != "coredns" || d.Version != Version {
		t.Errorf("name/version = %s %s", d.Name, d.Version)
	}
	if !d.Has(sdk.PostCluster) || len(d.Hooks) != 1 {
		t.Errorf("hooks = %v, want [PostCluster]", d.Hooks)
	}
	if want := []sdk.Dependency{{Name: "localdns", Optional: true}}; !slices.Equal(d.Dependencies, want) {
		t.Errorf("dependencies = %+v, want %+v", d.Dependencies, want)
	}
	if !slices.Equal(d.Capabilities, []string{sdk.CapKubeconfig}) {
		t.Errorf("capabilities = %v", d.Capabilities)
	}
	if got := string(d.ConfigDefaults); got != `{"cache":30,"rolloutTimeout":"2m0s"}` {
		t.Errorf("config defaults = %s", got)
	}
}

func TestConfigValidation(t *testing.T) {
	h := plugintest.New(t, New())
	cases := []struct {
		config string
		path   string
		want   string
	}{
		{`{"cache": -1}`, "cache", "between 0"},
		{`{"cache": 100000}`, "cache", "between 0"},
		{`{"rolloutTimeout": "-5s"}`, "rolloutTimeout", "0 (do not wait)"},
		{`{"rolloutTimeout": "soon"}`, "rolloutTimeout", "duration"},
		{`{"cahce": 10}`, "cahce", `did you mean "cache"`},
	}
	for _, tc := range cases {
		ds := h.ValidateConfig(tc.config)
		if len(ds) != 1 || ds[0].Path != tc.path || !strings.Contains(ds[0].Summary, tc.want) {
			t.Errorf("ValidateConfig(%s) = %+v, want one error at %s containing %q", tc.config, ds, tc.path, tc.want)
		}
	}
	if ds := h.ValidateConfig(`{"cache": 0, "rolloutTimeout": "30s"}`); len(ds) != 0 {
		t.Errorf("valid config refused: %+v", ds)
	}
}

func TestForwards(t *testing.T) {
	base := plugintest.DefaultEnv("")
	cases := []struct {
		name string
		edit func(*sdk.Env)
		want []corefile.Forward
		err  string
	}{
		{"local zone only", func(*sdk.Env) {}, []corefile.Forward{{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}}}, ""},
		{"zone then custom domains in order", func(e *sdk.Env) {
			e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "b.example", Resolvers: []string{"1.1.1.1"}}, {Domain: "a.example", Resolvers: []string{"8.8.8.8", "8.8.4.4"}}}
		}, []corefile.Forward{
			{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}},
			{Zone: "b.example", Resolvers: []string{"1.1.1.1"}},
			{Zone: "a.example", Resolvers: []string{"8.8.8.8", "8.8.4.4"}},
		}, ""},
		{"no local zone", func(e *sdk.Env) { e.DNSZone, e.DNSServerIP = "", "" }, nil, ""},
		{"zone without server", func(e *sdk.Env) { e.DNSServerIP = "" }, nil, "dns.serverIP"},
		{"custom domain is the zone", func(e *sdk.Env) {
			e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "Demo.Internal.", Resolvers: []string{"1.1.1.1"}}}
		}, nil, "kind.customDNSResolvers[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := base
			tc.edit(&env)
			got, err := Forwards(env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("forwards = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Zone != tc.want[i].Zone || !slices.Equal(got[i].Resolvers, tc.want[i].Resolvers) {
					t.Fatalf("forwards = %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

// TestPostClusterFake runs the hook through plugintest against a fake
// clientset holding kubeadm's objects: the Corefile becomes corefile's
// golden file, CoreDNS is restarted once, and a second run writes nothing.
func TestPostClusterFake(t *testing.T) {
	p, cs := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	h := plugintest.New(t, p)
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait), plugintest.WithEnv(withCustomDomains)); err != nil {
		t.Fatal(err)
	}
	cm := getCM(t, cs)
	if got, want := cm.Data[CorefileKey], testdata(t, "golden/kind-kubeadm-1.34"); got != want {
		t.Fatalf("Corefile:\n%s\nwant (corefile/testdata/golden/kind-kubeadm-1.34.Corefile):\n%s", got, want)
	}
	hash := cm.Annotations[CorefileHashAnnotation]
	if hash != corefileHash([]byte(cm.Data[CorefileKey])) {
		t.Errorf("ConfigMap hash annotation = %q, want the Corefile's sha256", hash)
	}
	ann := getDeploy(t, cs).Spec.Template.Annotations
	if ann[RestartedAtAnnotation] != "2026-07-01T12:00:00Z" || ann[CorefileHashAnnotation] != hash {
		t.Errorf("pod template annotations = %v", ann)
	}
	if want := []string{"update configmaps", "update deployments"}; !slices.Equal(writes(cs), want) {
		t.Errorf("writes = %v, want %v", writes(cs), want)
	}

	cs.ClearActions()
	res, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait), plugintest.WithEnv(withCustomDomains))
	if err != nil {
		t.Fatal(err)
	}
	if w := writes(cs); len(w) != 0 {
		t.Errorf("second run wrote %v, want nothing", w)
	}
	if len(res.Warnings) != 0 || len(res.Outputs) != 0 {
		t.Errorf("result = %+v", res)
	}
	if p := h.Progress(); len(p) == 0 || !strings.Contains(p[len(p)-1], "up to date") {
		t.Errorf("progress = %q, want it to end with up to date", p)
	}
}

// TestPostClusterZoneRemoved: dropping a custom domain from the config
// removes its block and restarts CoreDNS once more.
func TestPostClusterZoneRemoved(t *testing.T) {
	p, cs := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	h := plugintest.New(t, p)
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait), plugintest.WithEnv(withCustomDomains)); err != nil {
		t.Fatal(err)
	}
	first := getDeploy(t, cs).Spec.Template.Annotations[CorefileHashAnnotation]
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait)); err != nil {
		t.Fatal(err)
	}
	got := getCM(t, cs).Data[CorefileKey]
	if strings.Contains(got, "example.dev") || !strings.Contains(got, "# managed by marina: demo.internal") {
		t.Fatalf("Corefile after removing example.dev:\n%s", got)
	}
	if second := getDeploy(t, cs).Spec.Template.Annotations[CorefileHashAnnotation]; second == first || second != corefileHash([]byte(got)) {
		t.Errorf("restart hash = %s, want the new Corefile's (first was %s)", second, first)
	}
}

// TestPostClusterNothingToForward: with no zone and no custom domain, an
// untouched cluster is left alone (no write, no restart).
func TestPostClusterNothingToForward(t *testing.T) {
	p, cs := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	h := plugintest.New(t, p)
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait), plugintest.WithEnv(func(e *sdk.Env) { e.DNSZone, e.DNSServerIP = "", "" })); err != nil {
		t.Fatal(err)
	}
	if w := writes(cs); len(w) != 0 {
		t.Errorf("writes = %v, want none", w)
	}
}

// TestPostClusterConflictRetry: a ConfigMap update that loses a race is
// redone on the fresh object, keeping the other writer's change.
func TestPostClusterConflictRetry(t *testing.T) {
	p, cs := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	raced := false
	cs.PrependReactor("update", "configmaps", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if raced {
			return false, nil, nil
		}
		raced = true
		// Another writer changes the Corefile first (through the tracker:
		// the clientset is locked while a reactor runs).
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		obj, err := cs.Tracker().Get(gvr, Namespace, ConfigMap)
		if err != nil {
			return true, nil, err
		}
		cm := obj.(*corev1.ConfigMap).DeepCopy()
		cm.Data[CorefileKey] = strings.Replace(cm.Data[CorefileKey], "cache 30 {", "cache 60 {", 1)
		if err := cs.Tracker().Update(gvr, cm, Namespace); err != nil {
			return true, nil, err
		}
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, ConfigMap, errors.New("the object has been modified"))
	})
	h := plugintest.New(t, p)
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait)); err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the update was never raced")
	}
	got := getCM(t, cs).Data[CorefileKey]
	if !strings.Contains(got, "cache 60 {") || !strings.Contains(got, "# managed by marina: demo.internal") {
		t.Fatalf("Corefile after the race:\n%s", got)
	}
	if n := slices.Index(writes(cs), "update deployments"); n < 0 {
		t.Errorf("no restart after the retried update: %v", writes(cs))
	}
}

// TestPostClusterRestartRedone: when the restart fails after the ConfigMap
// was written, the next run (which has no Corefile change) restarts.
func TestPostClusterRestartRedone(t *testing.T) {
	p, cs := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	fail := true
	cs.PrependReactor("update", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		}
		return false, nil, nil
	})
	h := plugintest.New(t, p)
	_, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait))
	if err == nil || !strings.Contains(err.Error(), "restarting Deployment kube-system/coredns") {
		t.Fatalf("err = %v, want the restart failure", err)
	}
	fail = false
	cs.ClearActions()
	if _, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"update deployments"}; !slices.Equal(writes(cs), want) {
		t.Errorf("re-run writes = %v, want %v", writes(cs), want)
	}
	if getDeploy(t, cs).Spec.Template.Annotations[RestartedAtAnnotation] == "" {
		t.Error("not restarted on the re-run")
	}
}

func TestPostClusterErrors(t *testing.T) {
	kind := testdata(t, "in/kind-kubeadm-1.34")
	noKey := kubeadmConfigMap("")
	noKey.Data = map[string]string{"Corefile.old": kind}
	cases := []struct {
		name string
		objs []runtime.Object
		opts []plugintest.Option
		want []string
	}{
		{"no ConfigMap", []runtime.Object{kubeadmDeployment()}, nil,
			[]string{"ConfigMap kube-system/coredns not found", "disable the coredns plugin"}},
		{"no Corefile key", []runtime.Object{noKey, kubeadmDeployment()}, nil,
			[]string{`no "Corefile" key`}},
		{"no Deployment", []runtime.Object{kubeadmConfigMap(kind)}, nil,
			[]string{"Deployment kube-system/coredns was not found"}},
		{"user block for the zone", []runtime.Object{kubeadmConfigMap(kind + "demo.internal:53 {\n    forward . 10.9.9.9\n}\n"), kubeadmDeployment()}, nil,
			[]string{"key Corefile", "Corefile line 24", "not written by marina", "kubectl -n kube-system edit configmap coredns"}},
		{"unparseable Corefile", []runtime.Object{kubeadmConfigMap(".:53 {\n    errors\n"), kubeadmDeployment()}, nil,
			[]string{"Corefile line 1", "never closed"}},
		{"bad custom resolver", []runtime.Object{kubeadmConfigMap(kind), kubeadmDeployment()},
			[]plugintest.Option{plugintest.WithEnv(func(e *sdk.Env) {
				e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "example.dev", Resolvers: []string{"dns.google"}}}
			})},
			[]string{`"dns.google"`, "not an IP address"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, cs := newFakePlugin(tc.objs...)
			h := plugintest.New(t, p)
			_, err := h.Run(sdk.PostCluster, append([]plugintest.Option{plugintest.WithConfig(noWait)}, tc.opts...)...)
			if err == nil {
				t.Fatal("the hook succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.name != "no Deployment" {
				if w := writes(cs); len(w) != 0 {
					t.Errorf("wrote %v before failing", w)
				}
			}
		})
	}
}

// TestPostClusterBadKubeconfig: the fake harness kubeconfig is replaced by
// garbage; the real client constructor must say what is wrong.
func TestPostClusterBadKubeconfig(t *testing.T) {
	h := plugintest.New(t, New())
	_, err := h.Run(sdk.PostCluster, plugintest.WithCluster(func(c *sdk.Cluster) { c.Kubeconfig = []byte("{not yaml") }))
	if err == nil || !strings.Contains(err.Error(), "kubeconfig") || !strings.Contains(err.Error(), "cluster dev") {
		t.Fatalf("err = %v, want a kubeconfig error naming the cluster", err)
	}
}

// TestWaitRollout drives a Deployment's status the way its controller
// would and checks kubectl's rollout rules, the timeout and cancellation.
func TestWaitRollout(t *testing.T) {
	type st = appsv1.DeploymentStatus
	cases := []struct {
		name   string
		gen    int64
		status st
		done   bool
		err    string
	}{
		{"controller has not seen it", 2, st{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, false, "has not seen"},
		{"pods not updated", 2, st{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}, false, "1 of 2 pods updated"},
		{"old pods terminating", 2, st{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, AvailableReplicas: 2}, false, "1 old pods"},
		{"not available", 2, st{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 1}, false, "1 of 2 updated pods available"},
		{"done", 2, st{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := kubeadmDeployment()
			d.Generation, d.Status = tc.gen, tc.status
			done, msg, err := rolloutDone(d)
			if err != nil || done != tc.done || !strings.Contains(msg, tc.err) {
				t.Fatalf("rolloutDone = %v %q %v, want %v %q", done, msg, err, tc.done, tc.err)
			}
			_, cs := newFakePlugin(d)
			err = WaitRollout(context.Background(), cs, 50*time.Millisecond, 5*time.Millisecond)
			if tc.done != (err == nil) {
				t.Fatalf("WaitRollout = %v", err)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "within 50ms")) {
				t.Fatalf("WaitRollout error %q does not say %q and the timeout", err, tc.err)
			}
		})
	}

	t.Run("progress deadline exceeded", func(t *testing.T) {
		d := kubeadmDeployment()
		d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet coredns-abc has timed out progressing."}}
		_, cs := newFakePlugin(d)
		err := WaitRollout(context.Background(), cs, time.Minute, 5*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "progress deadline") || !strings.Contains(err.Error(), "timed out progressing") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("becomes ready while waiting", func(t *testing.T) {
		d := kubeadmDeployment()
		d.Generation = 2
		_, cs := newFakePlugin(d)
		gets := 0
		cs.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			gets++
			if gets == 3 { // the controller catches up
				d := d.DeepCopy()
				d.Status = st{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}
				return true, d, nil
			}
			return false, nil, nil
		})
		if err := WaitRollout(context.Background(), cs, 10*time.Second, 5*time.Millisecond); err != nil || gets != 3 {
			t.Fatalf("WaitRollout = %v after %d reads, want success after 3", err, gets)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		d := kubeadmDeployment()
		d.Generation = 2
		_, cs := newFakePlugin(d)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		start := time.Now()
		err := WaitRollout(ctx, cs, time.Minute, 5*time.Millisecond)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
			t.Fatalf("WaitRollout = %v after %s, want context.Canceled promptly", err, time.Since(start))
		}
	})
}

// TestPostClusterWaits: with a rollout timeout the hook waits for the
// restart and reports a rollout that does not finish.
func TestPostClusterWaits(t *testing.T) {
	p, _ := newFakePlugin(kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	h := plugintest.New(t, p)
	// The fake has no Deployment controller: the restart never completes.
	_, err := h.Run(sdk.PostCluster, plugintest.WithConfig(`{"rolloutTimeout": "100ms"}`))
	if err == nil || !strings.Contains(err.Error(), "did not finish restarting within 100ms") {
		t.Fatalf("err = %v, want a rollout timeout", err)
	}
}
