package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"
	"time"

	"github.com/bcollard/marina/core/vm/lima"
	"github.com/bcollard/marina/core/vm/limavm"
)

// Spec is what goes into one release archive.
type Spec struct {
	// Version is marina's version; a leading "v" is dropped from the name.
	Version string
	// GOOS and GOARCH are the platform marina was built for.
	GOOS, GOARCH string
	// Marina is the marina binary (cmd/marina), the one program users run:
	// it answers every command itself.
	Marina string
	// MarinaLima is marina's Lima engine (limavm.EngineName), shipped beside
	// marina, which finds it there; on darwin it is Lima's host agent and
	// signed with the virtualization entitlement.
	MarinaLima string
	// GuestAgents maps a VM's GOARCH to Lima's guest agent for it, plain
	// or gzipped; it is shipped gzipped as share/lima/lima-guestagent.Linux-<arch>.gz.
	GuestAgents map[string]string
	// Docs are marina's README.md, LICENSE..., shipped in share/doc/marina.
	Docs []string
	// LimaDocs are Lima's LICENSE and NOTICE (they cover the guest agent),
	// shipped in share/doc/lima.
	LimaDocs []string
	// ModTime is every entry's time.
	ModTime time.Time
}

// UnameM is the architecture as `uname -m` names it, as in Lima's archive
// names: x86_64 for amd64; arm64 on darwin, aarch64 on linux.
func UnameM(goos, goarch string) string {
	switch {
	case goarch == "amd64":
		return "x86_64"
	case goarch == "arm64" && goos == "linux":
		return "aarch64"
	}
	return goarch
}

// ArchiveName is the archive's file name, Lima's pattern:
// marina-<version>-<OS>-<uname -m>.tar.gz, e.g. marina-0.3.0-Darwin-arm64.tar.gz.
func ArchiveName(version, goos, goarch string) string {
	return "marina-" + strings.TrimPrefix(version, "v") + "-" + capitalize(goos) + "-" + UnameM(goos, goarch) + ".tar.gz"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// guestAgentEntry is the archive path of the guest agent for a VM of goarch.
func guestAgentEntry(goarch string) string {
	return "share/lima/lima-guestagent.Linux-" + UnameM("linux", goarch) + ".gz"
}

// The binaries' archive paths: marina and, beside it, where marina looks
// first, its Lima engine. They are the only entries under bin/.
const (
	binMarina = "bin/marina"
	binEngine = "bin/" + limavm.EngineName
)

// binaries are the archive's programs, in the order CheckArchive checks them.
var binaries = []string{binMarina, binEngine}

type entry struct {
	name string
	mode int64
	data []byte // nil for a directory
}

// WriteArchive writes the archive for spec into dir and returns its path.
// The tree is Lima's: bin/marina, bin/marina-lima, share/lima/lima-guestagent.Linux-<arch>.gz,
// share/doc/marina/..., share/doc/lima/{LICENSE,NOTICE}. Entries are sorted,
// owned by 0:0 and dated spec.ModTime, so the same inputs give the same
// bytes.
func WriteArchive(dir string, spec Spec) (string, error) {
	if len(spec.GuestAgents) == 0 {
		return "", errors.New("no guest agent: the archive ships Lima's guest agent beside marina")
	}
	files := map[string]entry{}
	add := func(name string, mode int64, data []byte) {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			files[d+"/"] = entry{name: d + "/", mode: 0o755}
		}
		files[name] = entry{name: name, mode: mode, data: data}
	}
	if spec.Marina == "" || spec.MarinaLima == "" {
		return "", errors.New("the archive ships marina and " + limavm.EngineName + ", its Lima engine, side by side: both are needed")
	}
	for name, src := range map[string]string{binMarina: spec.Marina, binEngine: spec.MarinaLima} {
		bin, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		add(name, 0o755, bin)
	}
	for goarch, src := range spec.GuestAgents {
		b, err := os.ReadFile(src)
		if err != nil {
			return "", err
		}
		if !isGzip(b) {
			if b, err = gzipN(b); err != nil {
				return "", err
			}
		}
		add(guestAgentEntry(goarch), 0o644, b)
	}
	for _, group := range []struct {
		dir   string
		files []string
	}{{"share/doc/marina", spec.Docs}, {"share/doc/lima", spec.LimaDocs}} {
		for _, f := range group.files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			add(group.dir+"/"+filepath.Base(f), 0o644, b)
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, ArchiveName(spec.Version, spec.GOOS, spec.GOARCH))
	tmp, err := os.CreateTemp(dir, ".archive-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	zw, _ := gzip.NewWriterLevel(tmp, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	mt := spec.ModTime.UTC().Truncate(time.Second)
	for _, n := range names {
		e := files[n]
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: mt, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.data == nil {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return "", err
		}
		if _, err := tw.Write(e.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := zw.Close(); err != nil {
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	return out, os.Rename(tmp.Name(), out)
}

func isGzip(b []byte) bool { return len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b }

// gzipN compresses like `gzip -n` (Lima's Makefile): no name, no time.
func gzipN(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var archiveRE = regexp.MustCompile(`^marina-(.+)-(Darwin|Linux)-(arm64|aarch64|x86_64)\.tar\.gz$`)

// CheckArchive checks a release archive at file level, as Lima's
// hack/validate-artifact.sh does and more: bin/marina and bin/marina-lima
// are executables for the archive's platform (Mach-O or ELF of its CPU),
// and bin/ holds nothing else (an archive like Lima's is extracted onto a
// prefix whose bin/ is on PATH: any other program there would be installed
// with marina, and an engine under another name is one marina cannot
// find); on darwin, marina-lima (Lima's host agent there) is signed with
// the virtualization entitlement; the guest agent for the platform's
// architecture is there, gzipped, a static Linux ELF of that CPU, and the
// other architecture's is not; nothing escapes the archive's root.
func CheckArchive(file string) error {
	m := archiveRE.FindStringSubmatch(filepath.Base(file))
	if m == nil {
		return fmt.Errorf("%s: not a marina release archive name (marina-<version>-<OS>-<arch>.tar.gz)", file)
	}
	goos := strings.ToLower(m[2])
	goarch := map[string]string{"arm64": "arm64", "aarch64": "arm64", "x86_64": "amd64"}[m[3]]
	other := map[string]string{"arm64": "amd64", "amd64": "arm64"}[goarch]
	entries, err := readArchive(file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s: %s", file, fmt.Sprintf(format, a...))
	}
	for name, e := range entries {
		if path.IsAbs(name) || strings.HasPrefix(path.Clean(name), "..") {
			return fail("entry %q leaves the archive's root", name)
		}
		if e.uid != 0 || e.gid != 0 {
			return fail("entry %q is owned by %d:%d, not 0:0", name, e.uid, e.gid)
		}
		if c := path.Clean(name); strings.HasPrefix(c, "bin/") && !slices.Contains(binaries, c) {
			return fail("%s is not one of marina's programs (bin/ holds only %s)", name, strings.Join(binaries, " and "))
		}
	}
	for _, name := range binaries {
		bin, ok := entries[name]
		if !ok || bin.data == nil {
			return fail("no %s", name)
		}
		if bin.mode&0o111 == 0 {
			return fail("%s is not executable (mode %o)", name, bin.mode)
		}
		switch goos {
		case "darwin":
			// Only the engine runs the VM; marina needs no entitlement.
			if err := checkMachO(bin.data, goarch, name == binEngine); err != nil {
				return fail("%s: %v", name, err)
			}
		case "linux":
			if err := checkELF(bin.data, goarch, false); err != nil {
				return fail("%s: %v", name, err)
			}
		}
	}
	ga, ok := entries[guestAgentEntry(goarch)]
	if !ok {
		return fail("no %s (Lima's guest agent for the VM)", guestAgentEntry(goarch))
	}
	zr, err := gzip.NewReader(bytes.NewReader(ga.data))
	if err != nil {
		return fail("%s: %v", guestAgentEntry(goarch), err)
	}
	agent, err := io.ReadAll(zr)
	if err != nil {
		return fail("%s: %v", guestAgentEntry(goarch), err)
	}
	if err := checkELF(agent, goarch, true); err != nil {
		return fail("%s: %v", guestAgentEntry(goarch), err)
	}
	if _, ok := entries[guestAgentEntry(other)]; ok {
		return fail("%s is for another architecture (a %s VM runs on this platform)", guestAgentEntry(other), goarch)
	}
	if _, ok := entries["share/doc/lima/LICENSE"]; !ok {
		return fail("no share/doc/lima/LICENSE (Lima's license covers the guest agent)")
	}
	return nil
}

type archived struct {
	mode     int64
	uid, gid int
	data     []byte
}

func readArchive(file string) (map[string]archived, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	entries := map[string]archived{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(h.Name, "./")
		a := archived{mode: h.Mode, uid: h.Uid, gid: h.Gid}
		if h.Typeflag == tar.TypeReg {
			if a.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		entries[name] = a
	}
}

func checkELF(b []byte, goarch string, static bool) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	want := map[string]elf.Machine{"arm64": elf.EM_AARCH64, "amd64": elf.EM_X86_64}[goarch]
	if f.Machine != want || f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("an ELF %v %v, want an executable for %v", f.Type, f.Machine, want)
	}
	if static {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				return errors.New("dynamically linked; the guest agent is built with CGO_ENABLED=0")
			}
		}
	}
	return nil
}

// checkMachO checks that b is a thin Mach-O executable for goarch and, when
// entitled, that its code signature grants the virtualization entitlement.
func checkMachO(b []byte, goarch string, entitled bool) error {
	f, err := macho.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("not a (thin) Mach-O executable: %w", err)
	}
	want := map[string]macho.Cpu{"arm64": macho.CpuArm64, "amd64": macho.CpuAmd64}[goarch]
	if f.Cpu != want || f.Type != macho.TypeExec {
		return fmt.Errorf("a Mach-O %v for %v, want an executable for %v", f.Type, f.Cpu, want)
	}
	if !entitled {
		return nil
	}
	ents, err := machOEntitlements(f, b)
	if err != nil {
		return err
	}
	granted, err := lima.ParseEntitlements(ents)
	if err != nil {
		return fmt.Errorf("its entitlements: %w", err)
	}
	if !granted[lima.EntitlementVirtualization] {
		return fmt.Errorf("not signed with the %s entitlement (make release-archive signs it with packaging/darwin/vz.entitlements on macOS)", lima.EntitlementVirtualization)
	}
	return nil
}

// Code signature layout (Apple's xnu/osfmk/kern/cs_blobs.h): the
// LC_CODE_SIGNATURE load command points at a big-endian SuperBlob whose
// index lists blobs by slot; slot 5 holds the XML entitlements.
const (
	lcCodeSignature          = 0x1d
	csMagicEmbeddedSignature = 0xfade0cc0
	csMagicEntitlements      = 0xfade7171
	csSlotEntitlements       = 5
)

// machOEntitlements returns the XML entitlements embedded in the binary's
// code signature; an error when it has no signature or no entitlements.
func machOEntitlements(f *macho.File, b []byte) ([]byte, error) {
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) < 16 || f.ByteOrder.Uint32(raw) != lcCodeSignature {
			continue
		}
		off, size := f.ByteOrder.Uint32(raw[8:]), f.ByteOrder.Uint32(raw[12:])
		if uint64(off)+uint64(size) > uint64(len(b)) {
			return nil, errors.New("the code signature lies outside the file")
		}
		return superBlobEntitlements(b[off : off+size])
	}
	return nil, errors.New("not signed (no LC_CODE_SIGNATURE)")
}

// superBlobEntitlements reads the entitlements blob of a code signature.
func superBlobEntitlements(sb []byte) ([]byte, error) {
	be := binary.BigEndian
	if len(sb) < 12 || be.Uint32(sb) != csMagicEmbeddedSignature {
		return nil, errors.New("the code signature is not an embedded-signature SuperBlob")
	}
	count := be.Uint32(sb[8:])
	if uint64(12)+uint64(count)*8 > uint64(len(sb)) {
		return nil, errors.New("the code signature's index is truncated")
	}
	for i := uint32(0); i < count; i++ {
		typ, off := be.Uint32(sb[12+8*i:]), be.Uint32(sb[16+8*i:])
		if typ != csSlotEntitlements {
			continue
		}
		if uint64(off)+8 > uint64(len(sb)) {
			return nil, errors.New("the entitlements blob lies outside the signature")
		}
		blob := sb[off:]
		magic, n := be.Uint32(blob), be.Uint32(blob[4:])
		if magic != csMagicEntitlements || n < 8 || uint64(n) > uint64(len(blob)) {
			return nil, fmt.Errorf("a malformed entitlements blob (magic %#x, length %d)", magic, n)
		}
		return blob[8:n], nil
	}
	return nil, errors.New("signed without entitlements (the Go linker's ad-hoc signature, or codesign without --entitlements)")
}

// WriteChecksums writes dir/SHA256SUMS for the archives in dir, in
// sha256sum's format, sorted by name.
func WriteChecksums(dir string) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.tar.gz"))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no archives (*.tar.gz) in %s", dir)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f, err := os.Open(n)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(n))
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// parseSums reads sha256sum output: name -> hex digest.
func parseSums(b []byte) (map[string]string, error) {
	sums := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("SHA256SUMS: bad line %q", line)
		}
		if _, err := hex.DecodeString(sum); err != nil {
			return nil, fmt.Errorf("SHA256SUMS: bad line %q", line)
		}
		sums[strings.TrimPrefix(name, "*")] = sum
	}
	return sums, sc.Err()
}

// FormulaArchive is one platform's archive in the formula.
type FormulaArchive struct {
	Name, URL, SHA256 string
}

// FormulaData is what the formula template is rendered with.
type FormulaData struct {
	// Version without a leading v; Tag as released.
	Version, Tag string
	// Repo is owner/name on GitHub.
	Repo string
	// Arm64 and Amd64 are the darwin archives.
	Arm64, Amd64 FormulaArchive
	// LimaVersion is the Lima release the guest agent was built from.
	LimaVersion string
}

// RenderFormula renders the Homebrew formula template for a release whose
// SHA256SUMS is sums; both darwin archives must be listed.
func RenderFormula(tmpl, repo, tag string, sums []byte) (string, error) {
	s, err := parseSums(sums)
	if err != nil {
		return "", err
	}
	d := FormulaData{Version: strings.TrimPrefix(tag, "v"), Tag: tag, Repo: repo, LimaVersion: lima.LimaVersion}
	for goarch, a := range map[string]*FormulaArchive{"arm64": &d.Arm64, "amd64": &d.Amd64} {
		a.Name = ArchiveName(tag, "darwin", goarch)
		a.SHA256 = s[a.Name]
		if a.SHA256 == "" {
			return "", fmt.Errorf("SHA256SUMS does not list %s", a.Name)
		}
		a.URL = "https://github.com/" + repo + "/releases/download/" + tag + "/" + a.Name
	}
	t, err := template.New("formula").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", err
	}
	return b.String(), nil
}
