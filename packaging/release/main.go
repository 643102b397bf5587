// Command release assembles marina's release archives, laid out like Lima's
// own (bin/marina and bin/marina-lima beside
// share/lima/lima-guestagent.Linux-<arch>.gz), their SHA256SUMS and the
// Homebrew formula. The Makefile's release-* targets run it; it never builds
// or signs the binaries itself (the Makefile does, signing marina-lima with
// codesign on macOS).
//
//	go run ./packaging/release archive -version V -goos darwin -goarch arm64 -marina dist/build/darwin-arm64/marina -marina-lima dist/build/darwin-arm64/marina-lima -out dist
//	go run ./packaging/release check dist/marina-V-Darwin-arm64.tar.gz
//	go run ./packaging/release checksums -dir dist
//	go run ./packaging/release formula -version V -sums dist/SHA256SUMS -template packaging/homebrew/marina.rb.tmpl -out dist/marina.rb
//	go run ./packaging/release entitlements BINARY...   (macOS: marina's preflight check of marina-lima with the real codesign)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/bcollard/marina/core/vm/lima"
	"github.com/bcollard/marina/core/vm/limavm"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: release %s [flags]", strings.Join(commands, "|"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch args[0] {
	case "archive":
		return archiveCmd(ctx, args[1:])
	case "check":
		for _, a := range args[1:] {
			if err := CheckArchive(a); err != nil {
				return err
			}
			fmt.Println("ok", a)
		}
		return nil
	case "checksums":
		fs := flag.NewFlagSet("checksums", flag.ContinueOnError)
		dir := fs.String("dir", "dist", "directory holding the archives; SHA256SUMS is written there")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return WriteChecksums(*dir)
	case "formula":
		return formulaCmd(args[1:])
	case "entitlements":
		// macOS only: marina's own preflight check, on real codesign output.
		home, err := os.MkdirTemp("", "marina-entitlements-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(home)
		for _, exe := range args[1:] {
			if err := lima.CheckSignature(ctx, exe, home); err != nil {
				return err
			}
			fmt.Println("signed with", lima.EntitlementVirtualization+":", exe)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q (%s)", args[0], strings.Join(commands, ", "))
}

// commands are the release tool's commands.
var commands = []string{"archive", "check", "checksums", "formula", "entitlements"}

func archiveCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("archive", flag.ContinueOnError)
	var (
		version    = fs.String("version", "", "marina's version (a leading v is dropped from the file name)")
		goos       = fs.String("goos", "", "the platform marina was built for: darwin or linux")
		goarch     = fs.String("goarch", "", "arm64 or amd64")
		marina     = fs.String("marina", "", "the marina binary (built by the Makefile)")
		engine     = fs.String("marina-lima", "", "marina's Lima engine, "+limavm.EngineName+" (built, and on darwin signed, by the Makefile)")
		guestAgent = fs.String("guestagent", "", "Lima's guest agent for -goarch (plain or .gz); empty: build it from the pinned Lima module")
		goBin      = fs.String("go", "go", "the go command that builds the guest agent")
		out        = fs.String("out", "dist", "output directory")
		docs       = fs.String("docs", ".", "directory holding README.md (and LICENSE, when there is one)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" || *goos == "" || *goarch == "" || *marina == "" || *engine == "" {
		return fmt.Errorf("archive needs -version, -goos, -goarch, -marina and -marina-lima")
	}
	agent := *guestAgent
	if agent == "" {
		g, err := exec.LookPath(*goBin)
		if err != nil {
			return fmt.Errorf("the go command to build the guest agent: %w", err)
		}
		agent = filepath.Join(*out, "build", "lima-guestagent.Linux-"+UnameM("linux", *goarch))
		start := time.Now()
		fmt.Fprintf(os.Stderr, "building Lima's guest agent for linux/%s from %s@%s\n", *goarch, lima.LimaModule, lima.LimaVersion)
		if err := lima.BuildGuestAgent(ctx, g, *goarch, agent, func(s string) { fmt.Fprintln(os.Stderr, "  "+s) }); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "built %s in %s\n", agent, time.Since(start).Round(time.Second))
	}
	limaDir, err := limaModuleDir(ctx, *goBin)
	if err != nil {
		return err
	}
	spec := Spec{
		Version:     *version,
		GOOS:        *goos,
		GOARCH:      *goarch,
		Marina:      *marina,
		MarinaLima:  *engine,
		GuestAgents: map[string]string{*goarch: agent},
		Docs:        docFiles(*docs),
		LimaDocs:    limaDocFiles(limaDir),
		ModTime:     sourceDate(),
	}
	path, err := WriteArchive(*out, spec)
	if err != nil {
		return err
	}
	if err := CheckArchive(path); err != nil {
		return fmt.Errorf("the archive just written fails its check: %w", err)
	}
	fmt.Println(path)
	return nil
}

// limaModuleDir is the pinned Lima module's directory (its LICENSE and
// NOTICE cover the guest agent the archive ships).
func limaModuleDir(ctx context.Context, goBin string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Dir}}", lima.LimaModule)
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", lima.LimaModule, err)
	}
	dir := strings.TrimSpace(string(b))
	if dir == "" {
		return "", fmt.Errorf("go list -m %s: the module is not downloaded (go mod download %s)", lima.LimaModule, lima.LimaModule)
	}
	return dir, nil
}

// docFiles are marina's documents that exist in dir.
func docFiles(dir string) []string {
	var files []string
	for _, n := range []string{"README.md", "LICENSE", "NOTICE"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files
}

// limaDocFiles are Lima's license files, shipped with its guest agent.
func limaDocFiles(dir string) []string {
	var files []string
	for _, n := range []string{"LICENSE", "NOTICE"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
			files = append(files, filepath.Join(dir, n))
		}
	}
	return files
}

// sourceDate is the archive entries' time: SOURCE_DATE_EPOCH when set
// (reproducible builds), else now.
func sourceDate() time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		var sec int64
		if _, err := fmt.Sscan(s, &sec); err == nil {
			return time.Unix(sec, 0).UTC()
		}
	}
	return time.Now().UTC().Truncate(time.Second)
}

func formulaCmd(args []string) error {
	fs := flag.NewFlagSet("formula", flag.ContinueOnError)
	var (
		version = fs.String("version", "", "the release's version (tag)")
		sums    = fs.String("sums", "dist/SHA256SUMS", "the release's SHA256SUMS")
		tmpl    = fs.String("template", "packaging/homebrew/marina.rb.tmpl", "the formula template")
		repo    = fs.String("repo", "bcollard/marina", "the GitHub repository the release is published in")
		out     = fs.String("out", "", "output file (default: stdout)")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return fmt.Errorf("formula needs -version")
	}
	t, err := os.ReadFile(*tmpl)
	if err != nil {
		return err
	}
	s, err := os.ReadFile(*sums)
	if err != nil {
		return err
	}
	f, err := RenderFormula(string(t), *repo, *version, s)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = os.Stdout.WriteString(f)
		return err
	}
	return os.WriteFile(*out, []byte(f), 0o644)
}
