package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/Masterminds/semver/v3"
	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/core/termsafe"
)

func newPluginVersionsCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "versions NAME|oci://HOST[:PORT]/REPOSITORY",
		Short: "List the published versions of a plugin: protocol, platforms, signature, and which this marina can run here",
		Long: `List the semver-tagged versions of a plugin in its OCI repository, newest first: the
protocol each needs, the platforms it is published for, its signature checked against
pluginTrust.keys (without downloading it), and whether this marina can run it on this
machine (protocol, platform and the trust policy, as install decides). NAME is an installed plugin (its repository is the one it was installed
from) or, before any install, a plugin of the configured pluginSources (as plugin search
and plugin install NAME find it); or give the repository. Reads the tag list and one
manifest per version.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := a.openStore()
			if err != nil {
				return err
			}
			repo, err := a.repositoryFor(cmd.Context(), store, args[0])
			if err != nil {
				return err
			}
			vs, err := store.Versions(cmd.Context(), repo)
			if err != nil {
				return usageIfInvalid(err)
			}
			if output != "text" {
				return PrintStructured(a.out, output, vs)
			}
			fmt.Fprintf(a.out, "%s\n", repo)
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tPROTOCOL\tPLATFORMS\tSIGNATURE\tCAPABILITIES\tRUNS HERE")
			for _, v := range vs {
				runs := "yes"
				if !v.Runnable {
					runs = "no (" + v.Why + ")"
				}
				caps := "?" // not said by the publisher
				if v.Capabilities != nil {
					caps = Dash(strings.Join(v.Capabilities, ","))
				}
				fmt.Fprintln(tw, termsafe.Line(strings.Join([]string{v.Version, Dash(v.Protocol), Dash(strings.Join(v.Platforms, ",")), Dash(v.Signature), caps, runs}, "\t")))
			}
			return tw.Flush()
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// repositoryFor returns the OCI repository of arg: arg itself when it is
// an oci:// reference, else the repository the installed plugin arg was
// installed from (its newest installed version's), else the repository of
// arg in the config's pluginSources.
func (a *app) repositoryFor(ctx context.Context, store *pluginstore.Store, arg string) (string, error) {
	if strings.HasPrefix(arg, "oci://") {
		return arg, nil
	}
	insts, err := store.List()
	if err != nil {
		return "", err
	}
	var repo string
	var newest *semver.Version
	for _, inst := range insts {
		if inst.Name != arg {
			continue
		}
		v, err := semver.StrictNewVersion(inst.Version)
		if err != nil {
			continue
		}
		if r := pluginstore.RepositoryOf(inst.Source); r != "" && (newest == nil || v.GreaterThan(newest)) {
			repo, newest = r, v
		}
	}
	if repo != "" {
		return repo, nil
	}
	var sources []string
	if l, err := a.loadConfig(); err == nil {
		sources = l.Config.PluginSources
	}
	if len(sources) > 0 {
		repo, err := store.Find(ctx, sources, arg)
		if err != nil {
			return "", err
		}
		if repo != "" {
			return repo, nil
		}
		return "", exitcode.NewUsage(fmt.Errorf("plugin %s is neither installed from an OCI registry nor in pluginSources (%s); marina plugin search lists what they offer, or give its repository: marina plugin versions oci://HOST/REPOSITORY", arg, strings.Join(sources, ", ")))
	}
	return "", exitcode.NewUsage(fmt.Errorf("plugin %s has no installed version from an OCI registry to ask, and the config has no pluginSources to look it up in; give its repository: marina plugin versions oci://HOST/REPOSITORY", arg))
}

// outdatedRow is one enabled installed plugin and what its repository offers.
type outdatedRow struct {
	Name       string `json:"name"`
	Installed  string `json:"installed"`
	Constraint string `json:"constraint,omitempty"`
	// Wanted is the newest version the config's constraint allows (what
	// upgrade installs); Latest the newest runnable release.
	Wanted string `json:"wanted,omitempty"`
	Latest string `json:"latest,omitempty"`
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
}

// outdated compares each enabled installed plugin with its repository.
func (a *app) outdated(cmd *cobra.Command, only []string) ([]outdatedRow, *pluginstore.Store, error) {
	l, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	entries, store, err := a.resolveSet(l)
	if err != nil {
		return nil, nil, err
	}
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	var rows []outdatedRow
	for _, e := range entries {
		if e.Builtin || !e.Enabled || e.Installed == nil || len(want) > 0 && !want[e.Name] {
			continue
		}
		delete(want, e.Name)
		row := outdatedRow{Name: e.Name, Installed: e.Installed.Version, Constraint: e.Constraint, Source: e.Installed.Source}
		repo := pluginstore.RepositoryOf(e.Installed.Source)
		if repo == "" {
			row.Note = "installed from a file or URL: no versions to compare; reinstall from a registry to follow it"
			rows = append(rows, row)
			continue
		}
		row.Source = repo
		vs, err := store.Versions(cmd.Context(), repo)
		if err != nil {
			row.Note = err.Error()
			rows = append(rows, row)
			continue
		}
		if w, err := pluginstore.Newest(vs, e.Constraint); err == nil && w != nil {
			row.Wanted = w.Version
		}
		if l, _ := pluginstore.Newest(vs, ""); l != nil {
			row.Latest = l.Version
		}
		rows = append(rows, row)
	}
	for n := range want {
		return nil, nil, exitcode.NewUsage(fmt.Errorf("plugin %s is not an enabled installed plugin (built-ins upgrade with marina itself)", n))
	}
	return rows, store, nil
}

// newer reports whether version a is greater than b.
func newer(a, b string) bool {
	va, err1 := semver.StrictNewVersion(a)
	vb, err2 := semver.StrictNewVersion(b)
	return err1 == nil && err2 == nil && va.GreaterThan(vb)
}

func newPluginOutdatedCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "outdated",
		Short: "Show enabled plugins with newer versions in their registry (what upgrade would install)",
		Long: `For every enabled installed plugin, ask the OCI repository it was installed from for its
versions: WANTED is the newest this marina can run here that plugins.NAME.version allows
(what marina plugin upgrade installs), LATEST the newest release it can run here at all.
Exit status 0 either way; -o json for scripts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rows, _, err := a.outdated(cmd, nil)
			if err != nil {
				return err
			}
			if output != "text" {
				return PrintStructured(a.out, output, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.out, "no enabled installed plugins")
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tINSTALLED\tWANTED\tLATEST\tSOURCE")
			for _, r := range rows {
				fmt.Fprintln(tw, termsafe.Line(strings.Join([]string{r.Name, r.Installed, Dash(r.Wanted), Dash(r.Latest), r.Source}, "\t")))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, r := range rows {
				if r.Note != "" {
					fmt.Fprintf(a.out, "%s: %s\n", r.Name, termsafe.Line(r.Note))
				} else if r.Latest != "" && r.Wanted != r.Latest && newer(r.Latest, r.Wanted) {
					fmt.Fprintf(a.out, "%s: %s is out of plugins.%s.version %q; edit the constraint to allow it\n", r.Name, r.Latest, r.Name, r.Constraint)
				}
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

func newPluginUpgradeCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "upgrade [NAME...]",
		Short: "Install the newest version the config allows of enabled plugins, from the registry each came from",
		Long: `For each enabled installed plugin (or those named), install from the OCI repository it
was installed from the newest version this marina can run here that plugins.NAME.version
allows (marina plugin outdated's WANTED), then record the selection in the lock file. The
config's constraint is honoured: a new major version needs an edited constraint. Older
versions stay installed (marina plugin remove NAME@VERSION). A version that declares
capabilities no installed version declared is installed only once they are granted: on a
terminal upgrade asks, otherwise it needs --yes.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withLock(cmd.Context(), func() error {
				rows, store, err := a.outdated(cmd, args)
				if err != nil {
					return err
				}
				upgraded := 0
				var failed []error
				for _, r := range rows {
					switch {
					case r.Note != "":
						fmt.Fprintf(a.out, "%s %s: %s\n", r.Name, r.Installed, termsafe.Line(r.Note))
					case r.Wanted == "" || !newer(r.Wanted, r.Installed):
						fmt.Fprintf(a.out, "%s %s: up to date with plugins.%s.version %q\n", r.Name, r.Installed, r.Name, r.Constraint)
					default:
						var granted []string
						inst, err := store.Install(cmd.Context(), r.Source+":"+r.Wanted, pluginstore.InstallOptions{Grant: a.grantCapabilities(yes, &granted)})
						if err != nil {
							failed = append(failed, fmt.Errorf("%s: %w", r.Name, err))
							continue
						}
						upgraded++
						fmt.Fprintf(a.out, "%s %s -> %s%s\n", r.Name, r.Installed, inst.Version, grantedNote(granted))
					}
				}
				if upgraded > 0 {
					if err := a.pinSelection(); err != nil {
						return err
					}
				}
				return errors.Join(failed...)
			})
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "grant new capabilities a version asks for without asking (required without a terminal)")
	return cmd
}

// pluginRefRE matches NAME or NAME@CONSTRAINT: a plugin to find in the
// configured sources (when no file or directory has that name).
var pluginRefRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([a-z][a-z0-9-]{0,62})(@(.+))?$`) })

// resolveByName turns `plugin install NAME[@CONSTRAINT]` into the OCI
// repository of NAME in pluginSources (the constraint goes to opts.Version
// unless --version is given); any other argument is returned as it is.
func (a *app) resolveByName(cmd *cobra.Command, store *pluginstore.Store, arg string, opts *pluginstore.InstallOptions) (string, error) {
	m := pluginRefRE().FindStringSubmatch(arg)
	if m == nil {
		return arg, nil
	}
	if _, err := os.Stat(arg); err == nil {
		return arg, nil // a file or directory of that name: install it
	}
	l, err := a.loadConfig()
	if err != nil {
		return "", err
	}
	sources := l.Config.PluginSources
	if len(sources) == 0 {
		return "", exitcode.NewUsage(fmt.Errorf("plugin install %s: no file or directory %s here, and no pluginSources in the config to look it up in; give a path, an oci:// reference, or add pluginSources: [oci://REGISTRY/NAMESPACE]", arg, arg))
	}
	repo, err := store.Find(cmd.Context(), sources, m[1])
	if err != nil {
		return "", err
	}
	if repo == "" {
		return "", exitcode.NewUsage(fmt.Errorf("plugin install %s: no plugin %s in pluginSources (%s); marina plugin search lists what they offer", arg, m[1], strings.Join(sources, ", ")))
	}
	if m[3] != "" {
		if opts.Version != "" && opts.Version != m[3] {
			return "", exitcode.NewUsage(fmt.Errorf("plugin install %s --version %s: two constraints; give one", arg, opts.Version))
		}
		opts.Version = m[3]
	}
	fmt.Fprintf(a.err, "plugin install: %s is %s\n", m[1], repo)
	return repo, nil
}

func newPluginSearchCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "search [TERM]",
		Short: "List the plugins the configured sources offer (pluginSources), their newest version and what they do",
		Long: `List the plugins in the OCI registry namespaces of pluginSources in the config (every
repository under a namespace is a plugin named by its last path element) whose name or
description contains TERM (case-insensitive), with the newest version this marina can run on
this machine and how many versions there are. marina plugin install NAME[@CONSTRAINT]
installs one; marina plugin versions oci://... lists its versions.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			term := ""
			if len(args) == 1 {
				term = args[0]
			}
			l, err := a.loadConfig()
			if err != nil {
				return err
			}
			sources := l.Config.PluginSources
			if len(sources) == 0 {
				return exitcode.NewUsage(errors.New("no pluginSources in the config: add the OCI registry namespaces to search, e.g. pluginSources: [oci://registry.example.com/marina-plugins]"))
			}
			store, err := a.openStoreFor(l)
			if err != nil {
				return err
			}
			found, err := store.Search(cmd.Context(), sources, term)
			if err != nil {
				return err
			}
			if output != "text" {
				return PrintStructured(a.out, output, found)
			}
			if len(found) == 0 {
				fmt.Fprintf(a.out, "no plugin matches %q in %s\n", term, strings.Join(sources, ", "))
				return nil
			}
			tw := tabwriter.NewWriter(a.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tLATEST\tVERSIONS\tDESCRIPTION")
			for _, f := range found {
				latest := f.Latest
				if latest == "" {
					latest = "- (" + f.Why + ")"
				}
				fmt.Fprintln(tw, termsafe.Line(strings.Join([]string{f.Name, latest, fmt.Sprint(f.Versions), termsafe.Excerpt(f.Description, 60)}, "\t")))
			}
			return tw.Flush()
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}
