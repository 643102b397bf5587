package homeenv

import (
	"errors"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	var env map[string]string
	getenv := func(k string) string { return env[k] }
	setenv := func(k, v string) error { env[k] = v; return nil }
	inPasswd := func() (string, string, bool) { return "ada", "/home/ada", true }
	notInPasswd := func() (string, string, bool) { return "", "", false }
	// current as os/user's pure-Go Current answers for a uid not in
	// /etc/passwd: from $USER and $HOME, or an error when one is missing.
	pureGo := func() (*user.User, error) {
		if env["USER"] == "" || env["HOME"] == "" {
			return nil, errors.New("user: Current requires cgo or $USER, $HOME set in environment")
		}
		return &user.User{Username: env["USER"], HomeDir: env["HOME"]}, nil
	}
	ldap := func() (*user.User, error) { return &user.User{Username: "bob", HomeDir: "/net/home/bob"}, nil }
	unknownC := func() (*user.User, error) { return nil, errors.New("user: unknown userid 4242") }
	uidName := "uid" + strconv.Itoa(os.Getuid())

	for _, c := range []struct {
		name          string
		env           map[string]string
		passwd        func() (string, string, bool)
		current       func() (*user.User, error)
		home, user    string
		derived, prob string
	}{
		{name: "both set", env: map[string]string{"HOME": "/h", "USER": "u"}, passwd: notInPasswd, current: unknownC, home: "/h", user: "u"},
		{name: "HOME unset, in passwd", env: map[string]string{"USER": "u"}, passwd: inPasswd, current: unknownC, home: "/home/ada", user: "u", derived: "/home/ada"},
		{name: "HOME empty, USER unset, in passwd", env: map[string]string{"HOME": ""}, passwd: inPasswd, current: unknownC, home: "/home/ada", user: "ada", derived: "/home/ada"},
		{name: "USER unset, not in passwd", env: map[string]string{"HOME": "/h"}, passwd: notInPasswd, current: pureGo, home: "/h", user: uidName},
		{name: "nothing set, not in passwd, pure Go", env: map[string]string{}, passwd: notInPasswd, current: pureGo, home: Unusable, user: uidName, prob: "does not know this user"},
		{name: "nothing set, not in passwd, C library knows (LDAP)", env: map[string]string{}, passwd: notInPasswd, current: ldap, home: "/net/home/bob", user: uidName, derived: "/net/home/bob"},
		{name: "nothing set, unknown to all", env: map[string]string{}, passwd: notInPasswd, current: unknownC, home: Unusable, user: uidName, prob: "does not know this user"},
		{name: "in passwd without a home", env: map[string]string{}, passwd: func() (string, string, bool) { return "ada", "", true }, current: pureGo, home: Unusable, user: "ada", prob: "no home directory"},
	} {
		env = c.env
		prob, derived := ensure(getenv, setenv, c.passwd, c.current)
		if env["HOME"] != c.home || env["USER"] != c.user || derived != c.derived {
			t.Errorf("%s: HOME %q USER %q derived %q; want %q %q %q", c.name, env["HOME"], env["USER"], derived, c.home, c.user, c.derived)
		}
		if (c.prob == "") != (prob == "") || !strings.Contains(prob, c.prob) {
			t.Errorf("%s: problem %q, want one containing %q", c.name, prob, c.prob)
		}
		if prob != "" && !strings.Contains(prob, "set HOME") {
			t.Errorf("%s: problem %q does not say how to fix it", c.name, prob)
		}
		// What Lima's init does next must not fail in a pure-Go build.
		if c.current != nil && env["HOME"] != "" && env["USER"] != "" {
			if _, err := pureGo(); err != nil {
				t.Errorf("%s: Current would fail: %v", c.name, err)
			}
		}
	}
}

func TestPasswdEntry(t *testing.T) {
	name, home, ok := passwdEntry()
	if os.Getuid() == 0 && (!ok || name != "root" || home == "") {
		t.Fatalf("uid 0: passwdEntry() = %q, %q, %v; want root's entry", name, home, ok)
	}
}
