package main

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/core/pluginstore"
)

func newPluginPackageCmd(a *app) *cobra.Command {
	var (
		out, version, output, signKey string
		platforms                     []string
	)
	cmd := &cobra.Command{
		Use:   "package [DIR]",
		Short: "Build a plugin's distributable: an archive per platform with its marina-plugin.json, and SHA256SUMS",
		Long: `Build the plugin whose main package is DIR (default .) for each platform (default
darwin/arm64, darwin/amd64, linux/amd64, linux/arm64; --platform to choose) as a static
binary (CGO_ENABLED=0, -trimpath), and write into --out (default ./dist) one archive per
platform, marina-plugin-NAME_VERSION_OS_ARCH.tar.gz, holding the binary and a
marina-plugin.json: name, version, protocol, the platform, the binary's sha256, hooks,
description and config schema. marina plugin install checks an archive against it (a binary
whose sha256 differs is refused). SHA256SUMS lists the archives' digests. The plugin is
built for this machine too and launched once to read its description. Needs the Go
toolchain. docs/plugins.md, "Packaging", describes the manifest.`,
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
			res, err := pluginstore.Package(cmd.Context(), pluginstore.PackageOptions{
				Dir: dir, Out: out, Platforms: ps, Version: version, Describe: a.describeBinary, SignKey: key,
				Log: func(format string, args ...any) { fmt.Fprintf(a.err, "plugin package: "+format+"\n", args...) },
			})
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
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
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
