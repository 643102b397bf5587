package migrate

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/config"
)

// renderConfig renders the keys of cfg listed in written (marina key ->
// comment naming where the value came from) as marina's config file: the
// typed struct marshalled, pruned to those keys, each documented by its
// schema doc like `marina config init` does (config.RenderKeys).
func renderConfig(cfg *config.Config, written map[string]string, source string) ([]byte, error) {
	from := "migrated from " + source + " by `marina migrate`."
	if source == "" {
		from = "migrated from klimax's defaults by `marina migrate` (there was no klimax config file)."
	}
	out, err := config.RenderKeys(cfg, written, strings.Join([]string{
		"marina configuration, " + from,
		"Only the settings that differ from marina's defaults are written (and vm.name); every",
		"other key has marina's default: `marina config view` shows them all, docs/config.md",
		"documents them, `marina config validate` checks this file.",
	}, "\n"))
	if err != nil {
		return nil, fmt.Errorf("render marina's config: %w", err)
	}
	return out, nil
}

// flatten maps every leaf of a YAML document to its value ("a.b[0].c" ->
// "x"); nil if it does not parse.
func flatten(data []byte) map[string]string {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil
	}
	out := map[string]string{}
	nodes := 0
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		if nodes++; nodes > maxNodes {
			return
		}
		n = deref(n)
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if path != "" {
					p = path + "." + p
				}
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			if len(n.Content) == 0 {
				out[path] = "[]"
			}
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		case yaml.ScalarNode:
			if path != "" && n.Tag != "!!null" {
				out[path] = n.Value
			}
		}
	}
	walk(&doc, "")
	return out
}

// WriteTable writes the plan as a table (WHAT FROM TO NOTE): every klimax
// key, then every step, then warnings. Paths under the home directory show
// as ~/...; passwords never appear.
func (p *Plan) WriteTable(w io.Writer) error {
	h := paths{home: p.Home}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tFROM\tTO\tNOTE")
	for _, k := range p.Keys {
		what, to := "key", k.MarinaKey
		if k.Status == KeyDropped {
			what, to = "not migrated", "-"
		}
		note := k.Value
		switch {
		case k.Status == KeyDropped && note != "":
			note += ": " + k.Note
		case k.Status == KeyDropped:
			note = k.Note
		case k.Note != "":
			note += " (" + k.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", what, k.KlimaxKey, to, note)
	}
	for _, s := range p.Steps {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.What(), dash(h.tilde(s.From)), dash(h.tilde(s.To)), joinNote(s.Action.Word(), s.Note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, warn := range p.Warnings {
		if _, err := fmt.Fprintf(w, "warning: %s\n", warn); err != nil {
			return err
		}
	}
	return nil
}

// Summary counts the steps by action, e.g. "2 to move, 1 to copy, 3 by hand".
func (p *Plan) Summary() string {
	counts := map[Action]int{}
	for _, s := range p.Steps {
		counts[s.Action]++
	}
	var parts []string
	for _, a := range []Action{ActionWrite, ActionMove, ActionCopy, ActionEdit, ActionDone, ActionSkip, ActionManual} {
		if n := counts[a]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, a.countWord()))
		}
	}
	if len(parts) == 0 {
		return "nothing to migrate"
	}
	return strings.Join(parts, ", ")
}

func (a Action) countWord() string {
	switch a {
	case ActionWrite:
		return "to write"
	case ActionMove:
		return "to move"
	case ActionCopy:
		return "to copy"
	case ActionEdit:
		return "to edit"
	case ActionDone:
		return "already done"
	case ActionSkip:
		return "skipped"
	case ActionManual:
		return "by hand"
	}
	return string(a)
}

// Word is how the action reads in a table.
func (a Action) Word() string {
	switch a {
	case ActionDone:
		return "already done"
	case ActionNone:
		return "nothing to do"
	case ActionKeep:
		return "kept as is"
	case ActionSkip:
		return "skipped"
	case ActionManual:
		return "by hand"
	}
	return string(a)
}

// What names the step in a table: its kind and the mirror, cluster or VM.
func (s Step) What() string {
	label := map[Kind]string{
		KindConfig: "config", KindRegistryCache: "registry cache", KindGuestCache: "guest cache",
		KindKubeconfig: "kubeconfig", KindContext: "context", KindVM: "VM", KindVMMount: "VM mount",
		KindVMContents: "VM contents", KindCluster: "cluster",
	}[s.Kind]
	if label == "" {
		label = string(s.Kind)
	}
	if s.Name != "" && s.Kind != KindVMMount && s.Kind != KindVMContents {
		label += " " + s.Name
	}
	return label
}

func joinNote(word, note string) string {
	if note == "" {
		return word
	}
	return word + ": " + note
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Line renders one step's outcome as a line of text, paths under home
// shown as ~/...
func (r StepResult) Line(home string) string {
	h := paths{home: home}
	text := r.Detail
	if text == "" {
		text = r.Note
	}
	if text == "" {
		text = dash(h.tilde(r.To))
	}
	return fmt.Sprintf("%-13s %s: %s", r.Outcome.Word(), r.What(), text)
}

// Word is how the outcome reads in a line of text.
func (o Outcome) Word() string {
	switch o {
	case OutcomeAlreadyDone:
		return "already done"
	case OutcomeNothing:
		return "nothing to do"
	case OutcomeManual:
		return "by hand"
	case OutcomeFailed:
		return "FAILED"
	}
	return string(o)
}

// Summary counts the outcomes, e.g. "3 done, 2 already done, 1 by hand".
func (r *Result) Summary() string {
	counts := map[Outcome]int{}
	for _, s := range r.Steps {
		counts[s.Outcome]++
	}
	var parts []string
	keys := []Outcome{OutcomeDone, OutcomeAlreadyDone, OutcomeSkipped, OutcomeManual, OutcomeFailed}
	for _, o := range keys {
		if n := counts[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(o.Word())))
		}
	}
	if len(parts) == 0 {
		return "nothing to migrate"
	}
	return strings.Join(parts, ", ")
}
