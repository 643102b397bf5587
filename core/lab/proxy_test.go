package lab

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/bcollard/marina/core/config"
)

// TestProxyChecks: doctor says whether the proxy answers — one listening on
// 127.0.0.1 does, a closed port does not — with where it came from and no
// password; no proxy is OK.
func TestProxyChecks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()

	cfg := config.Default()
	cfg.Proxy.HTTPS = "http://me:secret@" + ln.Addr().String()
	l := &Lab{Config: cfg, Getenv: func(k string) string {
		return map[string]string{"HTTP_PROXY": "http://" + deadAddr}[k]
	}}
	checks := l.proxyChecks(context.Background(), 2*time.Second)
	if len(checks) != 2 {
		t.Fatalf("checks = %+v", checks)
	}
	byName := map[string]Check{}
	for _, c := range checks {
		byName[c.Name] = c
	}
	if c := byName["proxy https"]; c.Status != OK || !strings.Contains(c.Detail, "(config)") || strings.Contains(c.Detail, "secret") || !strings.Contains(c.Detail, "answers") {
		t.Errorf("https proxy check: %+v", c)
	}
	if c := byName["proxy http"]; c.Status != Fail || !strings.Contains(c.Detail, "environment ($HTTP_PROXY)") || !strings.Contains(c.Fix, "HTTP_PROXY") {
		t.Errorf("http proxy check: %+v", c)
	}
	l = &Lab{Config: config.Default(), Getenv: func(string) string { return "" }}
	if c := l.proxyChecks(context.Background(), time.Second); len(c) != 1 || c[0].Status != OK {
		t.Errorf("no proxy: %+v", c)
	}
}
