package metallb

// Tier 3: PostCluster against a real kube-apiserver (sdk/kubetest). There
// is no kubelet or controller-manager, so the test plays the parts of the
// cluster the plugin relies on — see fakeController.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

const webhookService = "metallb-webhook-service"

func TestPostClusterAgainstAPIServer(t *testing.T) {
	kc := kubetest.Start(t)
	cs := kc.Clientset(t)
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	wh := newFakeWebhook(t)
	fc := startFakeController(ctx, t, cs, wh)

	h := plugintest.New(t, New())
	withCluster := func(edit func(*sdk.Cluster)) plugintest.Option {
		return plugintest.WithCluster(func(cl *sdk.Cluster) {
			cl.Kubeconfig, cl.KubeconfigPath = kc.Kubeconfig, kc.KubeconfigPath
			edit(cl)
		})
	}
	run := func(t *testing.T, opts ...plugintest.Option) *sdk.Result {
		t.Helper()
		start := time.Now()
		res, err := h.Run(sdk.PostCluster, append([]plugintest.Option{plugintest.WithTimeout(2 * time.Minute)}, opts...)...)
		if err != nil {
			t.Fatalf("PostCluster: %v\nprogress: %q", err, h.Progress())
		}
		t.Logf("PostCluster took %v; progress: %q", time.Since(start).Round(time.Millisecond), h.Progress())
		return res
	}
	defaults := withCluster(func(*sdk.Cluster) {})
	wantRanges := []string{"172.30.1.1-172.30.1.7", "172.30.1.16-172.30.1.254"}

	t.Run("install retries until the webhook serves", func(t *testing.T) {
		res := run(t, defaults)
		if n := fc.refusals.Load(); n < 1 {
			t.Errorf("the API server refused the pool %d times for an unreachable webhook; the test should have made it do so", n)
		}
		if !containsLine(h.Progress(), "MetalLB's webhook is not serving yet (attempt 1), retrying") {
			t.Errorf("no retry reported in progress %q", h.Progress())
		}
		if got := wh.seen(); !contains(got, "CREATE IPAddressPool metallb-system/marina-slot-1") || !contains(got, "CREATE L2Advertisement metallb-system/marina-slot-1") {
			t.Errorf("the webhook saw %q", got)
		}
		want := map[string]string{OutputPool: "marina-slot-1", OutputAddresses: strings.Join(wantRanges, ",")}
		if !reflect.DeepEqual(res.Outputs, want) {
			t.Errorf("outputs = %v, want %v", res.Outputs, want)
		}
		objs, err := manifestObjects("", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if _, err := get(ctx, c, o); err != nil {
				t.Errorf("%s was not applied: %v", kube.Describe(o), err)
			}
		}
		checkPool(ctx, t, c, "marina-slot-1", wantRanges)
	})

	t.Run("re-run changes nothing", func(t *testing.T) {
		before := resourceVersions(ctx, t, c, "", "")
		run(t, defaults)
		after := resourceVersions(ctx, t, c, "", "")
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: resourceVersion %s -> %s on a re-run", k, v, after[k])
			}
		}
		if containsLine(h.Progress(), "not serving yet") {
			t.Errorf("a re-run retried: %q", h.Progress())
		}
	})

	t.Run("changed pool and images are applied, stale pools pruned", func(t *testing.T) {
		// What an earlier configuration left behind, and a user's own pool.
		for _, o := range []*unstructured.Unstructured{
			poolObject("IPAddressPool", "marina-slot-9", true, map[string]any{"addresses": []any{"172.30.9.1-172.30.9.7"}}),
			poolObject("L2Advertisement", "marina-slot-9", true, map[string]any{"ipAddressPools": []any{"marina-slot-9"}}),
			poolObject("IPAddressPool", "user-pool", false, map[string]any{"addresses": []any{"192.168.200.0/28"}}),
		} {
			if err := c.Apply(ctx, "test-user", o); err != nil {
				t.Fatal(err)
			}
		}
		before := resourceVersions(ctx, t, c, "", "")
		ctrlImage, speakerImage := "127.0.0.1:5001/metallb/controller:v0.16.2", "127.0.0.1:5001/metallb/speaker:v0.16.2"
		newRanges := []string{"172.30.1.16-172.30.1.200"}
		run(t, withCluster(func(cl *sdk.Cluster) {
			cl.MetalLBPools = []sdk.AddressRange{{First: "172.30.1.16", Last: "172.30.1.200"}}
		}), plugintest.WithEnv(func(e *sdk.Env) {
			e.Images = map[string]string{ImageKeyController: ctrlImage, ImageKeySpeaker: speakerImage}
		}))
		checkPool(ctx, t, c, "marina-slot-1", newRanges)
		for _, name := range []string{"IPAddressPool marina-slot-9", "L2Advertisement marina-slot-9"} {
			kind, n, _ := strings.Cut(name, " ")
			if _, err := get(ctx, c, poolObject(kind, n, true, nil)); !apierrors.IsNotFound(err) {
				t.Errorf("stale %s was not pruned: %v", name, err)
			}
			if !containsLine(h.Progress(), "removed stale "+kind+" metallb-system/marina-slot-9") {
				t.Errorf("pruning %s not reported: %q", name, h.Progress())
			}
		}
		if _, err := get(ctx, c, poolObject("IPAddressPool", "user-pool", false, nil)); err != nil {
			t.Errorf("the user's pool is gone: %v", err)
		}
		d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, ControllerDeployment, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != ctrlImage || d.Status.ObservedGeneration != d.Generation || d.Generation < 2 {
			t.Errorf("controller image %s generation %d observed %d", got, d.Generation, d.Status.ObservedGeneration)
		}
		ds, err := cs.AppsV1().DaemonSets(Namespace).Get(ctx, SpeakerDaemonSet, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ds.Spec.Template.Spec.Containers[0].Image; got != speakerImage {
			t.Errorf("speaker image %s", got)
		}
		after := resourceVersions(ctx, t, c, "", "")
		changed := map[string]bool{"Deployment metallb-system/controller": true, "DaemonSet metallb-system/speaker": true, "IPAddressPool metallb-system/marina-slot-1": true}
		for k, v := range before {
			if gone := after[k] == ""; !changed[k] && !gone && after[k] != v {
				t.Errorf("%s changed (resourceVersion %s -> %s) though only the pool and images did", k, v, after[k])
			}
			if changed[k] && after[k] == v {
				t.Errorf("%s did not change", k)
			}
		}
	})

	t.Run("a denied pool fails at once", func(t *testing.T) {
		wh.deny.Store(true)
		defer wh.deny.Store(false)
		_, err := h.Run(sdk.PostCluster, plugintest.WithTimeout(time.Minute), withCluster(func(cl *sdk.Cluster) {
			cl.MetalLBPools = []sdk.AddressRange{{First: "172.30.1.16", Last: "172.30.1.100"}}
		}))
		if err == nil || !strings.Contains(err.Error(), "denied the request: test webhook denies") {
			t.Fatalf("err = %v", err)
		}
		if containsLine(h.Progress(), "not serving yet") {
			t.Errorf("a denial was retried: %q", h.Progress())
		}
	})
}

// checkPool checks the pool holds exactly ranges and the advertisement names it.
func checkPool(ctx context.Context, t *testing.T, c *kube.Client, name string, ranges []string) {
	t.Helper()
	pool, err := get(ctx, c, poolObject("IPAddressPool", name, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedStringSlice(pool.Object, "spec", "addresses")
	if !reflect.DeepEqual(got, ranges) {
		t.Errorf("pool addresses = %q, want %q", got, ranges)
	}
	if l := pool.GetLabels(); l[LabelManagedBy] != "marina" || l[LabelPlugin] != "metallb" || l[LabelSlot] != "1" {
		t.Errorf("pool labels = %v", l)
	}
	l2, err := get(ctx, c, poolObject("L2Advertisement", name, true, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedStringSlice(l2.Object, "spec", "ipAddressPools"); !reflect.DeepEqual(got, []string{name}) {
		t.Errorf("L2Advertisement pools = %q", got)
	}
}

func poolObject(kind, name string, marina bool, spec map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	o.SetAPIVersion("metallb.io/v1beta1")
	o.SetKind(kind)
	o.SetNamespace(Namespace)
	o.SetName(name)
	if marina {
		o.SetLabels(map[string]string{LabelManagedBy: "marina", LabelPlugin: "metallb", LabelSlot: "9"})
	}
	return o
}

func get(ctx context.Context, c *kube.Client, o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := c.Resource(o.GroupVersionKind(), o.GetNamespace())
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, o.GetName(), metav1.GetOptions{})
}

// resourceVersions of every manifest object and every object in the
// metallb.io pool kinds, by Describe.
func resourceVersions(ctx context.Context, t *testing.T, c *kube.Client, ctrl, speaker string) map[string]string {
	t.Helper()
	objs, err := manifestObjects(ctrl, speaker)
	if err != nil {
		t.Fatal(err)
	}
	rv := map[string]string{}
	for _, o := range objs {
		got, err := get(ctx, c, o)
		if err != nil {
			t.Fatalf("%s: %v", kube.Describe(o), err)
		}
		rv[kube.Describe(got)] = got.GetResourceVersion()
	}
	for _, gvk := range []string{"IPAddressPool", "L2Advertisement"} {
		ri, err := c.Resource(ipAddressPoolGVK.GroupVersion().WithKind(gvk), Namespace)
		if err != nil {
			t.Fatal(err)
		}
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			o.SetKind(gvk)
			rv[kube.Describe(o)] = o.GetResourceVersion()
		}
	}
	return rv
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func containsLine(lines []string, sub string) bool {
	for _, l := range lines {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// fakeWebhook is MetalLB's admission webhook as the API server sees it: an
// HTTPS server on 127.0.0.1 whose certificate is for the webhook Service's
// DNS name. It is not listening until serve is called, so calls before
// that are refused (a webhook whose pod is not ready yet).
type fakeWebhook struct {
	port   int
	caPEM  []byte
	cert   tls.Certificate
	deny   atomic.Bool
	mu     sync.Mutex
	calls  []string
	srv    *http.Server
	served atomic.Bool
}

func newFakeWebhook(t *testing.T) *fakeWebhook {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metallb-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: webhookService},
		// The API server checks the certificate against <service>.<namespace>.svc.
		DNSNames:  []string{webhookService + "." + Namespace + ".svc"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	// A port nothing listens on until serve.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return &fakeWebhook{
		port:  port,
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		cert:  tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key},
	}
}

func (w *fakeWebhook) serve() error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(w.port)))
	if err != nil {
		return fmt.Errorf("listening on the webhook's port %d again: %w", w.port, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(w.review), ReadHeaderTimeout: 10 * time.Second}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{w.cert}, MinVersion: tls.VersionTLS12}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	w.mu.Lock()
	w.srv = srv
	w.mu.Unlock()
	w.served.Store(true)
	return nil
}

// close stops the server if it was started.
func (w *fakeWebhook) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv != nil {
		_ = w.srv.Close()
	}
}

// review answers an AdmissionReview: allowed, unless deny is set.
func (w *fakeWebhook) review(rw http.ResponseWriter, r *http.Request) {
	var ar admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
		http.Error(rw, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	req := ar.Request
	w.mu.Lock()
	w.calls = append(w.calls, fmt.Sprintf("%s %s %s/%s", req.Operation, req.Kind.Kind, req.Namespace, req.Name))
	w.mu.Unlock()
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if w.deny.Load() {
		resp.Allowed = false
		resp.Result = &metav1.Status{Code: http.StatusForbidden, Message: "test webhook denies"}
	}
	ar.Response, ar.Request = resp, nil
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&ar)
}

func (w *fakeWebhook) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// fakeController plays what a kind cluster does around MetalLB:
//   - kube-proxy: the webhook Service becomes an ExternalName of 127.0.0.1,
//     so the API server reaches the webhook at 127.0.0.1:<port> (the
//     webhooks' service port is set to the fake webhook's);
//   - MetalLB's cert rotation: the webhook configuration gets its caBundle
//     and the Secret metallb-webhook-cert its certificate;
//   - the deployment controller + kubelet: Deployment controller becomes
//     Available (again after every spec change);
//   - the webhook pod becoming ready: the fake webhook starts serving only
//     once the API server has refused a pool for not reaching it
//     (apiserver_admission_webhook_rejection_count, calling_webhook_error).
type fakeController struct {
	refusals atomic.Int64
}

func startFakeController(ctx context.Context, t *testing.T, cs kubernetes.Interface, wh *fakeWebhook) *fakeController {
	fc := &fakeController{}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		defer wh.close()
		var routed, injected bool
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if !routed {
				routed = fc.routeService(ctx, t, cs)
			}
			if !injected {
				injected = fc.injectWebhook(ctx, t, cs, wh)
			}
			if !routed || !injected {
				continue
			}
			fc.markAvailable(ctx, t, cs)
			if !wh.served.Load() {
				n, err := webhookRefusals(ctx, cs, "ipaddresspoolvalidationwebhook.metallb.io")
				if err != nil {
					t.Errorf("fake controller: reading the API server's metrics: %v", err)
					return
				}
				fc.refusals.Store(n)
				if n > 0 {
					if err := wh.serve(); err != nil {
						t.Errorf("fake controller: %v", err)
						return
					}
				}
			}
		}
	}()
	return fc
}

func (fc *fakeController) routeService(ctx context.Context, t *testing.T, cs kubernetes.Interface) bool {
	patch := []byte(`{"spec":{"type":"ExternalName","externalName":"127.0.0.1"}}`)
	_, err := cs.CoreV1().Services(Namespace).Patch(ctx, webhookService, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "test-kube-proxy"})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.Errorf("fake controller: routing Service %s: %v", webhookService, err)
	}
	return err == nil
}

func (fc *fakeController) injectWebhook(ctx context.Context, t *testing.T, cs kubernetes.Interface, wh *fakeWebhook) bool {
	port := int32(wh.port)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		vwc, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "metallb-webhook-configuration", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range vwc.Webhooks {
			cc := &vwc.Webhooks[i].ClientConfig
			if cc.Service == nil {
				return fmt.Errorf("webhook %s has no service", vwc.Webhooks[i].Name)
			}
			cc.Service.Port = &port
			cc.CABundle = wh.caPEM
		}
		_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{FieldManager: "test-metallb-controller"})
		return err
	})
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			t.Errorf("fake controller: injecting the webhook CA: %v", err)
		}
		return false
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sec, err := cs.CoreV1().Secrets(Namespace).Get(ctx, "metallb-webhook-cert", metav1.GetOptions{})
		if err != nil {
			return err
		}
		sec.Data = map[string][]byte{"ca.crt": wh.caPEM, "tls.crt": wh.caPEM}
		_, err = cs.CoreV1().Secrets(Namespace).Update(ctx, sec, metav1.UpdateOptions{FieldManager: "test-metallb-controller"})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		t.Errorf("fake controller: writing the webhook certificate: %v", err)
	}
	return err == nil
}

func (fc *fakeController) markAvailable(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, ControllerDeployment, metav1.GetOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			t.Errorf("fake controller: %v", err)
		}
		return
	}
	if d.Status.ObservedGeneration == d.Generation && len(d.Status.Conditions) > 0 {
		return
	}
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
			LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	if _, err := cs.AppsV1().Deployments(Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "test-deployment-controller"}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
		t.Errorf("fake controller: marking the controller available: %v", err)
	}
}

// webhookRefusals sums the API server's count of requests it refused
// because it could not call the validating webhook name.
func webhookRefusals(ctx context.Context, cs kubernetes.Interface, name string) (int64, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{") ||
			!strings.Contains(line, `error_type="calling_webhook_error"`) || !strings.Contains(line, `name="`+name+`"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		n += int64(v)
	}
	if err := sc.Err(); err != nil {
		return 0, errors.New("reading /metrics: " + err.Error())
	}
	return n, nil
}
