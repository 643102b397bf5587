package registries_test

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kubetest"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestCABundle (tier 3): PostCluster puts the lab CA and the company CAs
// in ConfigMap marina-ca-bundle of default and kube-public, for
// workloads; a re-run writes nothing; a lab with neither gets none.
func TestCABundle(t *testing.T) {
	kc := kubetest.Start(t)
	cs := kc.Clientset(t)
	ca, err := labca.Create(filepath.Join(t.TempDir(), "ca"), labca.Scope{Lab: "t", Zone: "demo.internal", Bridge: netip.MustParsePrefix("172.30.0.0/16")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const corp = "-----BEGIN CERTIFICATE-----\nCORP\n-----END CERTIFICATE-----\n"
	h := plugintest.New(t, registries.New())
	cluster := plugintest.WithCluster(func(cl *sdk.Cluster) {
		cl.Kubeconfig, cl.KubeconfigPath = kc.Kubeconfig, kc.KubeconfigPath
	})
	run := func(labCA, extra string) {
		t.Helper()
		if _, err := h.Run(sdk.PostCluster, cluster, plugintest.WithEnv(func(e *sdk.Env) {
			e.LabCA = sdk.LabCA{Cert: labCA}
			e.ExtraCAs = extra
		})); err != nil {
			t.Fatalf("PostCluster: %v\nprogress: %q", err, h.Progress())
		}
	}
	ctx := context.Background()

	run("", "")
	for _, ns := range registries.BundleNamespaces {
		if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, registries.BundleConfigMap, metav1.GetOptions{}); err == nil {
			t.Errorf("a lab without CAs got ConfigMap %s/%s", ns, registries.BundleConfigMap)
		}
	}

	run(string(ca.CertPEM), corp)
	versions := map[string]string{}
	for _, ns := range registries.BundleNamespaces {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, registries.BundleConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		versions[ns] = cm.ResourceVersion
		if cm.Data[registries.BundleLabCAKey] != string(ca.CertPEM) || cm.Data[registries.BundleExtraCAsKey] != corp {
			t.Errorf("%s/%s: lab CA %q, company CAs %q", ns, cm.Name, cm.Data[registries.BundleLabCAKey], cm.Data[registries.BundleExtraCAsKey])
		}
		if b := cm.Data[registries.BundleKey]; !strings.Contains(b, string(ca.CertPEM)) || !strings.Contains(b, corp) {
			t.Errorf("%s/%s: the bundle lacks a CA:\n%s", ns, cm.Name, b)
		}
	}
	run(string(ca.CertPEM), corp)
	for _, ns := range registries.BundleNamespaces {
		cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, registries.BundleConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.ResourceVersion != versions[ns] {
			t.Errorf("%s: a re-run wrote the ConfigMap (resourceVersion %s -> %s)", ns, versions[ns], cm.ResourceVersion)
		}
	}
}
