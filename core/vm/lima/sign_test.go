package lima

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestVZEntitlementsMatchPackaging: the plist preflight writes for the user
// is the one make build and the release sign with.
func TestVZEntitlementsMatchPackaging(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "packaging", "darwin", "vz.entitlements"))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != VZEntitlements {
		t.Errorf("packaging/darwin/vz.entitlements and VZEntitlements differ:\n%s\n---\n%s", b, VZEntitlements)
	}
	ents, err := ParseEntitlements(b)
	if err != nil {
		t.Fatal(err)
	}
	if !ents[EntitlementVirtualization] {
		t.Errorf("vz.entitlements does not grant %s: %v", EntitlementVirtualization, ents)
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "codesign", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseEntitlements(t *testing.T) {
	lima := map[string]bool{
		"com.apple.security.network.client": true,
		"com.apple.security.network.server": true,
		EntitlementVirtualization:           true,
	}
	for _, tc := range []struct {
		fixture string
		want    map[string]bool
	}{
		{"xml-limactl.stdout", lima},
		{"blob-xml.stdout", lima},
		{"dict-limactl.stdout", lima},
		{"xml-pretty-other.stdout", map[string]bool{"com.apple.security.cs.allow-jit": true, EntitlementVirtualization: false}},
		{"dict-other.stdout", map[string]bool{"com.apple.security.app-sandbox": true, EntitlementVirtualization: false}},
		{"linker-signed.stdout", map[string]bool{}},
	} {
		got, err := ParseEntitlements(readFixture(t, tc.fixture))
		if err != nil {
			t.Errorf("%s: %v", tc.fixture, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.fixture, got, tc.want)
		}
	}
	for _, bad := range []string{
		"code object is not signed at all",
		"<plist><dict><key>k</key></dict></plist>",
		"<plist><dict><true/></dict></plist>",
		"<plist><dict><key>k</key><true/>",
		"[Dict]\n\t[Key] com.apple.security.virtualization\n\t[Value]\n\t\t[Bool] maybe\n",
	} {
		if got, err := ParseEntitlements([]byte(bad)); err == nil {
			t.Errorf("ParseEntitlements(%q) = %v, want an error", bad, got)
		}
	}
}

// codesignFake answers codesign's argv with a fixture (stdout, stderr, exit
// status) and fails on any other command.
func codesignFake(t *testing.T, exe, stdout, stderr string, exit int) hostRunner {
	return func(ctx context.Context, c hostCommand) ([]byte, []byte, error) {
		want := []string{"codesign", "-d", "--entitlements", "-", "--xml", exe}
		if !reflect.DeepEqual(c.Argv, want) {
			t.Errorf("ran %q, want %q", c.Argv, want)
			return nil, nil, errors.New("unexpected command")
		}
		var o, e []byte
		if stdout != "" {
			o = readFixture(t, stdout)
		}
		if stderr != "" {
			e = readFixture(t, stderr)
		}
		if exit != 0 {
			return o, e, &exec.ExitError{}
		}
		return o, e, nil
	}
}

func TestCheckEntitlement(t *testing.T) {
	exe := "/Users/me/go/bin/marina-lima"
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		exit           int
		want           string // "" = passes
		warn           string
	}{
		{name: "signed (xml)", stdout: "xml-limactl.stdout"},
		{name: "signed (text)", stdout: "dict-limactl.stdout"},
		{name: "linker-signed", stdout: "linker-signed.stdout", stderr: "linker-signed.stderr", want: "is signed without the com.apple.security.virtualization entitlement"},
		{name: "entitlement false", stdout: "dict-other.stdout", want: "is signed without"},
		{name: "unsigned", stderr: "unsigned.stderr", exit: 1, want: "is not signed, so it lacks the com.apple.security.virtualization entitlement"},
		{name: "codesign fails otherwise", exit: 1, warn: "cannot read marina-lima's entitlements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			var warned []string
			err := checkEntitlement(context.Background(), codesignFake(t, exe, tc.stdout, tc.stderr, tc.exit), exe, home,
				func(s string) { warned = append(warned, s) })
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("err = %v, want %q", err, tc.want)
				}
				// The fix is a command that works as printed: the plist
				// it names exists and grants the entitlement.
				plist := entitlementsFile(home)
				cmd := "'codesign' '--entitlements' '" + plist + "' '--force' '-s' '-' '" + exe + "'"
				if !strings.Contains(err.Error(), cmd) {
					t.Errorf("err = %v\nwant the command %s", err, cmd)
				}
				b, rerr := os.ReadFile(plist)
				if rerr != nil || string(b) != VZEntitlements {
					t.Errorf("%s: %q, %v", plist, b, rerr)
				}
				if !strings.Contains(err.Error(), "signed release archive or Homebrew formula") {
					t.Errorf("err = %v: does not name the release", err)
				}
			}
			if (tc.warn == "") != (len(warned) == 0) || (tc.warn != "" && !strings.Contains(warned[0], tc.warn)) {
				t.Errorf("warnings %q, want %q", warned, tc.warn)
			}
		})
	}
}

// TestCheckSignatureRealCodesign runs the check with this machine's
// codesign on the test binary, which the Go linker signed without
// entitlements (darwin/arm64) or not at all: refused with the fix on a Mac;
// elsewhere codesign is missing, and the check says it cannot tell.
func TestCheckSignatureRealCodesign(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = CheckSignature(context.Background(), exe, t.TempDir())
	want := "cannot read " + filepath.Base(exe) + "'s entitlements (codesign -d --entitlements - --xml " + exe + ": exec: \"codesign\": executable file not found"
	if _, lerr := exec.LookPath("codesign"); lerr == nil {
		want = "the com.apple.security.virtualization entitlement, without which macOS does not let it run a VM"
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckSignature(%s) = %v, want %q", exe, err, want)
	}
}
