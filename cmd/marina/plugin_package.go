package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/core/pluginstore"
)

func newPluginPackageCmd(a *app) *cobra.Command {
	var (
		out, version, output, signKey, progress string
		platforms                               []string
		jobs                                    int
	)
	cmd := &cobra.Command{
		Use:   "package [DIR]",
		Short: "Build a plugin's distributable: an archive per platform with its marina-plugin.json, and SHA256SUMS",
		Long: `Build the plugin whose main package is DIR (default .) for each platform (default
darwin/arm64, darwin/amd64, linux/amd64, linux/arm64; --platform to choose) as a static
binary (CGO_ENABLED=0, -trimpath, -ldflags "-s -w"), and write into --out (default ./dist)
one archive per platform, marina-plugin-NAME_VERSION_OS_ARCH.tar.gz, holding the binary and
a marina-plugin.json: name, version, protocol, the platform, the binary's sha256, hooks,
description and config schema. marina plugin install checks an archive against it (a binary
whose sha256 differs is refused). SHA256SUMS lists the archives' digests. The plugin is
built for this machine too (first) and launched once to read its description. Needs the
Go toolchain. docs/plugins.md, "Packaging", describes the manifest.

The platforms are built concurrently, --jobs at a time (default: half this machine's CPUs,
at least 1; never more than its CPUs, as go build already compiles each platform's packages
in parallel). Progress goes to stderr: on a terminal a line per finished platform under a
live line naming those building; otherwise (or with --progress plain) plain lines such as
"building linux/arm64 …" and "built linux/arm64 in 41s (24.8 MB)". The first platform that
fails to build cancels the others and is reported with the compiler's output. Nothing is
written to --out unless every platform built; then the archives, their signatures and
SHA256SUMS are written under temporary names and renamed into place together. The archives
are listed sorted by platform.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			var ps []pluginstore.Platform
			for _, s := range platforms {
				for _, one := range strings.Split(s, ",") {
					p, err := pluginstore.ParsePlatform(strings.TrimSpace(one))
					if err != nil {
						return exitcode.NewUsage(fmt.Errorf("--platform: %w", err))
					}
					ps = append(ps, p)
				}
			}
			if jobs < 1 {
				return exitcode.NewUsage(fmt.Errorf("--jobs %d: give at least 1 (the default, %d, is half this machine's CPUs)", jobs, pluginstore.DefaultPackageJobs()))
			}
			if progress != "auto" && progress != "plain" {
				return exitcode.NewUsage(fmt.Errorf("--progress %q: use auto (live on a terminal, plain lines otherwise) or plain", progress))
			}
			var key ed25519.PrivateKey
			if signKey != "" {
				data, err := os.ReadFile(signKey)
				if err != nil {
					return exitcode.NewUsage(fmt.Errorf("--sign: %w", err))
				}
				if key, err = pluginsign.ParsePrivateKey(string(data)); err != nil {
					return exitcode.NewUsage(fmt.Errorf("--sign %s: %w", signKey, err))
				}
			}
			shown := newPackageProgress(a.err, progress == "auto" && lifecycle.IsTerminal(a.err))
			res, err := pluginstore.Package(cmd.Context(), pluginstore.PackageOptions{
				Dir: dir, Out: out, Platforms: ps, Version: version, Describe: a.describeBinary, SignKey: key,
				Jobs: jobs, Progress: shown.handle,
			})
			shown.close()
			if err != nil {
				return usageIfInvalid(err)
			}
			if output != "text" {
				return PrintStructured(a.out, output, res)
			}
			fmt.Fprintf(a.out, "packaged %s %s (protocol %s, hooks %s):\n", res.Name, res.Version, res.Protocol, strings.Join(res.Hooks, ","))
			for _, art := range res.Artifacts {
				signed := ""
				if art.Signature != "" {
					signed = ", signed: " + art.Signature
				}
				fmt.Fprintf(a.out, "  %-13s %s (%.1f MB%s)\n", art.Platform, art.Path, float64(art.Size)/1e6, signed)
			}
			fmt.Fprintf(a.out, "  checksums     %s\n", res.Sums)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "dist", "directory for the archives and SHA256SUMS")
	cmd.Flags().StringArrayVar(&platforms, "platform", nil, "os/arch to build for, repeatable or comma-separated (default darwin/arm64, darwin/amd64, linux/amd64, linux/arm64)")
	cmd.Flags().StringVar(&version, "version", "", "stamp this version (-X main.version=VERSION, the scaffold's variable); the plugin must report it")
	cmd.Flags().StringVar(&signKey, "sign", "", "sign each archive with this private key (marina plugin keygen): ARCHIVE.sig beside it")
	cmd.Flags().IntVar(&jobs, "jobs", pluginstore.DefaultPackageJobs(), "platforms built at once: by default half this machine's CPUs, at least 1; more than its CPUs is cut to that")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress output on stderr: auto (live on a terminal, plain lines otherwise) or plain")
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// packageProgress shows the builds of pluginstore.Package. On a terminal
// it is marina's step style (core/lifecycle's TTY renderer), for builds
// that run side by side: a line per finished platform,
//
//	✓ Build linux/amd64 (12.3s, 24.8 MB)
//	✗ Build linux/arm64 (3.1s)
//	✗ Build darwin/arm64 (cancelled after 3.2s)
//	- Build darwin/amd64 (not run)
//
// under one live line redrawn in place, "⠋ Building darwin/arm64, linux/arm64
// (1/4 done, 1m3s)". Otherwise a plain line per event, "plugin package:
// building linux/arm64 …". Colours are off when NO_COLOR is set.
type packageProgress struct {
	w          io.Writer
	tty, color bool
	tick       time.Duration

	mu      sync.Mutex
	began   time.Time
	running []pluginstore.PackageEvent // builds under way, in start order
	ended   int
	frame   int
	live    bool // the live line is on screen
	closed  bool
	stop    chan struct{}
	done    chan struct{} // closed when the spinner goroutine returned
}

func newPackageProgress(w io.Writer, tty bool) *packageProgress {
	return &packageProgress{w: w, tty: tty, color: os.Getenv("NO_COLOR") == "", tick: 100 * time.Millisecond}
}

// handle shows one event; Package calls it from several goroutines.
func (p *packageProgress) handle(ev pluginstore.PackageEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.tty {
		_, _ = fmt.Fprintf(p.w, "plugin package: %s\n", ev) // progress output is best effort
		return
	}
	if p.closed {
		return
	}
	if p.began.IsZero() {
		p.began = time.Now()
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.spin()
	}
	if ev.Phase == pluginstore.PackageBuilding {
		p.running = append(p.running, ev)
		p.draw()
		return
	}
	p.running = slices.DeleteFunc(p.running, func(r pluginstore.PackageEvent) bool { return r.Platform == ev.Platform })
	p.ended++
	var line string
	switch ev.Phase {
	case pluginstore.PackageBuilt:
		line = fmt.Sprintf("%s Build %s (%s, %.1f MB)", p.paint(ansiGreen, "✓"), ev.Name(), pluginstore.FormatElapsed(ev.Elapsed), float64(ev.Size)/1e6)
	case pluginstore.PackageFailed:
		line = fmt.Sprintf("%s Build %s (%s)", p.paint(ansiRed, "✗"), ev.Name(), pluginstore.FormatElapsed(ev.Elapsed))
	case pluginstore.PackageCancelled:
		line = fmt.Sprintf("%s Build %s (cancelled after %s)", p.paint(ansiRed, "✗"), ev.Name(), pluginstore.FormatElapsed(ev.Elapsed))
	default:
		line = p.paint(ansiDim, "- Build "+ev.Name()+" (not run)")
	}
	p.write(ansiEraseLine + line + "\n")
	p.live = false
	p.draw()
}

// draw rewrites the live line, or clears it when nothing is building.
// Callers hold p.mu.
func (p *packageProgress) draw() {
	if len(p.running) == 0 {
		if p.live {
			p.write(ansiEraseLine)
			p.live = false
		}
		return
	}
	names := make([]string, len(p.running))
	for i, r := range p.running {
		names[i] = r.Platform.String()
	}
	text := fmt.Sprintf("Building %s (%d/%d done", strings.Join(names, ", "), p.ended, p.running[0].Total)
	if el := time.Since(p.began).Truncate(time.Second); el > 0 {
		text += ", " + el.String()
	}
	text += ")"
	// One terminal row, or \r would only rewind the last one.
	if width := terminalWidth(p.w); width > 8 && utf8.RuneCountInString(text)+2 >= width {
		text = string([]rune(text)[:width-4]) + "…"
	}
	p.write(ansiEraseLine + p.paint(ansiCyan, spinnerFrames[p.frame%len(spinnerFrames)]) + " " + text)
	p.live = true
}

func (p *packageProgress) spin() {
	defer close(p.done)
	t := time.NewTicker(p.tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			p.frame++
			p.draw()
			p.mu.Unlock()
		}
	}
}

// close stops the spinner and clears the live line, before the result is
// printed. It may be called more than once.
func (p *packageProgress) close() {
	p.mu.Lock()
	if p.closed || !p.tty {
		p.closed = true
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.running = nil
	p.draw()
	stop, done := p.stop, p.done
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

func (p *packageProgress) paint(code, s string) string {
	if !p.color {
		return s
	}
	return code + s + ansiReset
}

func (p *packageProgress) write(s string) {
	_, _ = io.WriteString(p.w, s) // progress output is best effort
}

// The TTY renderer's symbols and ANSI sequences (core/lifecycle).
const (
	ansiEraseLine = "\r\x1b[2K"
	ansiGreen     = "\x1b[32m"
	ansiRed       = "\x1b[31m"
	ansiCyan      = "\x1b[36m"
	ansiDim       = "\x1b[2m"
	ansiReset     = "\x1b[0m"
)

var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// terminalWidth is w's width in columns, 0 when w is no terminal.
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return width
}

// usageIfInvalid makes a pluginstore.ErrInvalid (the user's input is wrong:
// an archive, a reference, a flag) a usage error (exit 2); any other error
// stays as it is.
func usageIfInvalid(err error) error {
	if errors.Is(err, pluginstore.ErrInvalid) {
		return exitcode.NewUsage(err)
	}
	return err
}

func newPluginPublishCmd(a *app) *cobra.Command {
	var (
		dir, output string
		force       bool
	)
	cmd := &cobra.Command{
		Use:   "publish oci://HOST[:PORT]/REPOSITORY",
		Short: "Push a packaged plugin version to an OCI registry, tagged with its version",
		Long: `Push the archives marina plugin package wrote (--dir, default ./dist; one version) to an OCI
registry: per platform a manifest with artifactType application/vnd.marina.plugin.v1, the
annotation dev.marina.plugin.protocol and the archive as its one layer
(application/vnd.marina.plugin.layer.v1.tar+gzip), and an image index of them tagged with the
version. marina plugin install oci://HOST/REPOSITORY[:VERSION] (or --version CONSTRAINT)
installs it. A version already published is refused unless --force. Loopback registries
are spoken to over plain HTTP; credentials come from Docker's config (docker login).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := a.openStore()
			if err != nil {
				return err
			}
			res, err := store.Publish(cmd.Context(), pluginstore.PublishOptions{Ref: args[0], Dir: dir, Force: force})
			if err != nil {
				return usageIfInvalid(err)
			}
			if output != "text" {
				return PrintStructured(a.out, output, res)
			}
			signature := "signed: the signature of every platform's archive is on its manifest"
			if !res.Signed {
				signature = "not signed (marina plugin package --sign KEY signs the archives): under pluginTrust.policy enforce, install refuses it"
			}
			fmt.Fprintf(a.out, "published %s %s to %s:%s (%s; %s)\n  %s\n", res.Name, res.Version, res.Ref, res.Tag, strings.Join(res.Platforms, ", "), res.Digest, signature)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "dist", "directory with the archives of one version (marina plugin package --out)")
	cmd.Flags().BoolVar(&force, "force", false, "replace the version's tag if it exists")
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newPluginKeygenCmd(a *app) *cobra.Command {
	var out, name string
	cmd := &cobra.Command{
		Use:   "keygen",
		Short: "Make an ed25519 key pair to sign plugins with (marina plugin package --sign)",
		Long: `Write a new ed25519 private key to --out (mode 0600; never overwritten) and its public key
to --out.pub, and print the pluginTrust entry that makes marina trust what it signs. Keep
the private key out of version control; hand out the public key (it is safe to publish).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			pub, priv, err := pluginsign.GenerateKey()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				if errors.Is(err, os.ErrExist) {
					return exitcode.NewUsage(fmt.Errorf("%s exists; a key is never overwritten: choose another --out, or remove it if you mean to replace it", out))
				}
				return err
			}
			if _, err := f.WriteString(priv + "\n"); err != nil {
				f.Close()
				os.Remove(out)
				return err
			}
			if err := f.Close(); err != nil {
				os.Remove(out)
				return err
			}
			if err := os.WriteFile(out+".pub", []byte(pub+"\n"), 0o644); err != nil {
				os.Remove(out)
				return err
			}
			fmt.Fprintf(a.out, "private key: %s (sign with: marina plugin package --sign %s)\npublic key:  %s.pub\n\n", out, out, out)
			fmt.Fprintf(a.out, "to trust it, add to ~/.marina/config.yaml:\npluginTrust:\n  keys:\n  - name: %s\n    publicKey: %s\n    sources: []   # or the sources it signs for, e.g. [oci://registry.example.com/team/]\n", name, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "marina-plugin.key", "where to write the private key (the public key goes to OUT.pub)")
	cmd.Flags().StringVar(&name, "name", "my-team", "the key's name in the printed pluginTrust entry")
	return cmd
}
