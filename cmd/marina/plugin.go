package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/buildinfo"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/core/scaffold"
	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/sdk"
)

// openStore opens the plugin store with a describer that launches the
// binary once through the real runtime, and the config's signature policy.
// Commands that have loaded the config already use openStoreFor.
func (a *app) openStore() (*pluginstore.Store, error) {
	// A config with problems elsewhere still gives its pluginTrust (those
	// problems are the command's to report); a config that cannot be read
	// at all leaves no policy to apply: the command fails rather than
	// silently accept what enforce would refuse.
	l, err := config.Load(config.LoadOptions{Path: a.global.ConfigPath, Sets: a.global.Sets})
	if l == nil {
		return nil, err
	}
	return a.openStoreFor(l)
}

// openStoreFor opens the plugin store with the signature policy (pluginTrust)
// of l, the config the command loaded.
func (a *app) openStoreFor(l *config.Loaded) (*pluginstore.Store, error) {
	root, err := pluginstore.DefaultRoot()
	if err != nil {
		return nil, err
	}
	lockPath, err := pluginstore.DefaultLockPath()
	if err != nil {
		return nil, err
	}
	store := pluginstore.Open(root, lockPath, a.describeBinary)
	store.BuiltinNames = builtinNames()
	store.Trust = trustOf(l.Config.PluginTrust)
	return store, nil
}

// trustOf turns the config's pluginTrust into the store's policy. A policy
// that is not warn (enforce, or a value config validate reports) enforces:
// a typo never turns checking off.
func trustOf(t config.PluginTrust) pluginstore.Trust {
	tr := pluginstore.Trust{Enforce: t.Policy != config.TrustWarn}
	for _, k := range t.Keys {
		tr.Keys = append(tr.Keys, pluginsign.TrustedKey{Name: k.Name, PublicKey: k.PublicKey, Sources: k.Sources})
	}
	for i, c := range t.Capabilities {
		tr.Capabilities = append(tr.Capabilities, pluginstore.CapabilityLimit{Rule: fmt.Sprintf("pluginTrust.capabilities[%d]", i), Sources: c.Sources, Allow: c.Allow})
	}
	return tr
}

// builtinNames are the names no installed plugin may take: the built-ins of
// this binary and those the config knows as built-in.
func builtinNames() []string {
	seen := map[string]bool{}
	for name := range builtins() {
		seen[name] = true
	}
	for _, name := range config.BuiltinPlugins {
		seen[name] = true
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// compiledIn are the names of the plugins built into this binary, sorted.
func compiledIn() []string {
	return slices.Sorted(maps.Keys(builtins()))
}

// pluginOptions are the runtime options for plugins started by this process:
// plugin records go to marina's logger at the chosen level, and every raw
// line to the run's log file under ~/.marina/logs.
func (a *app) pluginOptions() plugin.Options {
	return plugin.Options{Logger: a.log, LogFile: a.runLog.writer(a.err), HostVersion: buildinfo.Get().Version}
}

// describeBinary starts a plugin binary, asks it to describe itself and stops it.
func (a *app) describeBinary(ctx context.Context, path string) (*sdk.Description, error) {
	inst, err := plugin.Start(ctx, plugin.Spec{Path: path}, a.pluginOptions())
	if err != nil {
		return nil, err
	}
	defer inst.Close()
	return inst.Describe(ctx)
}

func newPluginCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "plugin",
		Short:   "List, install, select and write plugins",
		GroupID: GroupPlugins,
		Long: `Plugins are separate programs marina runs over gRPC at lifecycle hooks (PostUp,
PreCluster, PostCluster, PreClusterDelete, PreDown, PreDestroy). Installed plugins live in
~/.marina/plugins/<name>/<version>/, several versions side by side; the config selects one
with plugins.<name>.version (a semver constraint) and ~/.marina/plugins.lock records the
choice and the binary's sha256, checked before every launch. See docs/plugins.md.`,
	}
	cmd.AddCommand(newPluginListCmd(a), newPluginInfoCmd(a), newPluginInstallCmd(a), newPluginRemoveCmd(a),
		newPluginToggleCmd(a, true), newPluginToggleCmd(a, false), newPluginVerifyCmd(a), newPluginNewCmd(a), newPluginPackageCmd(a), newPluginPublishCmd(a),
		newPluginVersionsCmd(a), newPluginOutdatedCmd(a), newPluginUpgradeCmd(a), newPluginKeygenCmd(a), newPluginSearchCmd(a))
	return cmd
}

func newPluginInfoCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "info NAME[@VERSION]",
		Short: "Show a plugin's description, hooks, timeouts and config schema with defaults (the version the config selects)",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = func(_ *cobra.Command, args []string) (err error) {
		// The config, read once, selects the version and the timeouts; info
		// still answers when it does not load.
		var plugins map[string]config.PluginConfig
		if l, lerr := a.loadConfig(); lerr == nil {
			plugins = l.Config.Plugins
		}
		d, src, selected, unusable, err := a.findDescription(args[0], plugins)
		if err != nil {
			return err
		}
		// A binary that fails its check is still described (from its
		// manifest), and the command fails with why it will not run.
		defer func() {
			if err == nil {
				err = unusable
			}
		}()
		// The configured per-plugin timeout replaces the plugin's own
		// default for every hook.
		configured := plugins[d.Name].Timeout
		view, err := newPluginInfoView(d, src, selected, configured)
		if err != nil {
			return err
		}
		if output != "text" {
			return PrintStructured(a.out, output, view)
		}
		// Everything below comes from the plugin binary: shown cleaned of
		// terminal control sequences (package termsafe).
		fmt.Fprintf(a.out, "%s %s (protocol %s, %s)\n", termsafe.Line(d.Name), termsafe.Line(d.Version), termsafe.Line(d.Protocol), termsafe.Line(src))
		if view.Selection != "" {
			fmt.Fprintf(a.out, "  %s\n", view.Selection)
		}
		if d.Description != "" {
			fmt.Fprintf(a.out, "  %s\n", termsafe.Line(d.Description))
		}
		if d.Maintainer != "" {
			fmt.Fprintf(a.out, "  maintainer: %s\n", termsafe.Line(d.Maintainer))
		}
		fmt.Fprintln(a.out, "hooks:")
		for _, h := range view.Hooks {
			fmt.Fprintf(a.out, "  %-17s timeout %s (%s)\n", h.Name, h.Timeout, h.TimeoutFrom)
		}
		if len(d.Dependencies) > 0 {
			fmt.Fprintln(a.out, "depends on:")
			for _, dep := range d.Dependencies {
				opt := ""
				if dep.Optional {
					opt = " (optional)"
				}
				fmt.Fprintf(a.out, "  %s %s%s\n", termsafe.Line(dep.Name), termsafe.Line(dep.Version), opt)
			}
		}
		if len(d.Capabilities) > 0 {
			fmt.Fprintln(a.out, "capabilities:")
			printCapabilities(a.out, d.Capabilities)
		}
		if len(d.Outputs) > 0 {
			fmt.Fprintf(a.out, "outputs: %s\n", termsafe.Line(strings.Join(d.Outputs, ", ")))
		}
		fields, err := pluginset.ConfigFields(d.ConfigSchema)
		switch {
		case err != nil:
			// A schema that does not parse (checked at install; a built-in's
			// is compiled in): show it as it came.
			fmt.Fprintf(a.out, "config schema (%v):\n%s\n", err, indent(termsafe.Text(string(d.ConfigSchema)), "  "))
		case len(fields) > 0:
			fmt.Fprintf(a.out, "config (plugins.%s.config; the JSON Schema with -o json):\n", termsafe.Line(d.Name))
			printConfigFields(a.out, fields)
		default:
			fmt.Fprintln(a.out, "config: none")
		}
		return nil
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// findDescription finds a built-in or installed plugin by NAME[@VERSION];
// unusable is why an installed binary would not be launched (modified,
// replaced, missing: pluginstore's Verify), nil when it would.
// Without a version, an installed plugin is the version the config selects
// (its plugins.NAME.version constraint, as `plugin list` shows), or the
// highest installed when the config (plugins: nil when it did not load)
// does not name it; selected says which.
func (a *app) findDescription(ref string, plugins map[string]config.PluginConfig) (d *sdk.Description, src, selected string, unusable, err error) {
	name, version, _ := strings.Cut(ref, "@")
	if newPlugin, ok := builtins()[name]; ok && version == "" {
		d, err := sdk.Describe(newPlugin())
		return d, "built-in", "", nil, err
	}
	store, err := a.openStore()
	if err != nil {
		return nil, "", "", nil, err
	}
	var inst *pluginstore.Installed
	switch pc, configured := plugins[name]; {
	case version != "":
		inst, err = store.Get(name, version)
		selected = "as asked (" + ref + ")"
	case configured:
		inst, err = store.Resolve(name, pc.Version)
		constraint := pc.Version
		if constraint == "" {
			constraint = "any version"
		}
		selected = fmt.Sprintf("selected by the config (plugins.%s.version: %s)", name, constraint)
	default:
		inst, err = store.Resolve(name, "")
		selected = "the highest installed (the config does not name it)"
	}
	if err != nil {
		return nil, "", "", nil, exitcode.NewUsage(err)
	}
	return inst.Description, inst.Source, selected, store.Verify(inst), nil
}

// pluginInfoView is `plugin info -o json|yaml`: lowerCamel keys, the
// schema and defaults as objects, durations as Go duration strings.
type pluginInfoView struct {
	Name           string           `json:"name" yaml:"name"`
	Version        string           `json:"version" yaml:"version"`
	Protocol       string           `json:"protocol" yaml:"protocol"`
	Source         string           `json:"source" yaml:"source"`
	Selection      string           `json:"selection,omitempty" yaml:"selection,omitempty"`
	Description    string           `json:"description,omitempty" yaml:"description,omitempty"`
	Maintainer     string           `json:"maintainer,omitempty" yaml:"maintainer,omitempty"`
	Hooks          []pluginInfoHook `json:"hooks" yaml:"hooks"`
	Dependencies   []pluginInfoDep  `json:"dependencies,omitempty" yaml:"dependencies,omitempty"`
	Capabilities   []string         `json:"capabilities,omitempty" yaml:"capabilities,omitempty"`
	Outputs        []string         `json:"outputs,omitempty" yaml:"outputs,omitempty"`
	ConfigSchema   any              `json:"configSchema,omitempty" yaml:"configSchema,omitempty"`
	ConfigDefaults any              `json:"configDefaults,omitempty" yaml:"configDefaults,omitempty"`
}

type pluginInfoHook struct {
	Name    string `json:"name" yaml:"name"`
	Timeout string `json:"timeout" yaml:"timeout"`
	// TimeoutFrom: "config" (plugins.NAME.timeout), "plugin" (its own
	// default) or "marina default".
	TimeoutFrom string `json:"timeoutFrom" yaml:"timeoutFrom"`
}

type pluginInfoDep struct {
	Name     string `json:"name" yaml:"name"`
	Version  string `json:"version,omitempty" yaml:"version,omitempty"`
	Optional bool   `json:"optional,omitempty" yaml:"optional,omitempty"`
}

func newPluginInfoView(d *sdk.Description, src, selected string, configured time.Duration) (*pluginInfoView, error) {
	// Values as the plugin sent them: the JSON and YAML encoders escape
	// control characters (the text output cleans them instead).
	v := &pluginInfoView{
		Name: d.Name, Version: d.Version, Protocol: d.Protocol, Source: src, Selection: selected,
		Description: d.Description, Maintainer: d.Maintainer, Capabilities: d.Capabilities, Outputs: d.Outputs,
		Hooks: []pluginInfoHook{},
	}
	for _, h := range d.Hooks {
		hv := pluginInfoHook{Name: string(h), Timeout: d.Timeout(h).String(), TimeoutFrom: "marina default"}
		switch {
		case configured > 0:
			hv.Timeout, hv.TimeoutFrom = configured.String(), "config"
		case d.Timeouts[h] > 0:
			hv.TimeoutFrom = "plugin"
		}
		v.Hooks = append(v.Hooks, hv)
	}
	for _, dep := range d.Dependencies {
		v.Dependencies = append(v.Dependencies, pluginInfoDep{Name: dep.Name, Version: dep.Version, Optional: dep.Optional})
	}
	// The schema and defaults are JSON the plugin sent (checked at install
	// and Describe); shown as objects.
	for _, f := range []struct {
		raw  []byte
		dst  *any
		name string
	}{{d.ConfigSchema, &v.ConfigSchema, "config schema"}, {d.ConfigDefaults, &v.ConfigDefaults, "config defaults"}} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.dst); err != nil {
			return nil, fmt.Errorf("plugin %s: its %s is not JSON: %w", v.Name, f.name, err)
		}
	}
	return v, nil
}

func newPluginInstallCmd(a *app) *cobra.Command {
	var opts pluginstore.InstallOptions
	var yes bool
	cmd := &cobra.Command{
		Use:   "install SOURCE",
		Short: "Install a plugin from a binary, a directory, a .tar.gz, an https URL or oci://REGISTRY/REPO[:TAG]",
		Long: `Install a plugin version into ~/.marina/plugins/<name>/<version>/. The binary is checked
(format, platform), started once to describe itself, and refused if its protocol is one
this marina cannot speak, or if it has the name of a built-in plugin (which would always
win). https sources need --sha256 (or --insecure-skip-checksum, which 'plugin list' then
shows). Installing a version that is already installed with the same
binary does nothing; a different binary for an installed version is refused.

A plugin gets the lab's Docker engine, the clusters' kubeconfigs, host changes and the
registries' credentials only for the capabilities it declares (docs/plugins.md,
"Capabilities"). When it declares capabilities no installed version of it declared,
install shows each with what it unlocks and asks; without a terminal it needs --yes
(otherwise nothing is installed and the exit status is 2). pluginTrust.capabilities
in the config caps what the plugins of a source may declare.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[0]) == "" {
				return exitcode.NewUsage(errors.New("plugin install: SOURCE is empty; give a plugin binary, a directory or .tar.gz with a marina-plugin.json, an https:// URL or an oci:// reference (for the current directory, write .)"))
			}
			store, err := a.openStore()
			if err != nil {
				return err
			}
			src, err := a.resolveByName(cmd, store, args[0], &opts)
			if err != nil {
				return err
			}
			var inst *pluginstore.Installed
			var granted []string
			opts.Grant = a.grantCapabilities(yes, &granted)
			err = a.withLock(cmd.Context(), func() error {
				if inst, err = store.Install(cmd.Context(), src, opts); err != nil {
					if errors.Is(err, pluginstore.ErrBuiltinName) {
						return exitcode.NewUsage(err)
					}
					return err
				}
				return a.pinSelection()
			})
			if err != nil {
				return err
			}
			hooks := make([]string, 0, len(inst.Description.Hooks))
			for _, h := range inst.Description.Hooks {
				hooks = append(hooks, string(h))
			}
			fmt.Fprintf(a.out, "installed %s %s (protocol %s, hooks %s)\n  %s\n", inst.Name, inst.Version, inst.Description.Protocol, strings.Join(hooks, ","), inst.Path)
			if caps := inst.Description.Capabilities; len(caps) > 0 {
				fmt.Fprintf(a.out, "  capabilities: %s%s\n", termsafe.Line(strings.Join(caps, ", ")), grantedNote(granted))
			}
			if t := store.TrustOf(inst); t.Status == pluginsign.Signed {
				fmt.Fprintf(a.out, "  %s\n", t)
			} else if t.Status != pluginsign.Unsigned || len(store.Trust.Keys) > 0 {
				fmt.Fprintf(a.err, "Warning: plugin %s %s is %s; pluginTrust.policy is warn, so it was installed (with enforce it would be refused)\n", inst.Name, inst.Version, termsafe.Line(t.String()))
			}
			fmt.Fprintln(a.out, a.nextStep(store, inst.Name))
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "grant the capabilities the plugin asks for without asking (required without a terminal when it asks for new ones)")
	cmd.Flags().StringVar(&opts.Version, "version", "", "semver constraint when the source offers several versions (OCI tags)")
	cmd.Flags().StringVar(&opts.SHA256, "sha256", "", "expected sha256 of the downloaded artifact (required for https sources)")
	cmd.Flags().BoolVar(&opts.InsecureSkipChecksum, "insecure-skip-checksum", false, "install an https source without --sha256 (recorded and shown by 'plugin list')")
	return cmd
}

func newPluginRemoveCmd(a *app) *cobra.Command {
	var disable bool
	cmd := &cobra.Command{
		Use:     "remove NAME[@VERSION]",
		Aliases: []string{"rm"},
		Short:   "Remove an installed plugin version, or every version",
		Long: `Remove one installed version (NAME@VERSION) or every version (NAME) of a plugin.
Refused when the plugin is enabled in the config and no installed version would be left
for plugins.NAME.version to select (every run would then fail): pass --disable to also
disable it in the config file, or install another version first.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, version, _ := strings.Cut(args[0], "@")
			store, err := a.openStore()
			if err != nil {
				return err
			}
			path, _, err := config.ResolvePath(a.global.ConfigPath, "")
			if err != nil {
				return err
			}
			disabled := false
			err = a.withLock(cmd.Context(), func() error {
				orphan, err := pluginset.RemoveOrphan(store, name, version, compiledIn(), a.loadConfig)
				if err != nil {
					// The config is broken already; removing must stay possible.
					fmt.Fprintf(a.err, "Warning: cannot tell whether the config still needs plugin %s: %v\n", name, err)
				}
				if orphan != "" {
					if !disable {
						return exitcode.NewUsage(fmt.Errorf("%s: the config would then reference nothing and every run would fail. Pass --disable to also disable %s in %s, or install another version first; nothing was removed", orphan, name, path))
					}
					// Disable first: a disabled plugin without a binary is harmless,
					// an enabled one without a binary breaks every run.
					if err := config.SetPluginEnabled(path, name, false); err != nil {
						return err
					}
					disabled = true
				}
				if err := store.Remove(name, version); err != nil {
					return err
				}
				if _, err := a.loadConfig(); err != nil {
					return nil // warned above; nothing to pin against
				}
				return a.pinSelection()
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(a.out, "removed %s\n", args[0])
			if disabled {
				fmt.Fprintf(a.out, "disabled %s in %s (no installed version was left for it)\n", name, path)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&disable, "disable", false, "also disable the plugin in the config file when no installed version would be left for it")
	return cmd
}

func newPluginToggleCmd(a *app, enable bool) *cobra.Command {
	verb := "disable"
	if enable {
		verb = "enable"
	}
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a plugin in the config file (plugins.NAME.enabled)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, _, err := config.ResolvePath(a.global.ConfigPath, "")
			if err != nil {
				return err
			}
			return a.withLock(cmd.Context(), func() error {
				if err := pluginset.CheckToggle(args[0], enable, compiledIn(), a.openStore, a.loadConfig); err != nil {
					return err
				}
				if err := config.SetPluginEnabled(path, args[0], enable); err != nil {
					return err
				}
				if err := a.pinSelection(); err != nil {
					return err
				}
				fmt.Fprintf(a.out, "%sd %s in %s\n", verb, args[0], path)
				if enable {
					a.warnPluginConfig(cmd.Context(), args[0])
				}
				return nil
			})
		},
	}
}

// warnPluginConfig says what in plugins.NAME the plugin (just enabled)
// finds missing or wrong in its config, as config validate would, so a
// config that no longer validates is not left without a word. The plugin
// stays enabled: setting its config is the usual next step.
func (a *app) warnPluginConfig(ctx context.Context, name string) {
	l, err := config.Load(config.LoadOptions{Path: a.global.ConfigPath, Sets: a.global.Sets})
	if l == nil {
		return
	}
	var problems []config.Problem
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		problems = verr.Problems
	}
	_, more, ferr := a.checkPlugins(ctx, l, nil)
	problems = append(problems, more...)
	var mine []config.Problem
	for _, p := range problems {
		if p.Path == "plugins."+name || strings.HasPrefix(p.Path, "plugins."+name+".") {
			mine = append(mine, p)
		}
	}
	if ferr != nil && !strings.Contains(ferr.Error(), name) {
		ferr = nil // about another plugin: not this command's news
	}
	if len(mine) == 0 && ferr == nil {
		return
	}
	fmt.Fprintf(a.err, "Warning: the config does not validate with %s enabled; marina up and cluster create refuse it until it does:\n", name)
	for _, p := range mine {
		where := ""
		if p.Where != "" {
			where = " (" + p.Where + ")"
		}
		fmt.Fprintf(a.err, "  - %s: %s%s\n", p.Path, p.Message, where)
	}
	if ferr != nil {
		fmt.Fprintf(a.err, "  - %v\n", ferr)
	}
	fmt.Fprintf(a.err, "Set plugins.%s.config in %s (marina plugin info %s lists its fields), then check with marina config validate.\n", name, l.Path, name)
}

// verifyRow is one line of `plugin verify`.
type verifyRow struct {
	Name    string `json:"name" yaml:"name"`
	Version string `json:"version" yaml:"version"`
	Pinned  bool   `json:"pinned" yaml:"pinned"`
	OK      bool   `json:"ok" yaml:"ok"`
	// Verdict is ok, modified (the binary is not the build installed or
	// locked), untrusted (intact, but pluginTrust refuses it) or failed.
	Verdict string `json:"verdict" yaml:"verdict"`
	Error   string `json:"error,omitempty" yaml:"error,omitempty"`
}

// verdictOf names what verification found.
func verdictOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, pluginstore.ErrUntrusted):
		return "untrusted"
	case errors.Is(err, pluginstore.ErrModified) || errors.Is(err, pluginstore.ErrLockMismatch):
		return "modified"
	}
	return "failed"
}

func newPluginVerifyCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Check every installed plugin binary against its recorded sha256 and the lock file (exit 1 on mismatch)",
		Long: `Check every installed plugin version: its binary must have the sha256 recorded at install
and, for the version the lock file ~/.marina/plugins.lock pins (shown as pinned), the one
pinned there. The lock file first follows the config: the versions plugins.<name>.version
selects are pinned, as by every command that resolves the plugin set, so what verify
checks as pinned is what plugin list shows as active. Another build of a pinned version is
never pinned over it: it fails verification. Each line says ok, MODIFIED (not the build
installed or locked), UNTRUSTED (intact, but pluginTrust refuses it: the rule is named) or
FAILED. Exit status 1 when any binary fails. It starts no plugin.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var store *pluginstore.Store
			l, err := a.loadConfig()
			if err == nil {
				_, store, err = a.resolvePlugins(l)
			}
			if err != nil {
				// Checking the binaries must not depend on the config.
				fmt.Fprintf(a.err, "Warning: the lock file may not follow the config, which does not resolve: %v\n", err)
			}
			if store == nil {
				if store, err = a.openStore(); err != nil {
					return err
				}
			}
			results, err := store.VerifyAll()
			if err != nil {
				return err
			}
			rows := []verifyRow{}
			bad := 0
			for _, r := range results {
				row := verifyRow{Name: r.Installed.Name, Version: r.Installed.Version, Pinned: r.Pinned, OK: r.Err == nil, Verdict: verdictOf(r.Err)}
				if r.Err != nil {
					row.Error = r.Err.Error()
					bad++
				}
				rows = append(rows, row)
			}
			if output != "text" {
				if err := PrintStructured(a.out, output, rows); err != nil {
					return err
				}
			} else {
				for _, r := range rows {
					pinned := ""
					if r.Pinned {
						pinned = " (pinned)"
					}
					if r.OK {
						fmt.Fprintf(a.out, "%-8s %s %s%s\n", r.Verdict, r.Name, r.Version, pinned)
					} else {
						fmt.Fprintf(a.out, "%-8s %s %s%s: %s\n", strings.ToUpper(r.Verdict), r.Name, r.Version, pinned, r.Error)
					}
				}
				if len(rows) == 0 {
					fmt.Fprintln(a.out, "no plugins installed")
				}
			}
			if bad > 0 {
				return &silentError{fmt.Errorf("%d plugin binaries failed verification", bad)}
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newPluginNewCmd(a *app) *cobra.Command {
	var o scaffold.Options
	cmd := &cobra.Command{
		Use:   "new NAME",
		Short: "Create a new plugin project that builds, tests and installs out of the box",
		Long: `Write a Go module for a new plugin in ./marina-plugin-NAME (or --dir): main.go, a
plugin with a PostCluster hook and a config struct, a test using the SDK's harness, a
Makefile (build: the release build; test, install, package) and a README. Then: cd marina-plugin-NAME && go mod tidy &&
make test install.`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.Name = args[0]
			if o.Dir == "" {
				o.Dir = "marina-plugin-" + o.Name
			}
			devSDK := ""
			if o.SDKVersion == "" && o.SDKPath == "" {
				if v := buildinfo.Get().Version; strings.HasPrefix(v, "v") && !strings.Contains(v, "-") {
					o.SDKVersion = v // a release: the SDK module of the same version
				} else if dir := buildinfo.SourceDir(); dir != "" {
					o.SDKPath, devSDK = dir, dir // a development build: its checkout's SDK
				}
			}
			files, err := scaffold.Write(o)
			if err != nil {
				return exitcode.NewUsage(err)
			}
			if devSDK != "" {
				fmt.Fprintf(a.out, "SDK: %s/sdk (the checkout this development build of marina was built from; --sdk or --sdk-version to choose)\n", devSDK)
			}
			fmt.Fprintf(a.out, "created %s: %s\nnext: cd %s && go mod tidy && make test install\n", o.Dir, strings.Join(files, ", "), o.Dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", "", "directory to create (default ./marina-plugin-NAME)")
	cmd.Flags().StringVar(&o.Module, "module", "", "Go module path, e.g. github.com/you/marina-plugin-NAME (default example.com/marina-plugin-NAME)")
	cmd.Flags().StringVar(&o.Description, "description", "", "one line describing the plugin (at most 200 characters, no newlines or control characters; quotes are fine)")
	cmd.Flags().StringVar(&o.SDKPath, "sdk", "", "build against the SDK of a local marina checkout (a replace directive to its sdk/; default for a development build: the checkout it was built from)")
	cmd.Flags().StringVar(&o.SDKVersion, "sdk-version", "", "version of the SDK module github.com/bcollard/marina/sdk to require (default: this marina's version)")
	return cmd
}

// servePlugin serves one of marina's built-in plugins as a separate process
// (the path third-party plugins take). It returns only on a bad name.
func servePlugin(name string, stderr io.Writer) int {
	newPlugin, ok := builtins()[name]
	if !ok {
		fmt.Fprintf(stderr, "marina: no built-in plugin %q\n", name)
		return exitcode.Usage
	}
	sdk.Serve(newPlugin())
	return exitcode.OK
}

// resolvePlugins returns the plugin set of the effective config, and
// brings the lock file up to date with it (followConfig): every command
// that resolves the set (plugin list and verify, config validate, doctor,
// up, cluster, ...) pins the versions the config selects, so a version
// edited by hand in the config is recorded at the next command.
func (a *app) resolvePlugins(l *config.Loaded) ([]pluginset.Entry, *pluginstore.Store, error) {
	entries, store, err := a.resolveSet(l)
	if store != nil {
		a.followConfig(store, entries)
	}
	return entries, store, err
}

// resolveSet is resolvePlugins without touching the lock file.
func (a *app) resolveSet(l *config.Loaded) ([]pluginset.Entry, *pluginstore.Store, error) {
	store, err := a.openStoreFor(l)
	if err != nil {
		return nil, nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	entries, err := pluginset.Resolve(l.Config, builtins(), store, self)
	return entries, store, err
}

// followConfig records in the lock file the versions entries select
// (pluginset.Sync). It does not fail the command: another build of a
// pinned version and an unreadable lock file are what the verification
// that follows every resolve reports (plugin list, plugin verify, and the
// check before a launch refuse them); any other failure to record is a
// warning, and the next command tries again.
func (a *app) followConfig(store *pluginstore.Store, entries []pluginset.Entry) {
	err := pluginset.Sync(store, entries)
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, pluginstore.ErrLockMismatch) && !errors.Is(err, pluginstore.ErrInvalid) {
			fmt.Fprintf(a.err, "Warning: the plugin versions the config selects were not recorded in the lock file: %v\n", err)
		}
	}
}

// pinSelection records the versions the config selects in the lock file;
// unlike followConfig it fails on anything it could not record.
func (a *app) pinSelection() error {
	l, err := a.loadConfig()
	if err != nil {
		return err
	}
	entries, store, err := a.resolveSet(l)
	if err != nil {
		return err
	}
	return pluginset.Sync(store, entries)
}

// nextStep is what plugin install says last: how to enable the plugin, or,
// when the config enables it already, which installed version runs.
func (a *app) nextStep(store *pluginstore.Store, name string) string {
	l, err := config.Load(config.LoadOptions{Path: a.global.ConfigPath, Sets: a.global.Sets})
	if err != nil || !l.Config.Plugins[name].Enabled {
		return fmt.Sprintf("enable it with `marina plugin enable %s` (select versions with plugins.%s.version in the config)", name, name)
	}
	constraint := l.Config.Plugins[name].Version
	sel, err := store.Resolve(name, constraint)
	if err != nil {
		return fmt.Sprintf("plugin %s is enabled in the config, but %v", name, err)
	}
	if constraint == "" {
		constraint = "any version"
	}
	return fmt.Sprintf("plugin %s is enabled in the config: version %s runs (plugins.%s.version: %s)", name, sel.Version, name, constraint)
}

// grantCapabilities is install's and upgrade's consent to the capabilities
// a plugin asks for anew (pluginstore.InstallOptions.Grant): it shows each
// with what it unlocks and asks on a terminal; --yes grants them; without a
// terminal or --yes nothing is installed (exit 2). What was granted is
// appended to granted.
func (a *app) grantCapabilities(yes bool, granted *[]string) func(*sdk.Description, []string) error {
	return func(d *sdk.Description, added []string) error {
		what := termsafe.Line(d.Name + " " + d.Version)
		fmt.Fprintf(a.err, "plugin %s asks for capabilities no installed version of it had:\n", what)
		printCapabilities(a.err, added)
		if !yes {
			in := terminalInput(a)
			if in == nil {
				return exitcode.NewUsage(fmt.Errorf("plugin %s asks for capabilities %s: pass --yes to grant them (nothing was installed)", what, strings.Join(added, ", ")))
			}
			if !confirmOn(in, a.err, "Grant them?") {
				return exitcode.NewUsage(fmt.Errorf("capabilities %s of plugin %s not granted; nothing was installed", strings.Join(added, ", "), what))
			}
		}
		*granted = append(*granted, added...)
		return nil
	}
}

// grantedNote is how install's output marks capabilities granted just now.
func grantedNote(granted []string) string {
	if len(granted) == 0 {
		return ""
	}
	return " (granted now: " + strings.Join(granted, ", ") + ")"
}

// printCapabilities lists capabilities with what each unlocks (a name this
// marina does not know is shown as such: such a plugin does not run).
func printCapabilities(w io.Writer, caps []string) {
	for _, c := range caps {
		unlocks, ok := sdk.CapabilityUnlocks(c)
		if !ok {
			unlocks = "unknown to this marina (upgrade marina)"
		}
		fmt.Fprintf(w, "  %-21s %s\n", termsafe.Line(c), unlocks)
	}
}
