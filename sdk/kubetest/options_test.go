package kubetest

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// pickPort returns a port that was free on 127.0.0.1 a moment ago, chosen by the
// kernel, as a caller of StartWithOptions would choose its own.
func pickPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestStartWithOptionsSecurePort starts a cluster on a port the test chose and
// checks that the API server serves there and the kubeconfig points there.
func TestStartWithOptionsSecurePort(t *testing.T) {
	port := pickPort(t)
	c := StartWithOptions(t, Options{SecurePort: port})

	want := "https://127.0.0.1:" + strconv.Itoa(port)
	if c.Host != want {
		t.Errorf("Host = %q, want %q", c.Host, want)
	}
	cfg, err := clientcmd.Load(c.Kubeconfig)
	if err != nil {
		t.Fatalf("parse Kubeconfig: %v", err)
	}
	if server := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster].Server; server != want {
		t.Errorf("kubeconfig server = %q, want %q", server, want)
	}
	// Clients go through the chosen port, TLS verified against the kubeconfig CA.
	u, err := url.Parse(c.Config.Host)
	if err != nil || u.Port() != strconv.Itoa(port) {
		t.Fatalf("rest.Config host %q (err %v) is not on port %d", c.Config.Host, err, port)
	}
	if _, err := c.Clientset(t).CoreV1().Namespaces().Get(ctx(t), metav1.NamespaceDefault, metav1.GetOptions{}); err != nil {
		t.Errorf("get namespace default through %s: %v", want, err)
	}
}

// TestStartWithOptionsErrors checks the options StartWithOptions refuses: a port
// out of range before anything starts, and a chosen port that is taken, which
// fails instead of moving to another port.
func TestStartWithOptionsErrors(t *testing.T) {
	a := RequireAssets(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	defer held.Close()
	heldPort := held.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name    string
		port    int
		wantErr []string
	}{
		{name: "negative", port: -1, wantErr: []string{"Options.SecurePort -1 is not a TCP port", "0 for a free port"}},
		{name: "too large", port: 65536, wantErr: []string{"Options.SecurePort 65536 is not a TCP port"}},
		{
			name:    "taken",
			port:    heldPort,
			wantErr: []string{"could not bind the chosen port 127.0.0.1:" + strconv.Itoa(heldPort), "choose another"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := start(t, a, Options{SecurePort: tt.port})
			if err == nil {
				t.Fatalf("start with SecurePort %d = %s, want an error", tt.port, c.Host)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}
