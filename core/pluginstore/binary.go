package pluginstore

import (
	"bytes"
	"debug/elf"
	"debug/macho"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"unicode/utf8"
)

// Platform is an OS and CPU architecture pair in Go's terms.
type Platform struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// HostPlatform is the platform marina runs on.
func HostPlatform() Platform { return Platform{OS: runtime.GOOS, Arch: runtime.GOARCH} }

// String returns "os/arch", the form users type and messages show.
func (p Platform) String() string { return p.OS + "/" + p.Arch }

// dir returns "os_arch", the store directory name.
func (p Platform) dir() string { return p.OS + "_" + p.Arch }

// ParsePlatform parses "os/arch" or "os_arch" (e.g. "darwin/arm64").
func ParsePlatform(s string) (Platform, error) {
	sep := strings.IndexAny(s, "/_")
	if sep <= 0 || sep == len(s)-1 || strings.ContainsAny(s[sep+1:], "/_") {
		return Platform{}, newError(ErrInvalid, fmt.Sprintf("platform %q is not OS/ARCH, e.g. %s", s, HostPlatform()))
	}
	p := Platform{OS: s[:sep], Arch: s[sep+1:]}
	for _, part := range []string{p.OS, p.Arch} {
		for _, r := range part {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
				return Platform{}, newError(ErrInvalid, fmt.Sprintf("platform %q is not OS/ARCH, e.g. %s", s, HostPlatform()))
			}
		}
	}
	return p, nil
}

// runnablePlatforms are the installed platforms this machine can run, best
// first: its own, then darwin/amd64 on Apple silicon (Rosetta).
func runnablePlatforms() []Platform {
	h := HostPlatform()
	if h.OS == "darwin" && h.Arch == "arm64" {
		return []Platform{h, {OS: "darwin", Arch: "amd64"}}
	}
	return []Platform{h}
}

// artifactKind is what the first bytes of a file say it is.
type artifactKind int

const (
	kindUnknown artifactKind = iota
	kindELF
	kindMachO
	kindScript
	kindGzip
)

// sniffLen is how many leading bytes sniff looks at.
const sniffLen = 512

// sniff classifies an artifact by its leading bytes. For anything that is
// not a plugin binary or a gzip archive, what describes it for an error
// message ("an HTML page", "a JSON document: {...}", "a zip archive").
func sniff(head []byte) (kind artifactKind, what string) {
	switch {
	case bytes.HasPrefix(head, []byte("\x7fELF")):
		return kindELF, "an ELF binary"
	case isMachO(head):
		return kindMachO, "a Mach-O binary"
	case bytes.HasPrefix(head, []byte("#!")):
		return kindScript, "a script"
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return kindGzip, "a gzip archive"
	case bytes.HasPrefix(head, []byte("PK\x03\x04")):
		return kindUnknown, "a zip archive (marina installs plain binaries and .tar.gz archives)"
	case bytes.HasPrefix(head, []byte("MZ")):
		return kindUnknown, "a Windows executable (marina plugins run on macOS and Linux)"
	case len(head) == 0:
		return kindUnknown, "an empty file"
	}
	text := strings.TrimLeft(strings.TrimPrefix(string(head), "\ufeff"), " \t\r\n")
	lower := strings.ToLower(text)
	switch {
	case strings.HasPrefix(lower, "<!doctype html"), strings.HasPrefix(lower, "<html"),
		strings.HasPrefix(lower, "<head"), strings.HasPrefix(lower, "<body"),
		strings.HasPrefix(http.DetectContentType(head), "text/html"):
		return kindUnknown, "an HTML page"
	case strings.HasPrefix(text, "{"), strings.HasPrefix(text, "["):
		return kindUnknown, "a JSON document: " + snippet(head)
	case strings.HasPrefix(lower, "<?xml"):
		return kindUnknown, "an XML document: " + snippet(head)
	case utf8.Valid(head) && !bytes.ContainsRune(head, 0):
		return kindUnknown, "text: " + snippet(head)
	}
	return kindUnknown, fmt.Sprintf("data of an unknown format (it starts with % x)", head[:min(8, len(head))])
}

// snippet returns the start of b on one line, for error messages.
func snippet(b []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "?")), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func isMachO(head []byte) bool {
	if len(head) < 4 {
		return false
	}
	m := binary.BigEndian.Uint32(head)
	switch m {
	case macho.Magic32, macho.Magic64, macho.MagicFat:
		return true
	}
	m = binary.LittleEndian.Uint32(head)
	return m == macho.Magic32 || m == macho.Magic64
}

// checkPlatform reads the headers of the binary at path and refuses it
// unless it runs on target. Scripts (#!) are accepted on any platform. label
// names the binary in messages (its source, not a staging path).
func checkPlatform(path, label string, kind artifactKind, target Platform) error {
	var built []Platform
	switch kind {
	case kindScript:
		return nil
	case kindELF:
		f, err := elf.Open(path)
		if err != nil {
			return wrapError(ErrNotPlugin, fmt.Sprintf("%s starts like an ELF binary but its headers are unreadable: %v; the download may be truncated", label, err), err)
		}
		defer f.Close()
		built = []Platform{{OS: elfOS(f), Arch: elfArch(f)}}
	case kindMachO:
		if ff, err := macho.OpenFat(path); err == nil {
			defer ff.Close()
			for _, a := range ff.Arches {
				built = append(built, Platform{OS: "darwin", Arch: machoArch(a.Cpu)})
			}
		} else if errors.Is(err, macho.ErrNotFat) {
			f, err := macho.Open(path)
			if err != nil {
				return wrapError(ErrNotPlugin, fmt.Sprintf("%s starts like a Mach-O binary but its headers are unreadable: %v; the download may be truncated", label, err), err)
			}
			defer f.Close()
			built = []Platform{{OS: "darwin", Arch: machoArch(f.Cpu)}}
		} else {
			return wrapError(ErrNotPlugin, fmt.Sprintf("%s starts like a Mach-O binary but its headers are unreadable: %v", label, err), err)
		}
	default:
		return newError(ErrNotPlugin, fmt.Sprintf("%s is not an executable", label))
	}
	for _, b := range built {
		if b == target {
			return nil
		}
	}
	names := make([]string, len(built))
	for i, b := range built {
		names[i] = b.String()
	}
	machine := "this machine is " + target.String()
	if target != HostPlatform() {
		machine = "the install targets " + target.String()
	}
	return newError(ErrPlatform, fmt.Sprintf("%s is built for %s, %s: install the %s build of the plugin", label, strings.Join(names, ", "), machine, target))
}

func elfOS(f *elf.File) string {
	switch f.OSABI {
	case elf.ELFOSABI_FREEBSD:
		return "freebsd"
	case elf.ELFOSABI_NETBSD:
		return "netbsd"
	case elf.ELFOSABI_OPENBSD:
		return "openbsd"
	case elf.ELFOSABI_SOLARIS:
		return "solaris"
	}
	// Go (and most toolchains) leave OSABI as SYSV for Linux binaries.
	return "linux"
}

func elfArch(f *elf.File) string {
	little := f.ByteOrder == binary.LittleEndian
	is64 := f.Class == elf.ELFCLASS64
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_386:
		return "386"
	case elf.EM_AARCH64:
		return "arm64"
	case elf.EM_ARM:
		return "arm"
	case elf.EM_RISCV:
		if is64 {
			return "riscv64"
		}
		return "riscv"
	case elf.EM_PPC64:
		if little {
			return "ppc64le"
		}
		return "ppc64"
	case elf.EM_S390:
		return "s390x"
	case elf.EM_LOONGARCH:
		return "loong64"
	case elf.EM_MIPS:
		switch {
		case is64 && little:
			return "mips64le"
		case is64:
			return "mips64"
		case little:
			return "mipsle"
		}
		return "mips"
	}
	return strings.ToLower(strings.TrimPrefix(f.Machine.String(), "EM_"))
}

func machoArch(c macho.Cpu) string {
	switch c {
	case macho.CpuAmd64:
		return "amd64"
	case macho.CpuArm64:
		return "arm64"
	case macho.Cpu386:
		return "386"
	case macho.CpuArm:
		return "arm"
	case macho.CpuPpc64:
		return "ppc64"
	}
	return strings.ToLower(strings.TrimPrefix(c.String(), "Cpu"))
}
