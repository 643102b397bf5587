package config

import (
	"strings"
	"testing"
)

// TestNameGrammar: the name checks accept and refuse what the grammars say.
func TestNameGrammar(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("ab12", 16)
	for _, c := range []struct {
		check func(string) bool
		what  string
		yes   []string
		no    []string
	}{
		{isDNSLabel, "isDNSLabel",
			[]string{"a", "0", "a-b", "a--b", "0a", strings.Repeat("a", 63)},
			[]string{"", "-", "a-", "-a", "A", "a_b", "a.b", "é", "a b", strings.Repeat("a", 64)}},
		{isPluginName, "isPluginName",
			[]string{"a", "kind", "a-b", "a0", "a-", strings.Repeat("a", 63)},
			[]string{"", "0a", "-a", "A", "a_b", "a.b", strings.Repeat("a", 64)}},
		{IsImageRef, "IsImageRef",
			[]string{"nginx", "nginx:1.25-alpine", "docker.io/library/nginx:1.25", "registry:2", "localhost:5000/a/b:c",
				"host:5000", "a/b__c", "quay.io/metallb/controller:v0.14.9", "ghcr.io/x/y" + digest, "x/y:tag" + digest,
				"a:" + strings.Repeat("1", 200), "a:" + strings.Repeat("x", 128)},
			[]string{"", "a/b:1/c", "a:", "a:" + strings.Repeat("x", 129), "a//b", "/a", "a/",
				"a/b___c", "a.-b", "a..b", "x@sha256:abc", "x@sha512:" + strings.Repeat("a", 64), "X/y", "x:.a", "a:1/b" + ":",
				"x:tag@sha256:" + strings.Repeat("A", 64), "a::1"}},
	} {
		for _, s := range c.yes {
			if !c.check(s) {
				t.Errorf("%s(%q) = false, want true", c.what, s)
			}
		}
		for _, s := range c.no {
			if c.check(s) {
				t.Errorf("%s(%q) = true, want false", c.what, s)
			}
		}
	}
}
