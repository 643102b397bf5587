package config

import (
	"regexp"
	"strings"
	"testing"
)

// The regular expressions the hand-written checks replace (validate.go).
var (
	dnsLabelRE   = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	pluginNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)
	imageRefRE   = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]{1,2}[a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
)

var digest = "@sha256:" + strings.Repeat("ab12", 16)

var nameCorpus = []string{
	"", "a", "-", "a-", "-a", "a-b", "a--b", "kind", "marina", "demo", "A", "a_b", "a.b", "0", "0a", "a0",
	strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a", 62) + "-", "é", "a b",
	"nginx", "nginx:1.25", "nginx:1.25-alpine", "docker.io/library/nginx:1.25", "registry:2", "localhost:5000/a/b:c",
	"host:5000", "host:5000:tag", "a:1:2", "a:b:c", "a/b:1/c", "a:", "a:" + strings.Repeat("1", 200), "a:" + strings.Repeat("1", 128),
	"a:" + strings.Repeat("x", 128), "a:" + strings.Repeat("x", 129), "a/b:" + strings.Repeat("1", 200), "a/b", "a//b", "/a", "a/",
	"a/b__c", "a/b___c", "a/b.-c", "a.-b", "a..b", "a/b..c", "quay.io/metallb/controller:v0.14.9", "ghcr.io/x/y" + digest,
	"x:1" + digest, "x" + digest, "x@sha256:abc", "x@sha512:" + strings.Repeat("a", 64), "x" + digest + digest, "x@", "@" + digest[1:],
	"X/y", "x/Y", "x:Y", "x:_a", "x:.a", "x:-a", "a:1/b", "a.b.c:123/d-e_f/g:latest", "a-:1", "a:1:", "a::1",
	"registry.k8s.io/external-dns/external-dns:v0.15.1", "x/y:tag" + digest, "x:tag@sha256:" + strings.Repeat("A", 64),
}

func TestNameChecksMatchRegexps(t *testing.T) {
	for _, s := range nameCorpus {
		compareNames(t, s)
	}
}

func compareNames(t *testing.T, s string) {
	t.Helper()
	if got, want := isDNSLabel(s), dnsLabelRE.MatchString(s); got != want {
		t.Errorf("isDNSLabel(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := isPluginName(s), pluginNameRE.MatchString(s); got != want {
		t.Errorf("isPluginName(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := IsImageRef(s), imageRefRE.MatchString(s); got != want {
		t.Errorf("IsImageRef(%q) = %v, the expression says %v", s, got, want)
	}
}

func FuzzNameChecks(f *testing.F) {
	for _, s := range nameCorpus {
		f.Add(s)
	}
	f.Fuzz(compareNames)
}
