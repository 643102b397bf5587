package certmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

var certificateGVR = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// TestIssuesForLabNames (tier 3): PostCluster against a real
// kube-apiserver, with cert-manager's real controller (built from its Go
// module by test/tools/build.sh) running as a process with the arguments
// of the Deployment the plugin applied — the one part of a cluster this
// tier has not is the kubelet that would run it as a pod, so the test
// starts the process and reports the Deployment Available in its place.
// Then a Certificate for a lab name is issued by ClusterIssuer marina, an
// HTTPS server with it answers a GET by that name that verifies against
// the lab CA alone, and a certificate for a name outside the lab, which
// the issuer signs, does not verify (the CA's name constraints).
func TestIssuesForLabNames(t *testing.T) {
	controller := kubetest.CertManagerControllerPath(t)
	kc := kubetest.Start(t)
	cs := kc.Clientset(t)
	c, err := kube.Connect(kc.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ca, err := labca.Create(filepath.Join(t.TempDir(), "ca"), labca.Scope{Lab: "test", Zone: "demo.internal", Bridge: netip.MustParsePrefix("172.30.0.0/16")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := plugintest.New(t, New())
	opts := []plugintest.Option{
		plugintest.WithTimeout(3 * time.Minute),
		plugintest.WithEnv(func(e *sdk.Env) {
			e.LabCA = sdk.LabCA{Cert: string(ca.CertPEM), Key: string(ca.KeyPEM())}
		}),
		plugintest.WithCluster(func(cl *sdk.Cluster) {
			cl.Name = "c1"
			cl.Kubeconfig, cl.KubeconfigPath = kc.Kubeconfig, kc.KubeconfigPath
		}),
	}

	type outcome struct {
		res *sdk.Result
		err error
	}
	done := make(chan outcome, 1)
	start := time.Now()
	go func() {
		res, err := h.Run(sdk.PostCluster, opts...)
		done <- outcome{res, err}
	}()

	// Stand in for the kubelet: when the Deployment exists, run its
	// container's command as a process and report it Available.
	d := waitDeployment(ctx, t, cs)
	stop := runController(t, controller, kc.KubeconfigPath, d)
	defer stop()
	markAvailable(ctx, t, cs, d)

	var o outcome
	select {
	case o = <-done:
	case <-ctx.Done():
		t.Fatalf("PostCluster did not return: progress %q", h.Progress())
	}
	if o.err != nil {
		t.Fatalf("PostCluster: %v\nprogress: %q", o.err, h.Progress())
	}
	t.Logf("PostCluster (CRDs, controller, issuer Ready) took %v; progress: %q", time.Since(start).Round(time.Millisecond), h.Progress())
	if o.res.Outputs[OutputIssuer] != IssuerName || o.res.Outputs[OutputNamespace] != Namespace {
		t.Errorf("outputs = %v", o.res.Outputs)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)
	const name = "echo.default.c1.demo.internal"

	t.Run("a lab name is issued and served over HTTPS", func(t *testing.T) {
		issued := time.Now()
		secret := issue(ctx, t, c, cs, "echo-tls", name)
		t.Logf("Certificate for %s: Ready and its Secret written %v after it was created", name, time.Since(issued).Round(time.Millisecond))
		pair, err := tls.X509KeyPair(secret.Data["tls.crt"], secret.Data["tls.key"])
		if err != nil {
			t.Fatalf("the issued Secret is not a key pair: %v", err)
		}
		if got := string(secret.Data["ca.crt"]); got != string(ca.CertPEM) {
			t.Errorf("the Secret's ca.crt is not the lab CA:\n%s", got)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{
			Handler:   http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello over lab TLS") }),
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}},
		}
		go srv.ServeTLS(ln, "", "")
		defer srv.Close()
		// The name resolves to the test's server (the lab's DNS does it
		// for a real Service), the client trusts the lab CA alone.
		tr := &http.Transport{
			Proxy:           nil,
			TLSClientConfig: &tls.Config{RootCAs: roots},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if !strings.HasPrefix(addr, name+":") {
					return nil, fmt.Errorf("the test dials only %s, not %s", name, addr)
				}
				return (&net.Dialer{}).DialContext(ctx, network, ln.Addr().String())
			},
		}
		defer tr.CloseIdleConnections()
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + name + ":" + port + "/")
		if err != nil {
			t.Fatalf("HTTPS GET by name, verified against the lab CA: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "hello over lab TLS" {
			t.Errorf("GET = %d %q", resp.StatusCode, body)
		}
	})

	t.Run("a name outside the lab does not verify", func(t *testing.T) {
		secret := issue(ctx, t, c, cs, "outside-tls", "www.example.com")
		leaf := parseLeaf(t, secret.Data["tls.crt"])
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: "www.example.com", Roots: roots})
		var inv x509.CertificateInvalidError
		if !errors.As(err, &inv) || inv.Reason != x509.CANotAuthorizedForThisName {
			t.Errorf("verifying www.example.com issued by the lab CA = %v; want the name constraints to refuse it", err)
		}
	})

	t.Run("re-run writes nothing", func(t *testing.T) {
		before := versions(ctx, t, c)
		if _, err := h.Run(sdk.PostCluster, opts...); err != nil {
			t.Fatalf("PostCluster again: %v", err)
		}
		after := versions(ctx, t, c)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s: resourceVersion %s -> %s on a re-run", k, v, after[k])
			}
		}
	})
}

// waitDeployment waits for the controller's Deployment to be applied.
func waitDeployment(ctx context.Context, t *testing.T, cs kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	err := kube.WaitFor(ctx, "Deployment "+Namespace+"/"+Deployment+" to be applied", 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		var err error
		d, err = cs.AppsV1().Deployments(Namespace).Get(ctx, Deployment, metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runController runs the Deployment's controller container as a process:
// its args ($(POD_NAMESPACE) expanded as the kubelet does), plus the
// kubeconfig, and the metrics and health endpoints on loopback ports of
// their own (in a pod they are the pod's). It returns a stop function.
func runController(t *testing.T, bin, kubeconfig string, d *appsv1.Deployment) func() {
	t.Helper()
	var ctr *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == controllerContainer {
			ctr = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if ctr == nil {
		t.Fatalf("the Deployment has no container %s", controllerContainer)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	healthz := freePort(t)
	if err := os.WriteFile(cfg, []byte("apiVersion: controller.config.cert-manager.io/v1alpha1\nkind: ControllerConfiguration\nhealthzListenAddress: "+healthz+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, a := range ctr.Args {
		args = append(args, strings.ReplaceAll(a, "$(POD_NAMESPACE)", Namespace))
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--metrics-listen-address="+freePort(t), "--config="+cfg)
	cmd := exec.Command(bin, args...)
	var logs strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	return func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("cert-manager-controller %s:\n%s", strings.Join(args, " "), logs.String())
			mu.Unlock()
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// markAvailable writes the status the deployment controller writes once
// the kubelet runs the pod.
func markAvailable(ctx context.Context, t *testing.T, cs kubernetes.Interface, d *appsv1.Deployment) {
	t.Helper()
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
		Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}},
	}
	if _, err := cs.AppsV1().Deployments(Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// issue creates a Certificate for dnsName from ClusterIssuer marina and
// returns its Secret once the Certificate is Ready.
func issue(ctx context.Context, t *testing.T, c *kube.Client, cs kubernetes.Interface, name, dnsName string) *corev1.Secret {
	t.Helper()
	cert := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"secretName": name,
			"dnsNames":   []any{dnsName},
			"issuerRef":  map[string]any{"name": IssuerName, "kind": "ClusterIssuer", "group": "cert-manager.io"},
		},
	}}
	if _, err := c.Dynamic.Resource(certificateGVR).Namespace("default").Create(ctx, cert, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := kube.WaitFor(ctx, "Certificate default/"+name+" to be Ready", 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		u, err := c.Dynamic.Resource(certificateGVR).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return issuerReady(u) // the same Ready condition shape
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cs.CoreV1().Secrets("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func parseLeaf(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(pemBytes)
	if b == nil || b.Type != "CERTIFICATE" {
		t.Fatalf("no PEM certificate first in %q", pemBytes)
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// versions are the resourceVersions of what PostCluster applies that no
// controller writes to (the CRDs get status from the API server once).
func versions(ctx context.Context, t *testing.T, c *kube.Client) map[string]string {
	t.Helper()
	objs, err := objects(DefaultControllerImage, sdk.LabCA{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		if o.GetKind() == "ClusterIssuer" || o.GetKind() == "Deployment" {
			continue // their status is the controllers'
		}
		ri, err := c.Resource(o.GroupVersionKind(), o.GetNamespace())
		if err != nil {
			t.Fatal(err)
		}
		u, err := ri.Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", kube.Describe(o), err)
		}
		out[kube.Describe(o)] = u.GetResourceVersion()
	}
	return out
}
