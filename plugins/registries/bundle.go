package registries

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// The CA bundle every cluster gets for its workloads (issue 25): what a
// pod trusts beside the public roots to reach the outside through a
// TLS-intercepting proxy (the company's CAs) and the lab's names over
// HTTPS (the lab CA). A pod mounts it and points SSL_CERT_FILE (Go,
// OpenSSL, curl, Python's requests via REQUESTS_CA_BUNDLE, ...) at a key.
const (
	// BundleConfigMap is the ConfigMap's name.
	BundleConfigMap = "marina-ca-bundle"
	// BundleKey holds the lab CA and the company CAs, PEM.
	BundleKey = "ca-bundle.pem"
	// BundleLabCAKey holds the lab CA alone; BundleExtraCAsKey the
	// company CAs alone (trust.extraCAs).
	BundleLabCAKey    = "lab-ca.crt"
	BundleExtraCAsKey = "extra-cas.pem"
	// bundleFieldManager owns the ConfigMaps' fields.
	bundleFieldManager = "marina-registries"
)

// BundleNamespaces are where the ConfigMap is: default (where most pods of
// a lab run) and kube-public (readable by everyone, to copy from).
var BundleNamespaces = []string{"default", "kube-public"}

// bundleObjects are the ConfigMaps for env's CAs (none when the lab has
// neither a CA nor company CAs).
func bundleObjects(env sdk.Env) []*unstructured.Unstructured {
	lab, extra := strings.TrimSpace(env.LabCA.Cert), strings.TrimSpace(env.ExtraCAs)
	if lab == "" && extra == "" {
		return nil
	}
	data := map[string]any{}
	var all []string
	if lab != "" {
		data[BundleLabCAKey] = lab + "\n"
		all = append(all, lab)
	}
	if extra != "" {
		data[BundleExtraCAsKey] = extra + "\n"
		all = append(all, extra)
	}
	data[BundleKey] = strings.Join(all, "\n") + "\n"
	var out []*unstructured.Unstructured
	for _, ns := range BundleNamespaces {
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata": map[string]any{
				"name": BundleConfigMap, "namespace": ns,
				"labels": map[string]any{"marina.dev/managed-by": "marina", "marina.dev/plugin": "registries"},
			},
			"data": data,
		}})
	}
	return out
}

// PostCluster gives the new cluster's workloads the CA bundle
// (BundleConfigMap in BundleNamespaces), with server-side apply: a re-run
// writes nothing.
func (*Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	cl := req.Cluster
	if cl == nil {
		return nil, errors.New("PostCluster needs the cluster: the request carries none")
	}
	objs := bundleObjects(req.Env)
	if len(objs) == 0 {
		return &sdk.Result{}, nil
	}
	c, err := kube.Connect(cl.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cl.Name, err)
	}
	req.Progress("CA bundle for workloads: ConfigMap %s in %s", BundleConfigMap, strings.Join(BundleNamespaces, ", "))
	if err := c.Apply(ctx, bundleFieldManager, objs...); err != nil {
		return nil, fmt.Errorf("cluster %s: the CA bundle: %w", cl.Name, err)
	}
	return &sdk.Result{}, nil
}
