package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/macho"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bcollard/marina/core/vm/lima"
)

var (
	hellos   = map[string]string{}
	hellosMu sync.Mutex
)

// hello builds a tiny static Go program for goos/goarch (a stand-in for
// marina, marina-lima and the guest agent: the archive only cares that they
// are executables of the right platform) and returns its path.
func hello(t *testing.T, goos, goarch string) string {
	t.Helper()
	hellosMu.Lock()
	defer hellosMu.Unlock()
	key := goos + "/" + goarch
	if p, ok := hellos[key]; ok {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "hello-"+goos+"-"+goarch)
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, src)
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build for %s: %v\n%s", key, err, b)
	}
	hellos[key] = out
	return out
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type listed struct {
	mode    int64
	data    []byte
	uid     int
	modTime time.Time
}

func listArchive(t *testing.T, file string) ([]string, map[string]listed) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var names []string
	m := map[string]listed{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, m
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		names = append(names, h.Name)
		m[h.Name] = listed{mode: h.Mode, data: b, uid: h.Uid, modTime: h.ModTime}
	}
}

func TestArchiveLayout(t *testing.T) {
	dir := t.TempDir()
	marina := writeFile(t, filepath.Join(dir, "marina"), "\x7fELF stand-in for marina")
	engine := writeFile(t, filepath.Join(dir, "marina-lima"), "\x7fELF stand-in for marina-lima")
	agent := hello(t, "linux", "amd64")
	spec := Spec{
		Version: "v0.3.0", GOOS: "linux", GOARCH: "amd64",
		Marina:      marina,
		MarinaLima:  engine,
		GuestAgents: map[string]string{"amd64": agent},
		Docs:        []string{writeFile(t, filepath.Join(dir, "src", "README.md"), "# marina\n")},
		LimaDocs:    []string{writeFile(t, filepath.Join(dir, "lima", "LICENSE"), "Apache License\n"), writeFile(t, filepath.Join(dir, "lima", "NOTICE"), "Lima\n")},
		ModTime:     time.Unix(1767225600, 0),
	}
	out, err := WriteArchive(filepath.Join(dir, "dist"), spec)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(out) != "marina-0.3.0-Linux-x86_64.tar.gz" {
		t.Errorf("archive name %s", filepath.Base(out))
	}
	names, entries := listArchive(t, out)
	want := []string{
		"bin/", "bin/marina", "bin/marina-lima",
		"share/", "share/doc/", "share/doc/lima/", "share/doc/lima/LICENSE", "share/doc/lima/NOTICE",
		"share/doc/marina/", "share/doc/marina/README.md",
		"share/lima/", "share/lima/lima-guestagent.Linux-x86_64.gz",
	}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("entries\n%q\nwant\n%q", names, want)
	}
	for name, src := range map[string]string{"bin/marina": marina, "bin/marina-lima": engine} {
		e := entries[name]
		if e.mode != 0o755 {
			t.Errorf("%s mode %o", name, e.mode)
		}
		if orig, _ := os.ReadFile(src); !bytes.Equal(e.data, orig) {
			t.Errorf("%s is not %s", name, src)
		}
	}
	for n, e := range entries {
		if e.uid != 0 || !e.modTime.Equal(spec.ModTime) {
			t.Errorf("%s: uid %d, time %v", n, e.uid, e.modTime)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(entries["share/lima/lima-guestagent.Linux-x86_64.gz"].data))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("the guest agent's gzip header records name %q, time %v (gzip -n records neither)", zr.Name, zr.ModTime)
	}
	got, _ := io.ReadAll(zr)
	if orig, _ := os.ReadFile(agent); !bytes.Equal(got, orig) {
		t.Error("the gzipped guest agent is not the agent")
	}
	if err := CheckArchive(out); err == nil || !strings.Contains(err.Error(), "bin/marina: not an ELF executable") {
		t.Errorf("CheckArchive with a marina that is no executable = %v", err)
	}
	spec.Marina = hello(t, "linux", "amd64")
	if _, err := WriteArchive(filepath.Join(dir, "dist"), spec); err != nil {
		t.Fatal(err)
	}
	if err := CheckArchive(out); err == nil || !strings.Contains(err.Error(), "bin/marina-lima: not an ELF executable") {
		t.Errorf("CheckArchive with a marina-lima that is no executable = %v", err)
	}
	spec.MarinaLima = hello(t, "linux", "amd64")
	if _, err := WriteArchive(filepath.Join(dir, "dist"), spec); err != nil {
		t.Fatal(err)
	}
	if err := CheckArchive(out); err != nil {
		t.Errorf("CheckArchive: %v", err)
	}
	// Same inputs, same bytes.
	first, _ := os.ReadFile(out)
	if _, err := WriteArchive(filepath.Join(dir, "dist"), spec); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(out); !bytes.Equal(first, again) {
		t.Error("writing the same archive twice gave different bytes")
	}
	// An already gzipped agent is shipped as it is.
	gz, _ := gzipN([]byte("\x7fELF..."))
	spec.GuestAgents["amd64"] = writeFile(t, filepath.Join(dir, "agent.gz"), string(gz))
	if _, err := WriteArchive(filepath.Join(dir, "dist"), spec); err != nil {
		t.Fatal(err)
	}
	if _, e := listArchive(t, out); !bytes.Equal(e["share/lima/lima-guestagent.Linux-x86_64.gz"].data, gz) {
		t.Error("a .gz agent was compressed again")
	}
	// No archive without the engine (marina alone cannot run a VM) or
	// without marina itself.
	for what, drop := range map[string]func(*Spec){"marina-lima": func(s *Spec) { s.MarinaLima = "" }, "marina": func(s *Spec) { s.Marina = "" }} {
		s := spec
		drop(&s)
		if _, err := WriteArchive(filepath.Join(dir, "dist2"), s); err == nil || !strings.Contains(err.Error(), "ships marina and marina-lima") || !strings.Contains(err.Error(), "both are needed") {
			t.Errorf("WriteArchive without %s = %v", what, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "dist2")); !os.IsNotExist(err) {
		t.Errorf("WriteArchive without a binary left dist2 behind: %v", err)
	}
}

func TestCheckArchiveRefuses(t *testing.T) {
	dir := t.TempDir()
	lic := writeFile(t, filepath.Join(dir, "LICENSE"), "Apache License\n")
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{name: "agent of another CPU", spec: Spec{GOOS: "linux", GOARCH: "arm64", Marina: hello(t, "linux", "arm64"), MarinaLima: hello(t, "linux", "arm64"),
			GuestAgents: map[string]string{"arm64": hello(t, "linux", "amd64")}, LimaDocs: []string{lic}},
			want: "share/lima/lima-guestagent.Linux-aarch64.gz: an ELF ET_EXEC EM_X86_64, want an executable for EM_AARCH64"},
		{name: "both agents", spec: Spec{GOOS: "linux", GOARCH: "amd64", Marina: hello(t, "linux", "amd64"), MarinaLima: hello(t, "linux", "amd64"),
			GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64"), "arm64": hello(t, "linux", "arm64")}, LimaDocs: []string{lic}},
			want: "lima-guestagent.Linux-aarch64.gz is for another architecture"},
		{name: "marina for another OS", spec: Spec{GOOS: "linux", GOARCH: "amd64", Marina: hello(t, "darwin", "amd64"), MarinaLima: hello(t, "linux", "amd64"),
			GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64")}, LimaDocs: []string{lic}},
			want: "bin/marina: not an ELF executable"},
		{name: "marina-lima for another CPU", spec: Spec{GOOS: "linux", GOARCH: "amd64", Marina: hello(t, "linux", "amd64"), MarinaLima: hello(t, "linux", "arm64"),
			GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64")}, LimaDocs: []string{lic}},
			want: "bin/marina-lima: an ELF ET_EXEC EM_AARCH64, want an executable for EM_X86_64"},
		{name: "no Lima license", spec: Spec{GOOS: "linux", GOARCH: "amd64", Marina: hello(t, "linux", "amd64"), MarinaLima: hello(t, "linux", "amd64"),
			GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64")}},
			want: "no share/doc/lima/LICENSE"},
		// The Go linker signs darwin/arm64 binaries ad hoc, without
		// entitlements: what `go install` gives a Mac user. marina is
		// fine so (it is checked first); its engine is not.
		{name: "darwin, linker-signed", spec: Spec{GOOS: "darwin", GOARCH: "arm64", Marina: hello(t, "darwin", "arm64"), MarinaLima: hello(t, "darwin", "arm64"),
			GuestAgents: map[string]string{"arm64": hello(t, "linux", "arm64")}, LimaDocs: []string{lic}},
			want: "bin/marina-lima: signed without entitlements"},
		// darwin/amd64 binaries are not signed at all.
		{name: "darwin, unsigned", spec: Spec{GOOS: "darwin", GOARCH: "amd64", Marina: hello(t, "darwin", "amd64"), MarinaLima: hello(t, "darwin", "amd64"),
			GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64")}, LimaDocs: []string{lic}},
			want: "bin/marina-lima: not signed (no LC_CODE_SIGNATURE)"},
		{name: "darwin, marina for another CPU", spec: Spec{GOOS: "darwin", GOARCH: "arm64", Marina: hello(t, "darwin", "amd64"), MarinaLima: hello(t, "darwin", "arm64"),
			GuestAgents: map[string]string{"arm64": hello(t, "linux", "arm64")}, LimaDocs: []string{lic}},
			want: "bin/marina: a Mach-O"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Version = "1.0.0"
			out, err := WriteArchive(t.TempDir(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckArchive(out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckArchive = %v, want %q", err, tc.want)
			}
		})
	}
}

// superBlob builds a code signature holding only an entitlements blob.
func superBlob(entitlements string) []byte {
	be := binary.BigEndian
	blob := be.AppendUint32(nil, csMagicEntitlements)
	blob = be.AppendUint32(blob, uint32(8+len(entitlements)))
	blob = append(blob, entitlements...)
	sb := be.AppendUint32(nil, csMagicEmbeddedSignature)
	sb = be.AppendUint32(sb, uint32(12+8+len(blob)))
	sb = be.AppendUint32(sb, 1)
	sb = be.AppendUint32(sb, csSlotEntitlements)
	sb = be.AppendUint32(sb, 12+8)
	return append(sb, blob...)
}

// TestCheckArchiveDarwinSigned: a darwin archive passes once marina-lima's
// code signature carries the entitlement, with marina signed only by the Go
// linker (it runs no VM). No Mac here to run codesign: the linker's
// signature of a real darwin/arm64 binary is replaced, in place, by one
// holding packaging/darwin/vz.entitlements.
func TestCheckArchiveDarwinSigned(t *testing.T) {
	b, err := os.ReadFile(hello(t, "darwin", "arm64"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := macho.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	patched := false
	for _, l := range f.Loads {
		raw := l.Raw()
		if f.ByteOrder.Uint32(raw) != lcCodeSignature {
			continue
		}
		off, size := f.ByteOrder.Uint32(raw[8:]), f.ByteOrder.Uint32(raw[12:])
		sb := superBlob(lima.VZEntitlements)
		if len(sb) > int(size) {
			t.Fatalf("the linker's signature (%d bytes) is smaller than the test's (%d)", size, len(sb))
		}
		region := b[off : off+size]
		clear(region)
		copy(region, sb)
		patched = true
	}
	if !patched {
		t.Fatal("the Go linker did not sign the darwin/arm64 binary")
	}
	dir := t.TempDir()
	marina := hello(t, "darwin", "arm64")
	engine := writeFile(t, filepath.Join(dir, "marina-lima"), string(b))
	out, err := WriteArchive(dir, Spec{Version: "v1.0.0", GOOS: "darwin", GOARCH: "arm64", Marina: marina, MarinaLima: engine,
		GuestAgents: map[string]string{"arm64": hello(t, "linux", "arm64")},
		LimaDocs:    []string{writeFile(t, filepath.Join(dir, "LICENSE"), "Apache License\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(out) != "marina-1.0.0-Darwin-arm64.tar.gz" {
		t.Errorf("name %s", filepath.Base(out))
	}
	if err := CheckArchive(out); err != nil {
		t.Errorf("CheckArchive: %v", err)
	}
	// Entitlements that do not grant the virtualization key are refused.
	other := superBlob(strings.ReplaceAll(lima.VZEntitlements, "<key>com.apple.security.virtualization</key>\n\t<true/>", "<key>com.apple.security.virtualization</key>\n\t<false/>"))
	if bytes.Equal(other, superBlob(lima.VZEntitlements)) {
		t.Fatal("the test's entitlements still grant virtualization")
	}
	for _, l := range f.Loads {
		if raw := l.Raw(); f.ByteOrder.Uint32(raw) == lcCodeSignature {
			off, size := f.ByteOrder.Uint32(raw[8:]), f.ByteOrder.Uint32(raw[12:])
			clear(b[off : off+size])
			copy(b[off:], other)
		}
	}
	writeFile(t, engine, string(b))
	out, err = WriteArchive(dir, Spec{Version: "v1.0.0", GOOS: "darwin", GOARCH: "arm64", Marina: marina, MarinaLima: engine,
		GuestAgents: map[string]string{"arm64": hello(t, "linux", "arm64")},
		LimaDocs:    []string{filepath.Join(dir, "LICENSE")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckArchive(out); err == nil || !strings.Contains(err.Error(), "bin/marina-lima: not signed with the com.apple.security.virtualization entitlement") {
		t.Errorf("CheckArchive = %v", err)
	}
}

// rewriteArchive copies the archive in to out, passing every header through
// edit; edit returning false drops the entry. Each name in add is then
// appended as an executable, a copy of bin/marina.
func rewriteArchive(t *testing.T, in, out string, edit func(*tar.Header) bool, add ...string) {
	t.Helper()
	names, entries := listArchive(t, in)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	for _, n := range names {
		e := entries[n]
		h := &tar.Header{Name: n, Mode: e.mode, ModTime: e.modTime, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if !edit(h) {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range add {
		e := entries["bin/marina"]
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o755, ModTime: e.modTime, Typeflag: tar.TypeReg, Size: int64(len(e.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestCheckArchiveBinaries: bin/ holds exactly bin/marina and
// bin/marina-lima, both executable. An archive whose bin/marina-lima is
// missing or not executable is refused, as bin/marina's would be: marina
// looks for its engine beside itself and cannot run a VM without it. So is
// one with another program in bin/ (it would land on PATH with marina), or
// with the engine under another name (marina would not find it).
func TestCheckArchiveBinaries(t *testing.T) {
	dir := t.TempDir()
	good, err := WriteArchive(filepath.Join(dir, "good"), Spec{Version: "1.0.0", GOOS: "linux", GOARCH: "amd64",
		Marina: hello(t, "linux", "amd64"), MarinaLima: hello(t, "linux", "amd64"),
		GuestAgents: map[string]string{"amd64": hello(t, "linux", "amd64")},
		LimaDocs:    []string{writeFile(t, filepath.Join(dir, "LICENSE"), "Apache License\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckArchive(good); err != nil {
		t.Fatalf("CheckArchive of the unedited archive: %v", err)
	}
	keep := func(*tar.Header) bool { return true }
	for _, tc := range []struct {
		name string
		edit func(*tar.Header) bool
		add  []string
		want string
	}{
		{"no marina-lima", func(h *tar.Header) bool { return h.Name != "bin/marina-lima" }, nil, "no bin/marina-lima"},
		{"no marina", func(h *tar.Header) bool { return h.Name != "bin/marina" }, nil, "no bin/marina"},
		{"marina not executable", func(h *tar.Header) bool {
			if h.Name == "bin/marina" {
				h.Mode = 0o644
			}
			return true
		}, nil, "bin/marina is not executable (mode 644)"},
		{"marina-lima not executable", func(h *tar.Header) bool {
			if h.Name == "bin/marina-lima" {
				h.Mode = 0o644
			}
			return true
		}, nil, "bin/marina-lima is not executable (mode 644)"},
		{"another program in bin", keep, []string{"bin/limactl"}, "bin/limactl is not one of marina's programs (bin/ holds only bin/marina and bin/marina-lima)"},
		{"another program in bin, as ./bin", keep, []string{"./bin/marina-helper"}, "bin/marina-helper is not one of marina's programs (bin/ holds only bin/marina and bin/marina-lima)"},
		{"a directory in bin", keep, []string{"bin/lima/limactl"}, "bin/lima/limactl is not one of marina's programs (bin/ holds only bin/marina and bin/marina-lima)"},
		{"the engine under another name", func(h *tar.Header) bool {
			if h.Name == "bin/marina-lima" {
				h.Name = "bin/marina-engine"
			}
			return true
		}, nil, "bin/marina-engine is not one of marina's programs (bin/ holds only bin/marina and bin/marina-lima)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), filepath.Base(good))
			rewriteArchive(t, good, out, tc.edit, tc.add...)
			// The message ends with what is wrong ("no bin/marina" is
			// also the start of "no bin/marina-lima").
			if err := CheckArchive(out); err == nil || !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Errorf("CheckArchive = %v, want it to end in %q", err, tc.want)
			}
		})
	}
}

// TestArchiveCommand runs the command as the Makefile does, with a given
// guest agent (the build itself is tested in core/vm/lima).
func TestArchiveCommand(t *testing.T) {
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs")
	writeFile(t, filepath.Join(docs, "README.md"), "# marina\n")
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")
	err := run([]string{"archive", "-version", "v0.3.0-2-gabcdef", "-goos", "linux", "-goarch", "arm64",
		"-marina", hello(t, "linux", "arm64"), "-marina-lima", hello(t, "linux", "arm64"), "-guestagent", hello(t, "linux", "arm64"),
		"-out", filepath.Join(dir, "dist"), "-docs", docs})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "dist", "marina-0.3.0-2-gabcdef-Linux-aarch64.tar.gz")
	if err := run([]string{"check", out}); err != nil {
		t.Fatal(err)
	}
	names, entries := listArchive(t, out)
	for _, n := range []string{"share/doc/lima/LICENSE", "share/doc/lima/NOTICE", "share/doc/marina/README.md", "share/lima/lima-guestagent.Linux-aarch64.gz"} {
		if _, ok := entries[n]; !ok {
			t.Errorf("no %s in %q", n, names)
		}
	}
	if e := entries["bin/marina"]; !e.modTime.Equal(time.Unix(1767225600, 0)) {
		t.Errorf("SOURCE_DATE_EPOCH not applied: %v", e.modTime)
	}
	var bins []string
	for _, n := range names {
		if strings.HasPrefix(n, "bin/") && n != "bin/" {
			bins = append(bins, n)
		}
	}
	if want := []string{"bin/marina", "bin/marina-lima"}; !reflect.DeepEqual(bins, want) {
		t.Errorf("bin/ holds %q, want %q", bins, want)
	}
	for _, name := range bins {
		if e := entries[name]; e.mode != 0o755 {
			t.Errorf("%s: mode %o", name, e.mode)
		}
	}
	if err := run([]string{"archive", "-version", "v1"}); err == nil {
		t.Error("archive without -goos/-goarch/-marina accepted")
	}
	err = run([]string{"archive", "-version", "v1", "-goos", "linux", "-goarch", "arm64", "-marina", hello(t, "linux", "arm64"),
		"-guestagent", hello(t, "linux", "arm64"), "-out", filepath.Join(dir, "dist3"), "-docs", docs})
	if err == nil || !strings.Contains(err.Error(), "-marina-lima") {
		t.Errorf("archive without -marina-lima = %v", err)
	}
	err = run([]string{"archive", "-version", "v1", "-goos", "linux", "-goarch", "arm64", "-marina-lima", hello(t, "linux", "arm64"),
		"-guestagent", hello(t, "linux", "arm64"), "-out", filepath.Join(dir, "dist4"), "-docs", docs})
	if err == nil || !strings.Contains(err.Error(), "needs -version, -goos, -goarch, -marina and -marina-lima") {
		t.Errorf("archive without -marina = %v", err)
	}
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestChecksumsAndFormula(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{ArchiveName("v0.3.0", "darwin", "arm64"), ArchiveName("v0.3.0", "darwin", "amd64")} {
		writeFile(t, filepath.Join(dir, n), n)
	}
	if err := WriteChecksums(dir); err != nil {
		t.Fatal(err)
	}
	sumsFile, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	sums, err := parseSums(sumsFile)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != 2 || !sha256RE.MatchString(sums["marina-0.3.0-Darwin-x86_64.tar.gz"]) {
		t.Fatalf("SHA256SUMS:\n%s", sumsFile)
	}
	// sha256sum's own format, so `shasum -a 256 -c SHA256SUMS` checks it.
	if lines := strings.Split(strings.TrimSpace(string(sumsFile)), "\n"); !strings.HasSuffix(lines[0], "  marina-0.3.0-Darwin-arm64.tar.gz") {
		t.Errorf("first line %q", lines[0])
	}

	tmpl, err := os.ReadFile(filepath.Join("..", "homebrew", "marina.rb.tmpl"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := RenderFormula(string(tmpl), "bcollard/marina", "v0.3.0", sumsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"class Marina < Formula",
		`version "0.3.0"`,
		`url "https://github.com/bcollard/marina/releases/download/v0.3.0/marina-0.3.0-Darwin-arm64.tar.gz"`,
		`sha256 "` + sums["marina-0.3.0-Darwin-arm64.tar.gz"] + `"`,
		`url "https://github.com/bcollard/marina/releases/download/v0.3.0/marina-0.3.0-Darwin-x86_64.tar.gz"`,
		`sha256 "` + sums["marina-0.3.0-Darwin-x86_64.tar.gz"] + `"`,
		`libexec.install "bin", "share"`,
		`bin.install_symlink libexec/"bin/marina"`,
		// marina-lima stays in libexec/bin, beside marina's real file,
		// where marina looks for it; it is the binary that is signed.
		`assert_predicate libexec/"bin/marina-lima", :executable?`,
		`codesign -d --entitlements - --xml #{libexec}/bin/marina-lima"`,
		`libexec/"share/lima/lima-guestagent.Linux-#{Hardware::CPU.arm? ? "aarch64" : "x86_64"}.gz"`,
		"depends_on macos: :ventura",
		"(Lima " + lima.LimaVersion + ")",
	} {
		if !strings.Contains(f, want) {
			t.Errorf("the formula lacks %s:\n%s", want, f)
		}
	}
	// The arm64 URL sits in on_arm, the x86_64 one in on_intel.
	if a, i := strings.Index(f, "on_arm do"), strings.Index(f, "on_intel do"); a < 0 || i < 0 ||
		!(a < strings.Index(f, "Darwin-arm64") && strings.Index(f, "Darwin-arm64") < i && i < strings.Index(f, "Darwin-x86_64")) {
		t.Errorf("archives under the wrong CPU blocks:\n%s", f)
	}
	// The agent path the formula tests is the one the archive has.
	for _, goarch := range []string{"arm64", "amd64"} {
		if n := strings.TrimPrefix(guestAgentEntry(goarch), "share/lima/lima-guestagent.Linux-"); !strings.Contains(f, `"`+strings.TrimSuffix(n, ".gz")+`"`) {
			t.Errorf("the formula does not name %s", guestAgentEntry(goarch))
		}
	}
	// Ruby's blocks balance: every class/def/do has its end.
	opens, ends := 0, 0
	for _, line := range strings.Split(f, "\n") {
		l := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "class "), strings.HasPrefix(l, "def "), strings.HasSuffix(l, " do"):
			opens++
		case l == "end":
			ends++
		}
	}
	if opens != ends || opens == 0 {
		t.Errorf("%d blocks opened, %d ended:\n%s", opens, ends, f)
	}
	if strings.Contains(f, "{{") {
		t.Errorf("unrendered template actions:\n%s", f)
	}

	// A release without one of the darwin archives renders no formula.
	partial := []byte(strings.Split(string(sumsFile), "\n")[0] + "\n")
	if _, err := RenderFormula(string(tmpl), "bcollard/marina", "v0.3.0", partial); err == nil || !strings.Contains(err.Error(), "Darwin-x86_64") {
		t.Errorf("RenderFormula without the x86_64 archive: %v", err)
	}
	if _, err := RenderFormula("{{.Nope}}", "bcollard/marina", "v0.3.0", sumsFile); err == nil {
		t.Error("a template naming an unknown field rendered")
	}
}
