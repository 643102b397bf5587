package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/bcollard/marina/core/pluginset"
	"github.com/bcollard/marina/core/termsafe"
)

// TableWidth is the width the default `plugin list` table keeps
// within (for sources up to SourceWidth and the usual names).
const (
	TableWidth  = 100
	SourceWidth = 40
)

// WriteTable writes rows as `plugin list`'s table. The default table
// has NAME, VERSION, SOURCE (shortened), the number of HOOKS and STATUS,
// and below it, for each row with a detail, "NAME VERSION: STATUS (DETAIL)"
// wrapped to TableWidth; wide has every column, the sources whole
// and the details in the STATUS column. Plugin-provided text is cleaned.
func WriteTable(w io.Writer, rows []pluginset.Row, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tPROTOCOL\tHOOKS\tDEPENDS\tSIGNATURE\tSTATUS")
		for _, r := range rows {
			fmt.Fprintln(tw, termsafe.Line(strings.Join([]string{r.Name, Dash(r.Version), r.Source, Dash(r.Protocol),
				Dash(strings.Join(r.Hooks, ",")), Dash(strings.Join(r.Dependencies, ",")), Dash(r.Signature), StatusDetail(r)}, "\t")))
		}
		return tw.Flush()
	}
	fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tHOOKS\tSTATUS")
	var notes []string
	for _, r := range rows {
		hooks := "-"
		if len(r.Hooks) > 0 {
			hooks = fmt.Sprint(len(r.Hooks))
		}
		fmt.Fprintln(tw, termsafe.Line(strings.Join([]string{r.Name, Dash(r.Version), ShortSource(r.Source), hooks, r.Status}, "\t")))
		if r.Detail != "" {
			what := r.Name
			if r.Version != "" {
				what += " " + r.Version
			}
			notes = append(notes, WrapWords(termsafe.Line(what+": "+StatusDetail(r)), TableWidth, "  "))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(notes) > 0 {
		_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
		return err
	}
	return nil
}

func StatusDetail(r pluginset.Row) string {
	if r.Detail == "" {
		return r.Status
	}
	return r.Status + " (" + r.Detail + ")"
}

// ShortSource is a source as the default `plugin list` table shows it:
// the home directory as ~ and, past SourceWidth, its last components
// after "…" (the file name or tag, which tells installs apart).
func ShortSource(src string) string {
	mark := ""
	if rest, ok := strings.CutSuffix(src, pluginset.InsecureSourceMark); ok {
		src, mark = rest, " [checksum skipped]"
	}
	if home, err := os.UserHomeDir(); err == nil && home != "/" && strings.HasPrefix(src, home+"/") {
		src = "~" + strings.TrimPrefix(src, home)
	}
	if r := []rune(src); len(r) > SourceWidth {
		tail := string(r[len(r)-SourceWidth+1:])
		if i := strings.Index(tail, "/"); i >= 0 && i < len(tail)-1 {
			tail = tail[i:] // from a path or URL component
		}
		src = "…" + tail
	}
	return src + mark
}

// WrapWords wraps s at spaces to lines of at most width runes, the lines
// after the first indented. A span in backquotes (a command to copy) is
// kept on one line; a word or span longer than a line gets one of its own.
func WrapWords(s string, width int, indent string) string {
	var words []string
	for _, f := range strings.Fields(s) {
		if n := len(words); n > 0 && strings.Count(words[n-1], "`")%2 == 1 {
			words[n-1] += " " + f // inside a backquoted span
			continue
		}
		words = append(words, f)
	}
	var b strings.Builder
	col := 0
	for _, word := range words {
		n := utf8.RuneCountInString(word)
		switch {
		case col == 0:
		case col+1+n > width:
			b.WriteString("\n" + indent)
			col = utf8.RuneCountInString(indent)
		default:
			b.WriteByte(' ')
			col++
		}
		b.WriteString(word)
		col += n
	}
	return b.String()
}

// newPluginListCmd is `marina plugin list`: pluginset.List makes its rows
// and the problems (one line each) that make it exit 1.
func newPluginListCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List built-in and installed plugins with their versions, hooks and status",
		Long: `List every built-in plugin and every installed version: NAME, VERSION, SOURCE (long
ones shortened to their end), the number of HOOKS and STATUS, then below the table each
detail (why a plugin cannot run, what to run about it). -o wide adds PROTOCOL, the HOOKS by
name and DEPENDS (? marks an optional dependency), and shows SOURCE whole and the details
in the STATUS column; -o json and -o yaml give every field; marina plugin info NAME shows
one plugin in full.

STATUS is active (enabled and selected by the config's version constraint), installed
(another version is selected, or the plugin is not enabled), disabled, unavailable (enabled
but cannot run: not installed, no version matches, or a plugin it requires is disabled or
cannot run), modified (the binary no longer has the sha256 recorded at install or pinned
in the lock file: it will not be launched), lock unreadable (the lock file
~/.marina/plugins.lock cannot be read, so no installed plugin can be checked and run) or
shadowed (installed under the name of a built-in, which always wins). Exit status 1 when
any binary is modified or the lock file is unreadable. It reads the store's manifests,
checks each installed binary's sha256 (hashing it again only when the file changed since its
last hashing: same inode, size, mode, mtime and ctime) and starts no plugin. Like every command that resolves the
plugins, it first pins in the lock file the versions the config selects, when they changed.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			l, err := a.loadConfig()
			if err != nil {
				return err
			}
			entries, store, err := a.resolvePlugins(l)
			if err != nil {
				return err
			}
			list, problems, err := pluginset.List(entries, store)
			if err != nil {
				return err
			}
			if output == "json" || output == "yaml" {
				if err := PrintStructured(a.out, output, list); err != nil {
					return err
				}
			} else if err := WriteTable(a.out, list, output == "wide"); err != nil {
				return err
			}
			if len(problems) > 0 {
				return errors.New(strings.Join(problems, "\n"))
			}
			return nil
		},
	}
	OutputFlag(cmd, &output, "text", "text", "wide", "json", "yaml")
	return cmd
}
