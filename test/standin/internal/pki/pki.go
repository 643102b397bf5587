// Package pki generates, on the Docker host, the certificates, keys and
// kubeconfigs kubeadm would write into a kind control-plane node: a cluster
// CA, the API server's serving certificate, the service-account key pair,
// admin.conf (kubernetes-admin in group kubeadm:cluster-admins, as kubeadm
// v1.29 and later write it) and super-admin.conf (group system:masters).
// Keys are ECDSA P-256 (kubeadm's encryptionAlgorithm ECDSA-P256): generated
// in microseconds.
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Identities kubeadm gives its kubeconfigs.
const (
	AdminUser       = "kubernetes-admin"
	AdminGroup      = "kubeadm:cluster-admins"
	SuperAdminUser  = "kubernetes-super-admin"
	SuperAdminGroup = "system:masters"
)

// Validity of what Generate issues (kubeadm: 10 years for the CA, one for
// the rest).
const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
)

// Cluster says what to issue for.
type Cluster struct {
	// Name is the cluster name (kubeadm's clusterName: the cluster entry of
	// admin.conf).
	Name string
	// Server is the API server URL the kubeconfigs use
	// (https://NAME-control-plane:6443, kubeadm's controlPlaneEndpoint).
	Server string
	// DNSNames and IPs are the serving certificate's subject alternative
	// names.
	DNSNames []string
	IPs      []net.IP
}

// Files are the PEM files and kubeconfigs of one control plane.
type Files struct {
	CACert, APIServerCert, APIServerKey, SAKey, SAPub []byte
	// AdminConf and SuperAdminConf are kubeadm's admin.conf and
	// super-admin.conf.
	AdminConf, SuperAdminConf []byte
}

// Generate issues a fresh CA and everything signed by it for c.
func Generate(c Cluster, now time.Time) (*Files, error) {
	if c.Name == "" || c.Server == "" {
		return nil, errors.New("pki: the cluster name and API server URL are required")
	}
	notBefore := now.Add(-5 * time.Minute).UTC()
	caKey, err := newKey()
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kubernetes"},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := sign(caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	issue := func(subject pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (cert, key []byte, err error) {
		k, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		der, err := sign(&x509.Certificate{
			Subject:     subject,
			NotBefore:   notBefore,
			NotAfter:    notBefore.Add(certValidity),
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames:    dns,
			IPAddresses: ips,
		}, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("pki: certificate %s: %w", subject.CommonName, err)
		}
		keyPEM, err := encodeKey(k)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), keyPEM, nil
	}

	f := &Files{CACert: pemBlock("CERTIFICATE", caDER)}
	if f.APIServerCert, f.APIServerKey, err = issue(pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth, c.DNSNames, c.IPs); err != nil {
		return nil, err
	}
	for _, u := range []struct {
		user, group string
		out         *[]byte
	}{{AdminUser, AdminGroup, &f.AdminConf}, {SuperAdminUser, SuperAdminGroup, &f.SuperAdminConf}} {
		cert, key, err := issue(pkix.Name{CommonName: u.user, Organization: []string{u.group}}, x509.ExtKeyUsageClientAuth, nil, nil)
		if err != nil {
			return nil, err
		}
		if *u.out, err = Kubeconfig(c.Name, c.Server, u.user, f.CACert, cert, key); err != nil {
			return nil, err
		}
	}
	sa, err := newKey()
	if err != nil {
		return nil, err
	}
	if f.SAKey, err = encodeKey(sa); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("pki: service-account public key: %w", err)
	}
	f.SAPub = pemBlock("PUBLIC KEY", pub)
	return f, nil
}

// Kubeconfig renders a kubeconfig as kubeadm writes admin.conf: cluster
// named cluster, user named user, context user@cluster.
func Kubeconfig(cluster, server, user string, ca, cert, key []byte) ([]byte, error) {
	ctx := user + "@" + cluster
	b, err := clientcmd.Write(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{cluster: {Server: server, CertificateAuthorityData: ca}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {ClientCertificateData: cert, ClientKeyData: key}},
		Contexts:       map[string]*clientcmdapi.Context{ctx: {Cluster: cluster, AuthInfo: user}},
		CurrentContext: ctx,
	})
	if err != nil {
		return nil, fmt.Errorf("pki: kubeconfig of %s: %w", user, err)
	}
	return b, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate key: %w", err)
	}
	return k, nil
}

func encodeKey(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	return x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// ServerURL is https://host:port with an IPv6 host bracketed.
func ServerURL(host string, port int) string {
	return "https://" + net.JoinHostPort(host, strconv.Itoa(port))
}
