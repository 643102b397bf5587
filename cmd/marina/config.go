package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/plugin"
	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/core/termsafe"
	"github.com/bcollard/marina/core/userfile"
)

func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config",
		Short:   "Show, check, create and edit marina's configuration",
		GroupID: GroupSetup,
		Long: `marina reads ~/.marina/config.yaml (or --config, or $MARINA_CONFIG), then MARINA_*
environment variables, then --set key=value flags; later layers win.
See docs/config.md for every key.`,
	}
	cmd.AddCommand(newConfigPathCmd(a), newConfigViewCmd(a), newConfigValidateCmd(a), newConfigInitCmd(a), newConfigEditCmd(a))
	return cmd
}

// newConfigPathCmd is `marina config path`.
func newConfigPathCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "path",
		Short: "Print the path of the config file marina reads",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path, _, err := config.ResolvePath(a.global.ConfigPath, "")
			if err != nil {
				return err
			}
			fmt.Fprintln(a.out, path)
			if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(a.err, "note: %s does not exist yet; defaults apply (create it with `marina config init`)\n", path)
			}
			return nil
		},
	}
}

// newConfigViewCmd is `marina config view`.
func newConfigViewCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "view",
		Short: "Show the effective configuration and where each value came from",
		Long: `Show the effective configuration. Each value is annotated with its source: default,
file (with line), env (the MARINA_* variable) or flag (--set). Secrets are redacted.
-o json|yaml prints a list of {key, value, source}.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			l, err := a.loadConfig()
			if err != nil {
				return err
			}
			if output != "annotated" {
				return PrintStructured(a.out, output, l.Entries())
			}
			b, err := l.AnnotatedYAML()
			if err != nil {
				return err
			}
			if l.FileExists {
				fmt.Fprintf(a.out, "# effective configuration (file: %s)\n", l.Path)
			} else {
				fmt.Fprintf(a.out, "# effective configuration (no file at %s: defaults)\n", l.Path)
			}
			_, err = a.out.Write(b)
			return err
		},
	}
	OutputFlag(cmd, &output, "annotated", "annotated", "json", "yaml")
	return cmd
}

// validateResult is the structured output of `config validate`.
type validateResult struct {
	File     string           `json:"file" yaml:"file"`
	Exists   bool             `json:"exists" yaml:"exists"`
	Valid    bool             `json:"valid" yaml:"valid"`
	Problems []config.Problem `json:"problems" yaml:"problems"`
	Warnings []string         `json:"warnings" yaml:"warnings"`
}

func newConfigValidateCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the configuration; report every problem with its key, file and line (exit 2 if invalid)",
		Long: `Check the configuration: strict decoding (unknown keys, types, one YAML document,
with file and line), every rule of the schema, and the config of every enabled plugin,
which each plugin checks against its own schema, even when the rest has problems. The
built-in plugins check theirs inside marina; an installed plugin is started for this
only when that binary has not checked that exact config before (its answers are cached
in ~/.marina/cache/validate); installed binaries are verified against the lock file first.
Every problem of every layer is reported in one run, each with its source: the file and
line, the MARINA_* variable or the --set flag that wrote the key (a plugin's field at
the line of that key). Exit 2 when the configuration is invalid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := a.loadConfig()
			var verr *config.ValidationError
			if err != nil && !errors.As(err, &verr) {
				return err
			}
			res := validateResult{Problems: []config.Problem{}, Warnings: []string{}}
			file := ""
			if verr != nil {
				res.Problems = append(res.Problems, verr.Problems...)
				res.File, file = verr.File, verr.File
			}
			var failure error // a plugin that cannot be checked at all (not a config problem)
			if l != nil {     // nil when the file itself could not be read
				res.File, res.Exists = l.Path, l.FileExists
				if l.FileExists {
					file = l.Path
				}
				// The plugins check their own config sections even when the rest
				// has problems: every problem of every layer in one run. A plugin
				// whose own keys already have a problem is not asked.
				skip := map[string]bool{}
				for _, p := range res.Problems {
					if rest, ok := strings.CutPrefix(p.Path, "plugins."); ok {
						name, _, _ := strings.Cut(rest, ".")
						skip[name] = true
					}
				}
				warnings, problems, ferr := a.checkPlugins(cmd.Context(), l, skip)
				res.Warnings = append(res.Warnings, warnings...)
				res.Problems = append(res.Problems, problems...)
				failure = ferr
			}
			config.SortProblems(file, res.Problems)
			res.Valid = len(res.Problems) == 0 && failure == nil
			err = failure
			if len(res.Problems) > 0 {
				err = errors.Join(&config.ValidationError{File: file, Problems: res.Problems}, failure)
			}
			if output != "text" {
				if perr := PrintStructured(a.out, output, res); perr != nil {
					return perr
				}
				if err != nil {
					return &silentError{err}
				}
				return nil
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(a.err, "Warning: %s\n", w)
			}
			if err != nil {
				return err
			}
			if res.Exists {
				fmt.Fprintf(a.out, "%s is valid\n", res.File)
			} else {
				fmt.Fprintf(a.out, "no config file at %s; the defaults are valid\n", res.File)
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "json", "yaml")
	return cmd
}

// silentError keeps the exit status of err but is not printed again
// (its content was already written in a structured form).
type silentError struct{ err error }

func (e *silentError) Error() string { return "" }
func (e *silentError) Unwrap() error { return e.err }

func newConfigInitCmd(a *app) *cobra.Command {
	var force, stdout bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a commented default config file",
		Long: `Write a config file with every key, its default and its documentation.
An existing file is kept unless --force, which saves it as <file>.bak first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tmpl, err := config.InitTemplate()
			if err != nil {
				return err
			}
			if stdout {
				_, err := a.out.Write(tmpl)
				return err
			}
			path, _, err := config.ResolvePath(a.global.ConfigPath, "")
			if err != nil {
				return err
			}
			return a.withLock(cmd.Context(), func() error { return writeInitFile(a, path, tmpl, force) })
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite an existing file (saved as <file>.bak)")
	cmd.Flags().BoolVar(&stdout, "stdout", false, "print the template instead of writing the file")
	return cmd
}

// writeInitFile writes the template to path, keeping or backing up an existing file.
func writeInitFile(a *app, path string, tmpl []byte, force bool) error {
	old, err := userfile.ReadFile(path, userfile.MaxSize)
	switch {
	case err == nil && !force:
		return exitcode.NewUsage(fmt.Errorf("%s already exists; keep it, edit it with `marina config edit`, or overwrite it with --force (the old file is saved as %s.bak)", path, path))
	case err == nil:
		if err := atomicfile.WriteFile(path+".bak", old, 0o600); err != nil {
			return fmt.Errorf("saving a backup of %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, tmpl, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "wrote %s\n", path)
	return nil
}

func newConfigEditCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "edit",
		Short: "Edit the config file in $VISUAL or $EDITOR; it is replaced only if the result is valid",
		Long: `Open a copy of the config file (the commented default if there is none yet) in
$VISUAL, else $EDITOR, else vi. When the editor exits the copy is validated: a valid
copy replaces the file atomically; an invalid one is reported, and on a terminal you
can edit it again. The config file is never left half-edited or invalid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _, err := config.ResolvePath(a.global.ConfigPath, "")
			if err != nil {
				return err
			}
			content, err := userfile.ReadFile(path, userfile.MaxSize)
			if errors.Is(err, fs.ErrNotExist) {
				if content, err = config.InitTemplate(); err != nil {
					return err
				}
			} else if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			draft := path + ".edit.yaml"
			if err := atomicfile.WriteFile(draft, content, 0o600); err != nil {
				return err
			}
			interactive := lifecycle.IsTerminal(a.out)
			for {
				if err := runEditor(cmd, a, draft); err != nil {
					return fmt.Errorf("%w; your draft is kept at %s", err, draft)
				}
				_, verr := config.Load(config.LoadOptions{Path: draft, Sets: a.global.Sets})
				if verr == nil {
					edited, err := userfile.ReadFile(draft, userfile.MaxSize)
					if err != nil {
						return err
					}
					if err := a.withLock(cmd.Context(), func() error { return atomicfile.WriteFile(path, edited, 0o600) }); err != nil {
						return err
					}
					_ = os.Remove(draft)
					fmt.Fprintf(a.out, "saved %s\n", path)
					return nil
				}
				fmt.Fprintln(a.err, verr)
				if !interactive || !askYes(a, "Edit again? [Y/n] ") {
					return exitcode.NewUsage(fmt.Errorf("%s was not changed; your edits are kept at %s (fix them and move the file over, or run `marina config edit` again)", path, draft))
				}
			}
		},
	}
}

func runEditor(cmd *cobra.Command, a *app, file string) error {
	editor := cmp.Or(os.Getenv("VISUAL"), os.Getenv("EDITOR"), "vi")
	argv := strings.Fields(editor)
	c := exec.CommandContext(cmd.Context(), argv[0], append(argv[1:], file)...)
	c.Stdin, c.Stdout, c.Stderr = a.in, a.out, a.err
	if err := c.Run(); err != nil {
		return fmt.Errorf("editor %q failed: %w", editor, err)
	}
	return nil
}

func askYes(a *app, prompt string) bool {
	fmt.Fprint(a.err, prompt)
	line, err := bufio.NewReader(a.in).ReadString('\n')
	if err != nil && line == "" {
		return false
	}
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "" || ans == "y" || ans == "yes"
}

// pluginSet is the enabled plugin set of a config as checked so far.
type pluginSet struct {
	// runnable are the enabled plugins that can run (installed, verified).
	runnable []plugin.Plugin
	// warnings, e.g. built-ins this build does not have yet.
	warnings []string
	// problems are config problems, each located where the user wrote it.
	problems []config.Problem
	// failures are what stopped a plugin from being checked at all (a
	// modified binary, a plugin that does not start).
	failures []error
}

// checkPluginSet resolves the plugin set of l once and checks every enabled
// plugin but those in skip without starting any: that it is installed and
// unmodified, and its dependencies. The error is a usage error when the set
// cannot be resolved at all.
func (a *app) checkPluginSet(l *config.Loaded, skip map[string]bool) (*pluginSet, error) {
	set := &pluginSet{}
	entries, store, err := a.resolvePlugins(l)
	if err != nil {
		if entries == nil {
			return nil, exitcode.NewUsage(err)
		}
		set.problems = append(set.problems, config.Problem{Path: "plugins", Message: err.Error()}.Bounded())
	}
	var missingBuiltins []string
	for _, e := range entries {
		if !e.Enabled || skip[e.Name] {
			continue
		}
		if e.Problem != "" {
			if config.IsBuiltinName(e.Name) && !e.Builtin {
				missingBuiltins = append(missingBuiltins, e.Name)
				continue
			}
			// What makes the problem matter is that the plugin is enabled:
			// blame the file line or --set that enabled it.
			path, msg, where := "plugins."+e.Name, e.Problem, l.Locate("plugins."+e.Name+".enabled")
			if rest, ok := strings.CutPrefix(msg, path+".version: "); ok {
				path, msg, where = path+".version", rest, l.Locate(path+".version")
			}
			set.problems = append(set.problems, config.Problem{Path: path, Message: msg, Where: where}.Bounded())
			continue
		}
		if err := pluginset.Verify(store, []pluginset.Entry{e}); err != nil {
			set.failures = append(set.failures, err)
			continue
		}
		set.runnable = append(set.runnable, e.Plugin)
	}
	if len(missingBuiltins) > 0 {
		set.warnings = append(set.warnings, fmt.Sprintf("built-in plugins not in this marina build yet (they are skipped): %s", strings.Join(missingBuiltins, ", ")))
	}
	return set, nil
}

// validate has d, a dispatcher of the set's runnable plugins, check each
// plugin's config, which the plugin validates itself, and adds what they
// say. No plugin process is started when the answers are known: a
// built-in's check runs in-process (the same sdk code its plugin server
// runs), and an installed plugin's answer is cached under
// ~/.marina/cache/validate by binary digest and config bytes. Problems are
// located through l (the plugin's field "pools[0].name" at the file line or
// --set that wrote plugins.<name>.config.pools[0].name, or its nearest
// parent).
func (s *pluginSet) validate(ctx context.Context, l *config.Loaded, d *plugin.Dispatcher) {
	if len(s.runnable) == 0 {
		return
	}
	if dir, err := marinaDir(); err == nil {
		d.CacheValidation(&plugin.ValidateCache{Dir: filepath.Join(dir, "cache", "validate")})
	}
	ps, rest := pluginProblems(l, d.Validate(ctx))
	s.problems = append(s.problems, ps...)
	s.failures = append(s.failures, rest...)
}

// err is the set's problems (*config.ValidationError) joined with its failures.
func (s *pluginSet) err(l *config.Loaded) error {
	err := errors.Join(s.failures...)
	if len(s.problems) > 0 {
		file := ""
		if l.FileExists {
			file = l.Path
		}
		config.SortProblems(file, s.problems)
		err = errors.Join(&config.ValidationError{File: file, Problems: s.problems}, err)
	}
	return err
}

// checkPlugins is checkPluginSet and validate, with a dispatcher of its own.
func (a *app) checkPlugins(ctx context.Context, l *config.Loaded, skip map[string]bool) (warnings []string, problems []config.Problem, err error) {
	set, err := a.checkPluginSet(l, skip)
	if err != nil {
		return nil, nil, err
	}
	d := plugin.NewDispatcher(set.runnable, a.pluginOptions())
	defer d.Close()
	set.validate(ctx, l, d)
	return set.warnings, set.problems, errors.Join(set.failures...)
}

// pluginProblems turns what the plugins said about their config and
// dependencies into config problems, each located where the user wrote the
// key; the other errors (a plugin that failed to start or answer) are
// returned as they are.
func pluginProblems(l *config.Loaded, err error) (problems []config.Problem, rest []error) {
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		var ce *plugin.ConfigError
		var de *plugin.DependencyError
		switch {
		case isJoin(err):
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				walk(e)
			}
		case errors.As(err, &ce):
			for _, d := range ce.Diagnostics {
				path := "plugins." + ce.Plugin + ".config"
				if field := termsafe.Line(d.Path); field != "" {
					if !strings.HasPrefix(field, "[") {
						path += "."
					}
					path += field
				}
				msg := termsafe.Line(d.Summary)
				if d.Detail != "" {
					msg += " (" + termsafe.Line(d.Detail) + ")"
				}
				problems = append(problems, config.Problem{Path: path, Message: msg + " (plugin " + ce.Plugin + ")", Where: l.Locate(path)}.Bounded())
			}
		case errors.As(err, &de):
			path, where := "plugins", ""
			if de.Plugin != "" {
				path = "plugins." + de.Plugin
				where = l.Locate(path + ".enabled")
			}
			problems = append(problems, config.Problem{Path: path, Message: de.Error(), Where: where}.Bounded())
		default:
			rest = append(rest, err)
		}
	}
	walk(err)
	return problems, rest
}

// isJoin reports whether err is a list of errors (errors.Join), not one
// error that may wrap others.
func isJoin(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}
