// Package buildinfo holds the version of the marina binary, stamped at link
// time by the Makefile (-ldflags -X) and completed from the Go build info.
package buildinfo

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
)

// Set by the Makefile: -X github.com/bcollard/marina/core/buildinfo.Version=... etc.
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
	// Checkout is the source directory of a `make build`/`make install`
	// (not of a release): see SourceDir.
	Checkout = ""
)

// Info describes this build.
type Info struct {
	Version   string `json:"version" yaml:"version"`
	Commit    string `json:"commit" yaml:"commit"`
	BuildDate string `json:"buildDate" yaml:"buildDate"`
	GoVersion string `json:"goVersion" yaml:"goVersion"`
	OS        string `json:"os" yaml:"os"`
	Arch      string `json:"arch" yaml:"arch"`
}

// Get returns the build information; fields not stamped by the linker are
// taken from the module build info when Go recorded them, else "unknown".
func Get() Info {
	i := Info{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if i.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version // installed with `go install module@version`
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if i.Commit == "" {
					i.Commit = s.Value
				}
			case "vcs.time":
				if i.BuildDate == "" {
					i.BuildDate = s.Value
				}
			}
		}
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	if i.BuildDate == "" {
		i.BuildDate = "unknown"
	}
	return i
}

// SourceDir returns the marina checkout this binary was built from, when
// the build recorded it (make build and make install stamp Checkout; a
// plain `go build` or `go run` records absolute source paths) and that
// checkout, with the SDK module in sdk/, is still there; "" otherwise (a
// release, built with -trimpath). `marina plugin new` points
// a new plugin's go.mod at that checkout's SDK.
func SourceDir() string {
	dir := Checkout
	if dir == "" {
		_, file, _, ok := runtime.Caller(0)
		if !ok || !filepath.IsAbs(file) {
			return "" // -trimpath without Checkout: a release build
		}
		dir = filepath.Dir(filepath.Dir(filepath.Dir(file))) // core/buildinfo/buildinfo.go
	}
	if _, err := os.Stat(filepath.Join(dir, "sdk", "go.mod")); err != nil {
		return ""
	}
	return dir
}
