package homeenv

import (
	"errors"
	"os/user"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	setenv := func(k, v string) error { env[k] = v; return nil }
	known := func() (*user.User, error) { return &user.User{Uid: "1000", HomeDir: "/home/ada"}, nil }
	unknown := func() (*user.User, error) { return nil, errors.New("user: unknown userid 4242") }

	env["HOME"] = "/home/set"
	if p, d := ensure(getenv, setenv, unknown); p != "" || d != "" || env["HOME"] != "/home/set" {
		t.Fatalf("HOME set: problem %q, derived %q, HOME %q", p, d, env["HOME"])
	}

	env["HOME"] = ""
	if p, d := ensure(getenv, setenv, known); p != "" || d != "/home/ada" || env["HOME"] != "/home/ada" {
		t.Fatalf("HOME empty, user known: problem %q, derived %q, HOME %q", p, d, env["HOME"])
	}

	delete(env, "HOME")
	p, d := ensure(getenv, setenv, unknown)
	if d != "" || env["HOME"] != Unusable || !strings.Contains(p, "$HOME is not set") || !strings.Contains(p, "unknown userid 4242") || !strings.Contains(p, "set HOME") {
		t.Fatalf("HOME unset, user unknown: problem %q, derived %q, HOME %q", p, d, env["HOME"])
	}

	delete(env, "HOME")
	noHome := func() (*user.User, error) { return &user.User{Uid: "1000"}, nil }
	if p, _ := ensure(getenv, setenv, noHome); !strings.Contains(p, "no home directory") || env["HOME"] != Unusable {
		t.Fatalf("HOME unset, no home in the database: problem %q, HOME %q", p, env["HOME"])
	}
}
