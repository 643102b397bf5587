package coredns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// fixedNow is the restart time the plugin's clock gives in these tests.
var fixedNow = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

const noWait = `{"rolloutTimeout": "0s"}`

// TestPostClusterAPIServer is tier 3: PostCluster and its rollout wait run
// (through plugintest's gRPC harness) against a real kube-apiserver holding
// the objects kubeadm creates for CoreDNS. One control plane serves every
// subtest; each subtest starts from freshly created kube-system/coredns
// objects. kubetest runs no controllers, so where a rollout must finish a
// stand-in goroutine reports it through the Deployment's status subresource.
func TestPostClusterAPIServer(t *testing.T) {
	s := &apiServer{Cluster: kubetest.Start(t)}
	s.cs = s.Clientset(t)
	s.dyn = s.Dynamic(t)
	for _, st := range []struct {
		name string
		test func(*testing.T, *apiServer)
	}{
		{"edits and restarts once, then nothing", testRestartsOnce},
		{"zone removed", testZoneRemoved},
		{"nothing to forward", testNothingToForward},
		{"conflict retried", testConflictRetry},
		{"restart redone", testRestartRedone},
		{"errors", testErrors},
		{"kubeconfig", testKubeconfig},
		{"rollout timeout", testRolloutTimeout},
		{"WaitRollout", testWaitRollout},
	} {
		t.Run(st.name, func(t *testing.T) { st.test(t, s) })
	}
}

// testRestartsOnce: the first run makes the Corefile corefile's golden file,
// records its hash, restarts CoreDNS once (the kubectl way, at the plugin's
// clock) and waits until the rollout is reported; the second run sends no
// write at all and says CoreDNS is up to date.
func testRestartsOnce(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	created := s.deployment(t)
	rolledOut := deploymentControllerStandIn(t, s.cs)
	calls := &apiCalls{}
	h := plugintest.New(t, s.plugin(calls))

	if _, err := s.run(h, `{"rolloutTimeout": "60s"}`, plugintest.WithEnv(withCustomDomains)); err != nil {
		t.Fatal(err)
	}
	cm := s.configMap(t)
	if got, want := cm.Data[CorefileKey], testdata(t, "golden/kind-kubeadm-1.34"); got != want {
		t.Fatalf("Corefile:\n%s\nwant (corefile/testdata/golden/kind-kubeadm-1.34.Corefile):\n%s", got, want)
	}
	hash := cm.Annotations[CorefileHashAnnotation]
	if hash != corefileHash([]byte(cm.Data[CorefileKey])) {
		t.Errorf("ConfigMap hash annotation = %q, want the Corefile's sha256", hash)
	}
	d := s.deployment(t)
	if ann := d.Spec.Template.Annotations; ann[RestartedAtAnnotation] != "2026-07-01T12:00:00Z" || ann[CorefileHashAnnotation] != hash {
		t.Errorf("pod template annotations = %v, want restartedAt 2026-07-01T12:00:00Z and hash %s", ann, hash)
	}
	if want := []string{"update configmaps", "update deployments"}; !slices.Equal(calls.writes(), want) {
		t.Errorf("writes = %v, want %v", calls.writes(), want)
	}
	if d.Generation != created.Generation+1 {
		t.Errorf("generation %d -> %d, want one restart", created.Generation, d.Generation)
	}
	if got := rolledOut.Load(); got < d.Generation {
		t.Errorf("the hook returned before the rollout of generation %d was reported (controller reported %d): it did not wait", d.Generation, got)
	}

	calls.reset()
	res, err := s.run(h, `{"rolloutTimeout": "60s"}`, plugintest.WithEnv(withCustomDomains))
	if err != nil {
		t.Fatal(err)
	}
	if w := calls.writes(); len(w) != 0 {
		t.Errorf("second run wrote %v, want nothing", w)
	}
	if cm2, d2 := s.configMap(t), s.deployment(t); cm2.ResourceVersion != cm.ResourceVersion || d2.ResourceVersion != d.ResourceVersion {
		t.Errorf("second run changed the objects: ConfigMap resourceVersion %s -> %s, Deployment %s -> %s",
			cm.ResourceVersion, cm2.ResourceVersion, d.ResourceVersion, d2.ResourceVersion)
	}
	if len(res.Warnings) != 0 || len(res.Outputs) != 0 {
		t.Errorf("result = %+v", res)
	}
	if p := h.Progress(); len(p) == 0 || !strings.Contains(p[len(p)-1], "up to date") {
		t.Errorf("progress = %q, want it to end with up to date", p)
	}
}

// testZoneRemoved: dropping a custom domain from the config removes its
// block and restarts CoreDNS once more, for the new Corefile.
func testZoneRemoved(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	calls := &apiCalls{}
	h := plugintest.New(t, s.plugin(calls))
	if _, err := s.run(h, noWait, plugintest.WithEnv(withCustomDomains)); err != nil {
		t.Fatal(err)
	}
	first := s.deployment(t)
	calls.reset()
	if _, err := s.run(h, noWait); err != nil {
		t.Fatal(err)
	}
	got := s.configMap(t).Data[CorefileKey]
	if strings.Contains(got, "example.dev") || !strings.Contains(got, "# managed by marina: demo.internal") {
		t.Fatalf("Corefile after removing example.dev:\n%s", got)
	}
	second := s.deployment(t)
	if h1, h2 := first.Spec.Template.Annotations[CorefileHashAnnotation], second.Spec.Template.Annotations[CorefileHashAnnotation]; h2 == h1 || h2 != corefileHash([]byte(got)) {
		t.Errorf("restart hash = %s, want the new Corefile's (first was %s)", h2, h1)
	}
	if want := []string{"update configmaps", "update deployments"}; !slices.Equal(calls.writes(), want) {
		t.Errorf("writes = %v, want %v", calls.writes(), want)
	}
}

// testNothingToForward: with no zone and no custom domain, an untouched
// cluster is left alone (no write, no restart).
func testNothingToForward(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	cm, d := s.configMap(t), s.deployment(t)
	calls := &apiCalls{}
	h := plugintest.New(t, s.plugin(calls))
	if _, err := s.run(h, noWait, plugintest.WithEnv(func(e *sdk.Env) { e.DNSZone, e.DNSServerIP = "", "" })); err != nil {
		t.Fatal(err)
	}
	if w := calls.writes(); len(w) != 0 {
		t.Errorf("writes = %v, want none", w)
	}
	if reads := calls.count("get configmaps"); reads == 0 {
		t.Error("the hook never read the ConfigMap: the test does not exercise it")
	}
	if cm2, d2 := s.configMap(t), s.deployment(t); cm2.ResourceVersion != cm.ResourceVersion || d2.ResourceVersion != d.ResourceVersion {
		t.Errorf("objects changed: ConfigMap resourceVersion %s -> %s, Deployment %s -> %s", cm.ResourceVersion, cm2.ResourceVersion, d.ResourceVersion, d2.ResourceVersion)
	}
}

// testConflictRetry: another writer changes the Corefile between the hook's
// read and its write, so the API server refuses the hook's update with a
// real 409 Conflict; the update is redone on the fresh object, keeping the
// other writer's change, and CoreDNS is restarted for the result.
func testConflictRetry(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	var raced atomic.Bool
	calls := &apiCalls{before: func(r *http.Request) {
		if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/configmaps/"+ConfigMap) || raced.Swap(true) {
			return
		}
		// The hook has read the ConfigMap and is about to write it back:
		// another client writes first.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cm, err := s.cs.CoreV1().ConfigMaps(Namespace).Get(ctx, ConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Errorf("racing writer: %v", err)
			return
		}
		cm.Data[CorefileKey] = strings.Replace(cm.Data[CorefileKey], "cache 30 {", "cache 60 {", 1)
		if _, err := s.cs.CoreV1().ConfigMaps(Namespace).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "racing-writer"}); err != nil {
			t.Errorf("racing writer: %v", err)
		}
	}}
	h := plugintest.New(t, s.plugin(calls))
	if _, err := s.run(h, noWait); err != nil {
		t.Fatal(err)
	}
	if !raced.Load() {
		t.Fatal("the update was never raced")
	}
	want := []string{"update configmaps 409", "update configmaps 200", "update deployments 200"}
	if got := calls.writesWithCodes(); !slices.Equal(got, want) {
		t.Errorf("writes = %v, want %v (a refused update, its retry, the restart)", got, want)
	}
	cm := s.configMap(t)
	got := cm.Data[CorefileKey]
	if !strings.Contains(got, "cache 60 {") || !strings.Contains(got, "# managed by marina: demo.internal") {
		t.Fatalf("Corefile after the race (want the other writer's cache 60 and marina's block):\n%s", got)
	}
	if h := s.deployment(t).Spec.Template.Annotations[CorefileHashAnnotation]; h != corefileHash([]byte(got)) {
		t.Errorf("restart hash = %s, want the hash of the Corefile written after the race", h)
	}
}

// testRestartRedone: an admission policy refuses the CoreDNS restart after
// the ConfigMap was written, so the hook fails; once the policy is gone the
// next run, which has no Corefile change to make, still restarts CoreDNS.
func testRestartRedone(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	allow := s.refuseDeploymentUpdates(t)
	calls := &apiCalls{}
	h := plugintest.New(t, s.plugin(calls))
	_, err := s.run(h, noWait)
	if err == nil || !strings.Contains(err.Error(), "restarting Deployment kube-system/coredns") || !strings.Contains(err.Error(), refusedMessage) {
		t.Fatalf("err = %v, want the refused restart", err)
	}
	if s.configMap(t).Annotations[CorefileHashAnnotation] == "" {
		t.Fatal("the ConfigMap was not written before the restart failed: the test does not exercise the re-run")
	}
	if ann := s.deployment(t).Spec.Template.Annotations; ann[RestartedAtAnnotation] != "" {
		t.Fatalf("restarted despite the policy: %v", ann)
	}

	allow()
	calls.reset()
	if _, err := s.run(h, noWait); err != nil {
		t.Fatal(err)
	}
	if want := []string{"update deployments"}; !slices.Equal(calls.writes(), want) {
		t.Errorf("re-run writes = %v, want %v", calls.writes(), want)
	}
	ann := s.deployment(t).Spec.Template.Annotations
	if ann[RestartedAtAnnotation] == "" || ann[CorefileHashAnnotation] != s.configMap(t).Annotations[CorefileHashAnnotation] {
		t.Errorf("not restarted for the written Corefile on the re-run: pod template annotations %v", ann)
	}
}

// testErrors: what the hook says, and that it writes nothing, when the
// cluster's CoreDNS objects are missing or their Corefile cannot be edited.
func testErrors(t *testing.T, s *apiServer) {
	kind := testdata(t, "in/kind-kubeadm-1.34")
	noKey := kubeadmConfigMap("")
	noKey.Data = map[string]string{"Corefile.old": kind}
	cases := []struct {
		name   string
		cm     *corev1.ConfigMap
		deploy bool
		opts   []plugintest.Option
		want   []string
		writes []string
	}{
		{"no ConfigMap", nil, true, nil,
			[]string{"ConfigMap kube-system/coredns not found", "disable the coredns plugin"}, nil},
		{"no Corefile key", noKey, true, nil,
			[]string{`no "Corefile" key`}, nil},
		{"no Deployment", kubeadmConfigMap(kind), false, nil,
			[]string{"Deployment kube-system/coredns was not found"}, []string{"update configmaps"}},
		{"user block for the zone", kubeadmConfigMap(kind + "demo.internal:53 {\n    forward . 10.9.9.9\n}\n"), true, nil,
			[]string{"key Corefile", "Corefile line 24", "not written by marina", "kubectl -n kube-system edit configmap coredns"}, nil},
		{"unparseable Corefile", kubeadmConfigMap(".:53 {\n    errors\n"), true, nil,
			[]string{"Corefile line 1", "never closed"}, nil},
		{"bad custom resolver", kubeadmConfigMap(kind), true,
			[]plugintest.Option{plugintest.WithEnv(func(e *sdk.Env) {
				e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "example.dev", Resolvers: []string{"dns.google"}}}
			})},
			[]string{`"dns.google"`, "not an IP address"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []any
			if tc.cm != nil {
				objs = append(objs, tc.cm)
			}
			if tc.deploy {
				objs = append(objs, kubeadmDeployment())
			}
			s.reset(t, objs...)
			calls := &apiCalls{}
			h := plugintest.New(t, s.plugin(calls))
			_, err := s.run(h, noWait, tc.opts...)
			if err == nil {
				t.Fatal("the hook succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if w := calls.writes(); !slices.Equal(w, tc.writes) {
				t.Errorf("writes = %v, want %v", w, tc.writes)
			}
		})
	}
}

// testKubeconfig: the plugin as marina builds it (New, so its own client
// constructor) reaches the cluster with the kubeconfig the host passes, and
// a kubeconfig that cannot be read, whose credentials the API server
// refuses, or that does not trust the server's certificate fails with an
// error that names the cluster or the object it could not read.
func testKubeconfig(t *testing.T, s *apiServer) {
	cases := []struct {
		name       string
		kubeconfig func(t *testing.T) []byte
		want       []string // nil: the hook succeeds
	}{
		{"the cluster's own", func(*testing.T) []byte { return s.Kubeconfig }, nil},
		{"not YAML", func(*testing.T) []byte { return []byte("{not yaml") }, []string{"kubeconfig", "cluster dev"}},
		{"wrong token", func(t *testing.T) []byte {
			return s.editKubeconfig(t, func(c *clientcmdapi.Config) {
				for _, u := range c.AuthInfos {
					u.Token = "not-the-token"
				}
			})
		}, []string{"reading ConfigMap kube-system/coredns", "Unauthorized"}},
		{"untrusted server certificate", func(t *testing.T) []byte {
			return s.editKubeconfig(t, func(c *clientcmdapi.Config) {
				for _, cl := range c.Clusters {
					cl.CertificateAuthorityData = otherCA(t)
				}
			})
		}, []string{"reading ConfigMap kube-system/coredns", "certificate signed by unknown authority"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
			before := s.configMap(t)
			h := plugintest.New(t, New())
			kubeconfig := tc.kubeconfig(t)
			_, err := h.Run(sdk.PostCluster, plugintest.WithConfig(noWait), plugintest.WithEnv(withCustomDomains),
				plugintest.WithCluster(func(c *sdk.Cluster) { c.Kubeconfig = kubeconfig }))
			after := s.configMap(t)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got, want := after.Data[CorefileKey], testdata(t, "golden/kind-kubeadm-1.34"); got != want {
					t.Errorf("Corefile:\n%s\nwant (corefile/testdata/golden/kind-kubeadm-1.34.Corefile):\n%s", got, want)
				}
				return
			}
			if err == nil {
				t.Fatal("the hook succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the ConfigMap changed (resourceVersion %s -> %s)", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

// testRolloutTimeout: with a rollout timeout and no Deployment controller
// to finish the restart, the hook reports a rollout that does not finish.
func testRolloutTimeout(t *testing.T, s *apiServer) {
	s.reset(t, kubeadmConfigMap(testdata(t, "in/kind-kubeadm-1.34")), kubeadmDeployment())
	h := plugintest.New(t, s.plugin(&apiCalls{}))
	_, err := s.run(h, `{"rolloutTimeout": "500ms"}`)
	if err == nil || !strings.Contains(err.Error(), "did not finish restarting within 500ms") || !strings.Contains(err.Error(), "has not seen the restart") {
		t.Fatalf("err = %v, want a rollout timeout while the controller has not seen the restart", err)
	}
}

// testWaitRollout stores each of rolloutCases in the Deployment (generation
// by spec updates, state through the status subresource, as the controller
// would) and checks WaitRollout's verdict, timeout and cancellation.
func testWaitRollout(t *testing.T, s *apiServer) {
	const timeout = 500 * time.Millisecond
	for _, tc := range rolloutCases {
		t.Run(tc.name, func(t *testing.T) {
			s.reset(t, kubeadmDeployment())
			s.setDeploymentState(t, tc.gen, tc.status)
			err := WaitRollout(context.Background(), s.dyn, timeout, pollInterval)
			if tc.done != (err == nil) {
				t.Fatalf("WaitRollout = %v, want done=%v", err, tc.done)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "within "+timeout.String())) {
				t.Fatalf("WaitRollout error %q does not say %q and the timeout", err, tc.msg)
			}
		})
	}

	t.Run("progress deadline exceeded", func(t *testing.T) {
		s.reset(t, kubeadmDeployment())
		s.setDeploymentState(t, 1, progressDeadlineExceeded())
		start := time.Now()
		err := WaitRollout(context.Background(), s.dyn, 10*time.Second, pollInterval)
		if err == nil || !strings.Contains(err.Error(), "progress deadline") || !strings.Contains(err.Error(), "timed out progressing") || time.Since(start) > 5*time.Second {
			t.Fatalf("WaitRollout = %v after %s, want the progress deadline at once", err, time.Since(start))
		}
	})

	t.Run("becomes ready while waiting", func(t *testing.T) {
		s.reset(t, kubeadmDeployment())
		s.setDeploymentState(t, 2, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2})
		calls := &apiCalls{}
		cs, err := calls.newClient(s.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		rolledOut := deploymentControllerStandIn(t, s.cs)
		if err := WaitRollout(context.Background(), cs, 30*time.Second, pollInterval); err != nil {
			t.Fatal(err)
		}
		if got := rolledOut.Load(); got != 2 {
			t.Errorf("WaitRollout returned before the controller reported generation 2 (reported %d)", got)
		}
		if reads := calls.count("get deployments"); reads < 2 {
			t.Errorf("WaitRollout read the Deployment %d times, want it to have seen it unfinished first", reads)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		s.reset(t, kubeadmDeployment())
		s.setDeploymentState(t, 2, appsv1.DeploymentStatus{ObservedGeneration: 1})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		err := WaitRollout(ctx, s.dyn, time.Minute, pollInterval)
		if !errors.Is(err, context.Canceled) || time.Since(start) > 10*time.Second {
			t.Fatalf("WaitRollout = %v after %s, want context.Canceled promptly", err, time.Since(start))
		}
	})
}

// apiServer is the control plane the subtests share, with an admin client
// for setting objects up and reading them back.
type apiServer struct {
	*kubetest.Cluster
	cs  kubernetes.Interface
	dyn dynamic.Interface // what the plugin's functions take
}

// reset deletes kube-system/coredns (ConfigMap and Deployment) and creates
// objs (*corev1.ConfigMap, *appsv1.Deployment) in their place.
func (s *apiServer) reset(t *testing.T, objs ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.cs.CoreV1().ConfigMaps(Namespace).Delete(ctx, ConfigMap, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// Background deletion: no finalizer, so the Deployment is gone at once
	// (there is no garbage collector to remove one).
	bg := metav1.DeletePropagationBackground
	if err := s.cs.AppsV1().Deployments(Namespace).Delete(ctx, Deployment, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.ConfigMap:
			_, err = s.cs.CoreV1().ConfigMaps(Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *appsv1.Deployment:
			_, err = s.cs.AppsV1().Deployments(Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			err = fmt.Errorf("reset cannot create a %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// pollInterval is how often the rollout is checked in these tests. Timeouts
// are not multiples of it: the last check comes well before the deadline.
// (When a check falls on the deadline itself, client-go's rate limiter can
// refuse it while the context is not yet done, and WaitRollout then reports
// that refusal instead of the rollout's status.)
const pollInterval = 200 * time.Millisecond

// plugin is the plugin with its client built from the request's kubeconfig
// (as New's is) but recording its API calls in calls, and a fixed clock.
func (s *apiServer) plugin(calls *apiCalls) *Plugin {
	return &Plugin{newClient: calls.newClient, now: func() time.Time { return fixedNow }, pollInterval: pollInterval}
}

// run runs PostCluster with config and the cluster's kubeconfig, then opts.
func (s *apiServer) run(h *plugintest.Harness, config string, opts ...plugintest.Option) (*sdk.Result, error) {
	return h.Run(sdk.PostCluster, append([]plugintest.Option{
		plugintest.WithConfig(config),
		plugintest.WithCluster(func(c *sdk.Cluster) { c.Kubeconfig = s.Kubeconfig }),
	}, opts...)...)
}

func (s *apiServer) configMap(t *testing.T) *corev1.ConfigMap {
	t.Helper()
	cm, err := s.cs.CoreV1().ConfigMaps(Namespace).Get(context.Background(), ConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func (s *apiServer) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	d, err := s.cs.AppsV1().Deployments(Namespace).Get(context.Background(), Deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// setDeploymentState brings the Deployment to generation gen by spec
// updates (the API server counts them) and stores status through the
// status subresource.
func (s *apiServer) setDeploymentState(t *testing.T, gen int64, status appsv1.DeploymentStatus) {
	t.Helper()
	ctx := context.Background()
	d := s.deployment(t)
	for d.Generation < gen {
		d.Spec.Template.Annotations = map[string]string{"test/generation": fmt.Sprint(d.Generation + 1)}
		var err error
		if d, err = s.cs.AppsV1().Deployments(Namespace).Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if d.Generation != gen {
		t.Fatalf("Deployment generation = %d, want %d", d.Generation, gen)
	}
	d.Status = status
	if _, err := s.cs.AppsV1().Deployments(Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// editKubeconfig returns the cluster's kubeconfig changed by edit.
func (s *apiServer) editKubeconfig(t *testing.T, edit func(*clientcmdapi.Config)) []byte {
	t.Helper()
	cfg, err := clientcmd.Load(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// otherCA is a self-signed CA certificate (PEM) that signed nothing the
// API server serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not-the-cluster-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// refusedMessage is what the admission policy of refuseDeploymentUpdates
// answers.
const refusedMessage = "test policy: the CoreDNS Deployment may not change"

// refuseDeploymentUpdates makes the API server refuse every update of the
// CoreDNS Deployment (a ValidatingAdmissionPolicy and its binding) and waits
// until it does. The returned func removes the policy and waits until
// updates pass again; it also runs when the test ends.
func (s *apiServer) refuseDeploymentUpdates(t *testing.T) (allow func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "marina-test-refuse-coredns-updates"
	fail := admissionv1.Fail
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.namespace != %q || object.metadata.name != %q", Namespace, Deployment),
				Message:    refusedMessage,
			}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
	api := s.cs.AdmissionregistrationV1()
	if _, err := api.ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ValidatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The API server loads policies asynchronously: wait until a dry-run
	// update is refused.
	s.waitDeploymentUpdate(t, true)

	var once sync.Once
	allow = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := api.ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
			if err := api.ValidatingAdmissionPolicies().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
			s.waitDeploymentUpdate(t, false)
		})
	}
	t.Cleanup(allow)
	return allow
}

// waitDeploymentUpdate waits (30 s at most) until a dry-run update of the
// CoreDNS Deployment is refused by the test policy, or passes.
func (s *apiServer) waitDeploymentUpdate(t *testing.T, refused bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		d, err := s.cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
		if err == nil {
			d.Annotations = map[string]string{"test/probe": time.Now().String()}
			_, err = s.cs.AppsV1().Deployments(Namespace).Update(ctx, d, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		}
		cancel()
		last = err
		isRefused := err != nil && strings.Contains(err.Error(), refusedMessage)
		if refused && isRefused || !refused && err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the test admission policy did not take effect (want refused=%v) within 30s; last dry-run update: %v", refused, last)
}

// deploymentControllerStandIn stands in for kube-controller-manager, which
// kubetest does not run: when the CoreDNS Deployment's generation moves
// ahead of its status, it waits a little (so a caller that does not wait
// would return first) and then reports the rollout complete through the
// status subresource. It returns the last generation it reported; it stops
// when the test ends.
func deploymentControllerStandIn(t *testing.T, cs kubernetes.Interface) *atomic.Int64 {
	var reported atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration >= d.Generation {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			replicas := *d.Spec.Replicas
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration: d.Generation,
				Replicas:           replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			}
			if _, err := cs.AppsV1().Deployments(Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err == nil {
				reported.Store(d.Generation)
			}
		}
	}()
	return &reported
}

// apiCalls records the requests of clients built by newClient, as
// "<verb> <resource>[/<subresource>] <status code>", and runs before (when
// set) just before each request is sent.
type apiCalls struct {
	before func(*http.Request)
	mu     sync.Mutex
	calls  []string
}

// newClient builds a clientset from kubeconfig, as the plugin's own
// constructor does, that records its requests.
func (a *apiCalls) newClient(kubeconfig []byte) (dynamic.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's kubeconfig: %w", err)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if a.before != nil {
				a.before(r)
			}
			resp, err := rt.RoundTrip(r)
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			a.mu.Lock()
			a.calls = append(a.calls, fmt.Sprintf("%s %s %d", verb(r), resource(r), code))
			a.mu.Unlock()
			return resp, err
		})
	})
	return dynamic.NewForConfig(cfg)
}

func (a *apiCalls) reset() {
	a.mu.Lock()
	a.calls = nil
	a.mu.Unlock()
}

// writesWithCodes lists the write requests with their status codes.
func (a *apiCalls) writesWithCodes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, c := range a.calls {
		if !strings.HasPrefix(c, "get ") {
			out = append(out, c)
		}
	}
	return out
}

// writes lists the write requests as "<verb> <resource>".
func (a *apiCalls) writes() []string {
	var out []string
	for _, c := range a.writesWithCodes() {
		out = append(out, c[:strings.LastIndexByte(c, ' ')])
	}
	return out
}

// count counts the requests "<verb> <resource>".
func (a *apiCalls) count(call string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		if strings.HasPrefix(c, call+" ") {
			n++
		}
	}
	return n
}

func verb(r *http.Request) string {
	switch r.Method {
	case http.MethodGet:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// resource is the resource (and subresource) of a namespaced API path
// such as /apis/apps/v1/namespaces/kube-system/deployments/coredns/status.
func resource(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	i := slices.Index(parts, "namespaces")
	switch {
	case i < 0 || len(parts) <= i+2:
		return r.URL.Path
	case len(parts) > i+4:
		return parts[i+2] + "/" + parts[i+4]
	}
	return parts[i+2]
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
