package kube_test

// Tier 3: the helpers against a real kube-apiserver (sdk/kubetest).

import (
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
	"math/big"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
)

const manifest = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.marina.dev
spec:
  group: example.marina.dev
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
---
apiVersion: example.marina.dev/v1
kind: Widget
metadata: {name: w1, namespace: shop}
spec: {size: 3}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop, labels: {app.kubernetes.io/managed-by: kube-test}}
data: {color: blue}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: widget-reader}
rules:
- apiGroups: [example.marina.dev]
  resources: [widgets]
  verbs: [get, list]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: widgets}}
`

// (The Namespace has a label because an applied object that sets nothing
// but its name gets its managedFields recorded by the API server on the
// first re-apply: one write, then none.)

func decode(t *testing.T, s string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := kube.DecodeManifests([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func versions(ctx context.Context, t *testing.T, c *kube.Client, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	rv := map[string]string{}
	for _, o := range objs {
		ri, err := c.Resource(o.GroupVersionKind(), o.GetNamespace())
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", kube.Describe(o), err)
		}
		rv[kube.Describe(o)] = got.GetResourceVersion()
	}
	return rv
}

func TestAgainstAPIServer(t *testing.T) {
	kc := kubetest.Start(t)
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The test sets up and reads back with client-go's typed clientset,
	// independent of what it tests.
	cs := kc.Clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	objs := decode(t, manifest)

	t.Run("Apply creates, in dependency order", func(t *testing.T) {
		// The Namespace comes last and the Widget before its CRD is
		// established: Apply orders them.
		if err := c.Apply(ctx, "kube-test", objs...); err != nil {
			t.Fatal(err)
		}
		ri, _ := c.Resource(schema.GroupVersionKind{Group: "example.marina.dev", Version: "v1", Kind: "Widget"}, "shop")
		w, err := ri.Get(ctx, "w1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if size, _, _ := unstructured.NestedInt64(w.Object, "spec", "size"); size != 3 {
			t.Errorf("widget size = %d", size)
		}
		if mf := w.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "kube-test" || mf[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Errorf("managed fields = %+v", mf)
		}
	})

	t.Run("re-Apply changes nothing; a change updates only its object", func(t *testing.T) {
		before := versions(ctx, t, c, objs)
		if err := c.Apply(ctx, "kube-test", objs...); err != nil {
			t.Fatal(err)
		}
		if after := versions(ctx, t, c, objs); !reflect.DeepEqual(before, after) {
			t.Errorf("resourceVersions changed on a re-apply:\nbefore %v\nafter  %v", before, after)
		}
		changed := decode(t, strings.Replace(manifest, "color: blue", "color: green", 1))
		if err := c.Apply(ctx, "kube-test", changed...); err != nil {
			t.Fatal(err)
		}
		after := versions(ctx, t, c, objs)
		for k, v := range before {
			if (k == "ConfigMap shop/settings") == (after[k] == v) {
				t.Errorf("%s: resourceVersion %s -> %s", k, v, after[k])
			}
		}
	})

	t.Run("fields of other managers are kept", func(t *testing.T) {
		cm, err := cs.CoreV1().ConfigMaps("shop").Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["injected"] = "by-a-controller"
		if _, err := cs.CoreV1().ConfigMaps("shop").Update(ctx, cm, metav1.UpdateOptions{FieldManager: "some-controller"}); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, "kube-test", objs...); err != nil {
			t.Fatal(err)
		}
		cm, _ = cs.CoreV1().ConfigMaps("shop").Get(ctx, "settings", metav1.GetOptions{})
		if cm.Data["injected"] != "by-a-controller" || cm.Data["color"] != "blue" {
			t.Errorf("data = %v", cm.Data)
		}
	})

	t.Run("Apply errors name the object and the fix", func(t *testing.T) {
		tests := []struct{ name, yaml, want string }{
			{"namespaced without namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "applying ConfigMap x: ConfigMap is namespaced: set metadata.namespace"},
			{"cluster-scoped with namespace", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: x, namespace: shop}\n", `ClusterRole is cluster-scoped: remove metadata.namespace ("shop")`},
			{"unknown kind", "apiVersion: nope.example.com/v1\nkind: Gadget\nmetadata: {name: g, namespace: shop}\n", "does not serve kind Gadget in apiVersion nope.example.com/v1"},
			{"invalid object", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name, namespace: shop}\n", "applying ConfigMap shop/Bad_Name"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				err := c.Apply(ctx, "kube-test", decode(t, tt.yaml)...)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err = %v, want %q", err, tt.want)
				}
			})
		}
		if err := c.Apply(ctx, "", objs...); err == nil || !strings.Contains(err.Error(), "field manager") {
			t.Errorf("no field manager: %v", err)
		}
	})

	t.Run("Prune deletes only labelled objects not kept", func(t *testing.T) {
		cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
		for _, name := range []string{"old-1", "old-2", "keep"} {
			o := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: "+name+", namespace: shop, labels: {app.kubernetes.io/managed-by: kube-test}}\n")
			if err := c.Apply(ctx, "kube-test", o...); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Apply(ctx, "someone-else", decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: theirs, namespace: shop}\n")...); err != nil {
			t.Fatal(err)
		}
		gone, err := c.Prune(ctx, cmGVK, "shop", "app.kubernetes.io/managed-by=kube-test", "keep", "settings")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"shop/old-1", "shop/old-2"}; !reflect.DeepEqual(gone, want) {
			t.Errorf("pruned %v, want %v", gone, want)
		}
		list, _ := cs.CoreV1().ConfigMaps("shop").List(ctx, metav1.ListOptions{})
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		if want := []string{"keep", "settings", "theirs"}; !reflect.DeepEqual(names, want) {
			t.Errorf("left %v, want %v", names, want)
		}
		if _, err := c.Prune(ctx, cmGVK, "shop", ""); err == nil {
			t.Error("Prune with no selector did not fail")
		}
		if gone, err := c.Prune(ctx, schema.GroupVersionKind{Group: "nope.example.com", Version: "v1", Kind: "Gadget"}, "", "a=b"); err != nil || gone != nil {
			t.Errorf("pruning an unserved kind: %v %v", gone, err)
		}
	})

	t.Run("DeploymentAvailable and WaitFor", func(t *testing.T) {
		check := kube.DeploymentAvailable(c.Dynamic, "shop", "web")
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancelShort()
		err := kube.WaitFor(short, "deployment shop/web to be available", 50*time.Millisecond, check)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last error: deployment shop/web does not exist yet") {
			t.Errorf("missing deployment: %v", err)
		}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:1"}}},
				},
			},
		}
		d, err = cs.AppsV1().Deployments("shop").Create(ctx, d, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The deployment controller's part, after a few checks.
		statusErr := make(chan error, 1)
		go func() {
			time.Sleep(200 * time.Millisecond)
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
			_, err := cs.AppsV1().Deployments("shop").UpdateStatus(ctx, d, metav1.UpdateOptions{})
			statusErr <- err
		}()
		wctx, cancelW := context.WithTimeout(ctx, 30*time.Second)
		defer cancelW()
		start := time.Now()
		err = kube.WaitFor(wctx, "deployment shop/web to be available", 50*time.Millisecond, check)
		if err := <-statusErr; err != nil {
			t.Fatalf("updating the status: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < 200*time.Millisecond {
			t.Errorf("available after %v, before the status said so", took)
		}
	})

	t.Run("IsWebhookUnavailable tells an unreachable webhook from a denial", func(t *testing.T) {
		srv := startDenyingWebhook(t)
		fail := admissionregv1.Fail
		none := admissionregv1.SideEffectClassNone
		vwc := &admissionregv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "kube-test"},
			Webhooks: []admissionregv1.ValidatingWebhook{{
				Name:                    "configmaps.kube-test.marina.dev",
				ClientConfig:            admissionregv1.WebhookClientConfig{URL: &srv.url, CABundle: srv.caPEM},
				Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create, admissionregv1.Update}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}},
				FailurePolicy:           &fail,
				SideEffects:             &none,
				AdmissionReviewVersions: []string{"v1"},
			}},
		}
		if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, vwc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The webhook configuration takes effect asynchronously: wait for
		// the denial, then stop the server and expect "unreachable".
		cm := decode(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: guarded, namespace: shop}\n")
		wctx, cancelW := context.WithTimeout(ctx, 30*time.Second)
		defer cancelW()
		var denied error
		err := kube.WaitFor(wctx, "the test webhook to deny", 50*time.Millisecond, func(ctx context.Context) (bool, error) {
			denied = c.Apply(ctx, "kube-test", cm...)
			if denied != nil && strings.Contains(denied.Error(), "denied the request") {
				return true, nil
			}
			return false, denied
		})
		if err != nil {
			t.Fatal(err)
		}
		if kube.IsWebhookUnavailable(denied) || !apierrors.IsForbidden(denied) {
			t.Errorf("a denial counts as unavailable: %v", denied)
		}
		srv.close()
		refused := c.Apply(ctx, "kube-test", cm...)
		if !kube.IsWebhookUnavailable(refused) {
			t.Errorf("an unreachable webhook is not recognised: %v", refused)
		}
	})
}

type denyingWebhook struct {
	url   string
	caPEM []byte
	close func()
}

// startDenyingWebhook serves, on 127.0.0.1 with a self-signed certificate,
// a validating webhook that denies everything.
func startDenyingWebhook(t *testing.T) *denyingWebhook {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ar admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&ar); err != nil || ar.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		ar.Response = &admissionv1.AdmissionResponse{UID: ar.Request.UID, Result: &metav1.Status{Code: 403, Message: "no configmaps here"}}
		ar.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&ar)
	})}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return &denyingWebhook{
		url:   "https://" + l.Addr().String() + "/validate",
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		close: func() { _ = srv.Close() },
	}
}
