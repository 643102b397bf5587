// Package certmanager is marina's built-in certmanager plugin (opt-in:
// `marina plugin enable certmanager`): it installs cert-manager's
// controller in every cluster with a ClusterIssuer "marina" backed by the
// lab's CA, so a Certificate — or an Ingress annotated
// cert-manager.io/cluster-issuer: marina — for a lab name such as
// <service>.<namespace>.<cluster>.<zone> is issued in seconds, by a CA the
// user's machine trusts after `marina trust install`. The CA is name
// constrained to the lab's zone and bridge CIDR: a certificate the issuer
// signs for any other name does not verify anywhere.
//
// What is installed is cert-manager's own: its CRDs (upstream's files) and
// the controller's objects of its Helm chart with the chart's defaults
// (manifests/controller.yaml). The webhook and the cainjector are left out:
// the webhook only validates and defaults cert-manager's resources (the
// controller checks them again and reports problems on their conditions),
// and the cainjector serves the webhook. Both would be two more images and
// pods in every cluster, and the webhook one more thing every apply of a
// Certificate waits for.
//
// The package is built only against marina's public SDK (sdk/).
package certmanager

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// Version is the plugin's version (Info.Version).
const Version = "0.1.0"

// Name is the plugin's name.
const Name = "certmanager"

// What the plugin installs, by name.
const (
	// CertManagerVersion is the cert-manager release installed.
	CertManagerVersion = "v1.21.1"
	// Namespace is where cert-manager runs, and where the CA's Secret is
	// (the controller's --cluster-resource-namespace).
	Namespace = "cert-manager"
	// Deployment is cert-manager's controller.
	Deployment = "cert-manager"
	// IssuerName is the ClusterIssuer backed by the lab CA.
	IssuerName = "marina"
	// CASecret holds the lab CA's certificate and key for the issuer.
	CASecret = "marina-lab-ca"
	// FieldManager is the server-side apply field manager of every object.
	FieldManager = "marina-certmanager"
	// DefaultControllerImage is cert-manager's controller, used unless the
	// host passes Env.Images[ImageKey] (marina's images.certManagerController).
	DefaultControllerImage = "quay.io/jetstack/cert-manager-controller:" + CertManagerVersion
	// ImageKey is the Env.Images key that overrides DefaultControllerImage.
	ImageKey = "certManagerController"
	// controllerContainer is the controller's container in the Deployment.
	controllerContainer = "cert-manager-controller"
)

// Outputs this plugin publishes from PostCluster.
const (
	// OutputIssuer is the ClusterIssuer's name.
	OutputIssuer = "issuer"
	// OutputNamespace is cert-manager's namespace.
	OutputNamespace = "namespace"
)

// pollInterval is how often the readiness waits look.
const pollInterval = time.Second

// Config is the plugin's configuration (plugins.certmanager.config).
type Config struct {
	// WaitReady makes PostCluster wait until the controller runs and the
	// issuer is Ready.
	WaitReady bool `json:"waitReady" doc:"Wait until cert-manager's controller is Available and the ClusterIssuer marina is Ready before the cluster counts as ready."`
	// ReadyTimeout bounds that wait.
	ReadyTimeout time.Duration `json:"readyTimeout" marina:"min=1s" doc:"How long to wait for cert-manager and the issuer when waitReady is set (the hook's own timeout also bounds it)."`
}

func defaultConfig() *Config {
	return &Config{WaitReady: true, ReadyTimeout: 3 * time.Minute}
}

// Plugin is the certmanager plugin.
type Plugin struct{}

// New returns the certmanager plugin.
func New() sdk.Plugin { return &Plugin{} }

// Info describes the plugin.
func (*Plugin) Info() sdk.Info {
	return sdk.Info{
		Name:         Name,
		Version:      Version,
		Description:  "Installs cert-manager in every cluster with a ClusterIssuer marina backed by the lab CA: HTTPS by name for the lab's Services.",
		Maintainer:   "marina",
		Capabilities: []string{sdk.CapKubeconfig, sdk.CapLabCA},
		Outputs:      []string{OutputIssuer, OutputNamespace},
		Timeouts:     map[sdk.Hook]time.Duration{sdk.PostCluster: 5 * time.Minute},
		Config:       defaultConfig(),
	}
}

// issuerGVK is cert-manager's ClusterIssuer.
var issuerGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "ClusterIssuer"}

// PostCluster installs cert-manager (CRDs, then the controller), the lab
// CA's Secret and the ClusterIssuer marina, with server-side apply (a
// re-run with the same inputs writes nothing; after `marina trust rotate`
// it hands the issuer the new CA), then, with waitReady, waits until the
// controller is Available and the issuer Ready.
func (*Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	cl := req.Cluster
	if cl == nil {
		return nil, errors.New("PostCluster needs the cluster: the request carries none")
	}
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	if err := checkCA(req.Env.LabCA); err != nil {
		return nil, err
	}
	objs, err := objects(image(req.Env), req.Env.LabCA)
	if err != nil {
		return nil, err
	}
	c, err := kube.Connect(cl.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}
	req.Progress("applying cert-manager %s (%d objects) and ClusterIssuer %s", CertManagerVersion, len(objs), IssuerName)
	if err := c.Apply(ctx, FieldManager, objs...); err != nil {
		return nil, fmt.Errorf("installing cert-manager %s in %s: %w", CertManagerVersion, cl.Name, err)
	}
	if cfg.WaitReady {
		wctx, cancel := context.WithTimeout(ctx, cfg.ReadyTimeout)
		defer cancel()
		req.Progress("waiting for cert-manager's controller")
		if err := kube.WaitFor(wctx, "Deployment "+Namespace+"/"+Deployment+" (cert-manager's controller) to be available", pollInterval,
			kube.DeploymentAvailable(c.Dynamic, Namespace, Deployment)); err != nil {
			return nil, fmt.Errorf("cluster %s: %w; fix: check that image %s can be pulled (kubectl -n %s get pods; override it with images.%s), or set plugins.%s.config.waitReady=false not to wait",
				cl.Name, err, image(req.Env), Namespace, ImageKey, Name)
		}
		req.Progress("waiting for ClusterIssuer %s to be Ready", IssuerName)
		issuers, err := c.Resource(issuerGVK, "")
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		if err := kube.WaitFor(wctx, "ClusterIssuer "+IssuerName+" to be Ready", pollInterval, func(ctx context.Context) (bool, error) {
			u, err := issuers.Get(ctx, IssuerName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return issuerReady(u)
		}); err != nil {
			return nil, fmt.Errorf("cluster %s: %w (kubectl describe clusterissuer %s)", cl.Name, err, IssuerName)
		}
	}
	return &sdk.Result{Outputs: map[string]string{OutputIssuer: IssuerName, OutputNamespace: Namespace}}, nil
}

// issuerReady reads a ClusterIssuer's Ready condition: true, or not yet
// with why (a condition False with its message is still retried: the
// controller may not have read the Secret yet).
func issuerReady(u *unstructured.Unstructured) (bool, error) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		if m["status"] == "True" {
			return true, nil
		}
		return false, fmt.Errorf("condition Ready is %v: %v: %v", m["status"], m["reason"], m["message"])
	}
	return false, errors.New("no Ready condition yet (is cert-manager's controller running?)")
}

// checkCA checks the lab CA the host passed: a certificate and a key.
func checkCA(ca sdk.LabCA) error {
	if ca.Cert == "" {
		return errors.New("the lab has no CA yet (sdk.Env.LabCA is empty): marina up creates it")
	}
	if ca.Key == "" {
		return fmt.Errorf("marina passed the lab CA without its key: the plugin declares capability %s; a marina older than this plugin does not know it (upgrade marina)", sdk.CapLabCA)
	}
	b, _ := pem.Decode([]byte(ca.Cert))
	if b == nil || b.Type != "CERTIFICATE" {
		return errors.New("the lab CA's certificate (sdk.Env.LabCA.Cert) is not PEM; check it with marina trust status, or rotate it: marina trust rotate")
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return fmt.Errorf("the lab CA's certificate: %w; rotate it: marina trust rotate", err)
	}
	if !cert.IsCA {
		return errors.New("the lab CA's certificate is not a CA certificate; rotate it: marina trust rotate")
	}
	return nil
}

// image is cert-manager's controller image: the host's override or the default.
func image(env sdk.Env) string {
	if img := env.Images[ImageKey]; img != "" {
		return img
	}
	return DefaultControllerImage
}

// caObjects are the lab CA's Secret and the ClusterIssuer using it.
func caObjects(ca sdk.LabCA) []*unstructured.Unstructured {
	secret := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata": map[string]any{
			"name": CASecret, "namespace": Namespace, "labels": labelsAny(),
		},
		"type": "kubernetes.io/tls",
		"data": map[string]any{
			"tls.crt": base64.StdEncoding.EncodeToString([]byte(ca.Cert)),
			"tls.key": base64.StdEncoding.EncodeToString([]byte(ca.Key)),
		},
	}}
	issuer := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": issuerGVK.GroupVersion().String(),
		"kind":       issuerGVK.Kind,
		"metadata":   map[string]any{"name": IssuerName, "labels": labelsAny()},
		"spec":       map[string]any{"ca": map[string]any{"secretName": CASecret}},
	}}
	return []*unstructured.Unstructured{secret, issuer}
}
