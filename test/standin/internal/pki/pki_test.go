package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerate(t *testing.T) {
	f, err := Generate(Cluster{
		Name:     "dev",
		Server:   ServerURL("dev-control-plane", 6443),
		DNSNames: []string{"kubernetes", "dev-control-plane", "localhost"},
		IPs:      []net.IP{net.ParseIP("10.1.0.1"), net.ParseIP("127.0.0.1")},
	}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ca := parseCert(t, f.CACert)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	api := parseCert(t, f.APIServerCert)
	for _, name := range []string{"dev-control-plane", "localhost", "127.0.0.1", "10.1.0.1"} {
		if _, err := api.Verify(x509.VerifyOptions{Roots: roots, DNSName: name}); err != nil {
			t.Errorf("serving certificate for %s: %v", name, err)
		}
	}
	if _, err := api.Verify(x509.VerifyOptions{Roots: roots, DNSName: "elsewhere.example"}); err == nil {
		t.Error("serving certificate verifies for a name it does not hold")
	}
	if _, err := tls.X509KeyPair(f.APIServerCert, f.APIServerKey); err != nil {
		t.Errorf("serving key pair: %v", err)
	}

	for _, k := range []struct {
		conf        []byte
		user, group string
	}{{f.AdminConf, AdminUser, AdminGroup}, {f.SuperAdminConf, SuperAdminUser, SuperAdminGroup}} {
		cfg, err := clientcmd.Load(k.conf)
		if err != nil {
			t.Fatal(err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		if cfg.CurrentContext != k.user+"@dev" || ctx == nil || ctx.Cluster != "dev" || ctx.AuthInfo != k.user {
			t.Fatalf("kubeconfig of %s: current context %q %+v", k.user, cfg.CurrentContext, ctx)
		}
		if cfg.Clusters["dev"].Server != "https://dev-control-plane:6443" {
			t.Errorf("server %q", cfg.Clusters["dev"].Server)
		}
		cert := parseCert(t, cfg.AuthInfos[k.user].ClientCertificateData)
		if cert.Subject.CommonName != k.user || !slices.Equal(cert.Subject.Organization, []string{k.group}) {
			t.Errorf("client certificate subject %v, want CN %s O %s", cert.Subject, k.user, k.group)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("client certificate of %s: %v", k.user, err)
		}
	}
	if b, _ := pem.Decode(f.SAPub); b == nil || b.Type != "PUBLIC KEY" {
		t.Error("sa.pub is not a PEM public key")
	}
	if _, err := Generate(Cluster{Name: "dev"}, time.Now()); err == nil {
		t.Error("Generate without a server succeeded")
	}
}

func TestServerURL(t *testing.T) {
	if got := ServerURL("::1", 7001); got != "https://[::1]:7001" {
		t.Errorf("got %s", got)
	}
}
