package lima

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/bcollard/marina/core/vm/limavm"
)

// EntitlementVirtualization is the entitlement Virtualization.framework
// requires of the process that runs a VM. With Lima's vz driver that process
// is the host agent of marina's Lima engine (`marina-lima hostagent`), so
// the marina-lima binary must be signed with it (marina itself needs no
// entitlement: it never runs a VM).
const EntitlementVirtualization = "com.apple.security.virtualization"

// VZEntitlements is the entitlements plist marina-lima is signed with: the same
// keys as Lima's vz.entitlements. packaging/darwin/vz.entitlements is the
// copy the Makefile and the release sign with; a test keeps both equal.
const VZEntitlements = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>com.apple.security.network.client</key>
	<true/>
	<key>com.apple.security.network.server</key>
	<true/>
	<key>com.apple.security.virtualization</key>
	<true/>
</dict>
</plist>
`

// codesignArgv is the command that prints exe's entitlements as a plist.
func codesignArgv(exe string) []string {
	return []string{"codesign", "-d", "--entitlements", "-", "--xml", exe}
}

// errNotSigned: codesign says the binary carries no signature at all.
var errNotSigned = errors.New("not signed")

// readEntitlements returns the entitlements exe is signed with (the boolean
// ones: key -> value). A binary without a signature yields errNotSigned; a
// signed one without entitlements (the Go linker's ad-hoc signature) an
// empty map.
func readEntitlements(ctx context.Context, run hostRunner, exe string) (map[string]bool, error) {
	out, errb, err := run(ctx, hostCommand{Argv: codesignArgv(exe)})
	if err != nil {
		if bytes.Contains(errb, []byte("not signed at all")) {
			return nil, errNotSigned
		}
		msg := strings.TrimSpace(string(errb))
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("%s: %s", strings.Join(codesignArgv(exe), " "), msg)
	}
	return ParseEntitlements(out)
}

// ParseEntitlements reads entitlements as codesign prints them: an XML plist
// (`--xml`, possibly behind the 8-byte blob header older codesign printed
// for `--entitlements -`), or the `[Dict]` text format codesign prints by
// default since macOS 12. Only the top-level boolean entries are returned;
// empty output means no entitlements.
func ParseEntitlements(out []byte) (map[string]bool, error) {
	if i := bytes.Index(out, []byte("<?xml")); i >= 0 {
		return parsePlistXML(out[i:])
	}
	if i := bytes.Index(out, []byte("<plist")); i >= 0 {
		return parsePlistXML(out[i:])
	}
	text := strings.TrimSpace(string(out))
	if text == "" {
		return map[string]bool{}, nil
	}
	if strings.Contains(text, "[Dict]") {
		return parseDictText(text)
	}
	return nil, fmt.Errorf("unrecognised codesign output %q", firstLine(text))
}

// parsePlistXML reads the top-level dict of an XML property list.
func parsePlistXML(b []byte) (map[string]bool, error) {
	d := xml.NewDecoder(bytes.NewReader(b))
	// Find the top-level <dict>, inside <plist> (or as the root).
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("entitlements plist: no <dict>: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local == "dict" {
				break
			}
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("entitlements plist: unexpected <%s>", se.Name.Local)
			}
		}
	}
	ents := map[string]bool{}
	key := ""
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("entitlements plist: %w", err)
		}
		switch t := tok.(type) {
		case xml.EndElement: // </dict>
			if key != "" {
				return nil, fmt.Errorf("entitlements plist: key %q has no value", key)
			}
			return ents, nil
		case xml.StartElement:
			if t.Name.Local == "key" {
				if key != "" {
					return nil, fmt.Errorf("entitlements plist: key %q has no value", key)
				}
				var k string
				if err := d.DecodeElement(&k, &t); err != nil {
					return nil, fmt.Errorf("entitlements plist: %w", err)
				}
				key = strings.TrimSpace(k)
				continue
			}
			if key == "" {
				return nil, fmt.Errorf("entitlements plist: <%s> without a key", t.Name.Local)
			}
			switch t.Name.Local {
			case "true":
				ents[key] = true
			case "false":
				ents[key] = false
			}
			// Skip the value (nested dicts and arrays included).
			if err := d.Skip(); err != nil {
				return nil, fmt.Errorf("entitlements plist: %w", err)
			}
			key = ""
		}
	}
}

// parseDictText reads codesign's text rendering of a dict:
//
//	[Dict]
//		[Key] com.apple.security.virtualization
//		[Value]
//			[Bool] true
//
// Top-level keys are those at the indentation of the first [Key] line; the
// first typed line ([Bool], [String], [Dict], ...) after such a key is its
// value.
func parseDictText(text string) (map[string]bool, error) {
	ents := map[string]bool{}
	keyIndent := -1
	key := ""
	inDict := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		indent := len(line) - len(trimmed)
		trimmed = strings.TrimSpace(trimmed)
		switch {
		case trimmed == "" || trimmed == "[Value]":
		case !inDict:
			// Lines before the dict: "Executable=..." and the like.
			inDict = trimmed == "[Dict]"
		case strings.HasPrefix(trimmed, "[Key] "):
			if keyIndent < 0 {
				keyIndent = indent
			}
			if indent == keyIndent {
				key = strings.TrimSpace(strings.TrimPrefix(trimmed, "[Key] "))
			}
		case key != "" && indent > keyIndent && strings.HasPrefix(trimmed, "["):
			if v, ok := strings.CutPrefix(trimmed, "[Bool] "); ok {
				switch v = strings.TrimSpace(v); v {
				case "true":
					ents[key] = true
				case "false":
					ents[key] = false
				default:
					return nil, fmt.Errorf("codesign output: %s = [Bool] %q", key, v)
				}
			}
			key = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !inDict {
		return nil, errors.New("codesign output has no [Dict]")
	}
	return ents, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// entitlementsFile is where marina writes VZEntitlements for the user to
// sign with (~/.marina/share/marina/vz.entitlements).
func entitlementsFile(home string) string {
	return filepath.Join(home, ".marina", "share", "marina", "vz.entitlements")
}

// writeEntitlementsFile writes VZEntitlements to path unless it already
// holds exactly that.
func writeEntitlementsFile(path string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == VZEntitlements {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(VZEntitlements), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// checkEntitlement checks that exe (the program Lima runs as the host agent)
// is signed with the virtualization entitlement. A missing entitlement is an
// error that says exactly how to add it; when the entitlements cannot be
// read at all (no codesign), warn receives why and the check passes: the vz
// driver's own error is then the last word.
func checkEntitlement(ctx context.Context, run hostRunner, exe, home string, warn func(string)) error {
	ents, err := readEntitlements(ctx, run, exe)
	switch {
	case errors.Is(err, errNotSigned):
	case err != nil:
		warn("cannot read " + filepath.Base(exe) + "'s entitlements (" + err.Error() + "); starting anyway")
		return nil
	case ents[EntitlementVirtualization]:
		return nil
	}
	state := "is signed without"
	if errors.Is(err, errNotSigned) {
		state = "is not signed, so it lacks"
	}
	plist := entitlementsFile(home)
	how := ""
	if werr := writeEntitlementsFile(plist); werr != nil {
		plist = "vz.entitlements"
		how = " (a plist with <key>" + EntitlementVirtualization + "</key><true/>, as in marina's packaging/darwin/vz.entitlements)"
	}
	sign, qerr := limavm.QuoteArgs(signArgv(plist, exe))
	if qerr != nil {
		sign = strings.Join(signArgv(plist, exe), " ")
	}
	return fmt.Errorf("%s %s the %s entitlement, without which macOS does not let it run a VM (it is Lima's host agent). "+
		"Sign it ad hoc with that entitlement: %s%s — needed again after every `go install` or `go build` — "+
		"or install marina's signed release archive or Homebrew formula (README, Install)",
		exe, state, EntitlementVirtualization, sign, how)
}

// signArgv is the ad-hoc signing command, as Lima's Makefile runs it.
func signArgv(plist, exe string) []string {
	return []string{"codesign", "--entitlements", plist, "--force", "-s", "-", exe}
}

// CheckSignature is the preflight's entitlement check, run with this
// machine's codesign: nil when exe is signed with the virtualization
// entitlement; otherwise the error marina up gives (which writes the
// entitlements file it names under home), or why codesign could not tell.
func CheckSignature(ctx context.Context, exe, home string) error {
	var unreadable error
	err := checkEntitlement(ctx, runHost, exe, home, func(s string) { unreadable = errors.New(s) })
	if err == nil {
		err = unreadable
	}
	return err
}
