package config

import (
	"strings"
	"testing"

	"github.com/Masterminds/semver/v3"
)

// marina-core's constraint parser (main sets the same).
func init() {
	CheckConstraint = func(s string) error { _, err := semver.NewConstraint(s); return err }
}

var semverCorpus = []string{
	"1.2.3", "0.0.0", "1.31.0", "10.20.30", "1.2.3-alpha", "1.2.3-alpha.1", "1.2.3-0.3.7", "1.2.3-x.7.z.92",
	"1.2.3+build", "1.2.3+build.1-a", "1.2.3-rc.1+exp.sha.5114f85", "1.2.3-alpha-beta", "1.2.3--", "1.2.3-0a",
	"01.2.3", "1.02.3", "1.2.03", "1.2", "1", "1.2.3.4", "", ".", "1..3", "1.2.3-", "1.2.3+", "1.2.3-01",
	"1.2.3-a..b", "1.2.3+a..b", "1.2.3+01", "1.2.3-a_b", "1.2.3+a_b", "v1.2.3", "1.2.3 ", " 1.2.3", "a.b.c",
	"1.2.-3", "1.2.+3", "-1.2.3", "99999999999999999999.0.0", "18446744073709551615.0.0", "18446744073709551616.0.0",
	"1.2.3+" + strings.Repeat("0", 250), "1.2.3+" + strings.Repeat("0", 251), "1.2.3-" + strings.Repeat("a", 251),
	"1.2.3-ü", "1.2.3+ü", "1.2.3-alpha+", "1.2.3-+a", "1.2.3++a", "1.2.3-a+b+c", "0.0.0-0", "1.2.3-00",
}

// TestStrictSemverMatchesSemver: strictSemver accepts exactly what
// semver.StrictNewVersion accepts.
func TestStrictSemverMatchesSemver(t *testing.T) {
	for _, v := range semverCorpus {
		_, err := semver.StrictNewVersion(v)
		if got, want := strictSemver(v), err == nil; got != want {
			t.Errorf("strictSemver(%q) = %v, semver.StrictNewVersion says %v (%v)", v, got, want, err)
		}
	}
}

func FuzzStrictSemver(f *testing.F) {
	for _, v := range semverCorpus {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		_, err := semver.StrictNewVersion(v)
		if got, want := strictSemver(v), err == nil; got != want {
			t.Errorf("strictSemver(%q) = %v, semver.StrictNewVersion says %v (%v)", v, got, want, err)
		}
	})
}

// TestUncheckedConstraint: without a parser (the front), a constraint is
// reported as unchecked, never accepted silently, and HasConstraints says so.
func TestUncheckedConstraint(t *testing.T) {
	saved := CheckConstraint
	t.Cleanup(func() { CheckConstraint = saved })
	CheckConstraint = nil
	c := Default()
	c.Plugins["x"] = PluginConfig{Version: "^1.2"}
	found := false
	for _, p := range Validate(c) {
		if p.Path == "plugins.x.version" {
			found = true
		}
	}
	if !found {
		t.Errorf("Validate without CheckConstraint accepted plugins.x.version: %v", Validate(c))
	}
	if !(&Loaded{Config: c}).HasConstraints() || (&Loaded{Config: Default()}).HasConstraints() {
		t.Error("HasConstraints is wrong")
	}
}
