package pluginset

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/core/pluginstore"
	"github.com/bcollard/marina/sdk"
)

// Row is one line of `plugin list`. Its JSON and YAML field names are the
// `plugin list -o json|yaml` contract.
type Row struct {
	Name         string   `json:"name" yaml:"name"`
	Version      string   `json:"version" yaml:"version"`
	Source       string   `json:"source" yaml:"source"`
	Protocol     string   `json:"protocol" yaml:"protocol"`
	Hooks        []string `json:"hooks" yaml:"hooks"`
	Dependencies []string `json:"dependencies" yaml:"dependencies"`
	Status       string   `json:"status" yaml:"status"`
	Detail       string   `json:"detail,omitempty" yaml:"detail,omitempty"`
	SHA256       string   `json:"sha256,omitempty" yaml:"sha256,omitempty"`
	Path         string   `json:"path,omitempty" yaml:"path,omitempty"`
	// Signature is the installed build's signature checked against
	// pluginTrust.keys: "signed by NAME", "unsigned", "untrusted (...)",
	// "invalid (...)"; empty for built-ins.
	Signature string `json:"signature,omitempty" yaml:"signature,omitempty"`
}

// The statuses of a Row.
const (
	// StatusActive: enabled and selected by the config's version constraint.
	StatusActive = "active"
	// StatusInstalled: another version is selected, or the plugin is not enabled.
	StatusInstalled = "installed"
	// StatusDisabled: built in or named in the config, and not enabled.
	StatusDisabled = "disabled"
	// StatusUnavailable: enabled but cannot run (not installed, no version
	// matches, a plugin it requires cannot run, its binary cannot be checked).
	StatusUnavailable = "unavailable"
	// StatusModified: the binary no longer has the sha256 recorded at
	// install or pinned in the lock file; it will not be launched.
	StatusModified = "modified"
	// StatusLockUnreadable: the lock file cannot be read, so no active
	// installed plugin can be checked before a launch.
	StatusLockUnreadable = "lock unreadable"
	// StatusShadowed: installed under the name of a built-in, which always wins.
	StatusShadowed = "shadowed"
)

// InsecureSourceMark is what List appends to the source of an https
// install made without a checksum.
const InsecureSourceMark = " [checksum skipped at install]"

// List joins the plugin set entries (Resolve of the effective config) with
// the installs of store, and checks every installed binary against its
// manifest, the lock file and the signature policy. There is a row for
// every entry (one per installed version of an installed plugin), for
// every install of a built-in's name (shadowed) and for every install the
// config does not name. problems (one line each) are what makes `plugin
// list` fail: a modified binary or an unreadable lock file.
func List(entries []Entry, store *pluginstore.Store) (rows []Row, problems []string, err error) {
	installed, err := store.List()
	if err != nil {
		return nil, nil, err
	}
	byName := map[string][]pluginstore.Installed{}
	for _, inst := range installed {
		byName[inst.Name] = append(byName[inst.Name], inst)
	}
	// An enabled plugin whose dependencies cannot run is not active: no
	// run could start it (the dispatcher refuses the graph).
	depProblems := DependencyProblems(entries)
	unlessDeps := func(r *Row, name string) {
		if msg := depProblems[name]; msg != "" && r.Status == StatusActive {
			r.Status, r.Detail = StatusUnavailable, msg
		}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.Name] = true
		if e.Builtin {
			r := describeRow(e.Description, "built-in", "")
			r.Status = statusOf(e, true)
			r.Detail = e.Problem
			unlessDeps(&r, e.Name)
			rows = append(rows, r)
			// Installed before installs of built-in names were refused: never run.
			for _, inst := range byName[e.Name] {
				r := installedRow(inst)
				r.Status, r.Detail = StatusShadowed, fmt.Sprintf("a plugin built into marina has this name and always wins; remove this one with `marina plugin remove %s@%s`", inst.Name, inst.Version)
				rows = append(rows, r)
			}
			continue
		}
		if len(byName[e.Name]) == 0 {
			rows = append(rows, Row{Name: e.Name, Source: "-", Status: statusOf(e, false), Detail: e.Problem, Hooks: []string{}, Dependencies: []string{}})
			continue
		}
		for _, inst := range byName[e.Name] {
			selected := e.Installed != nil && e.Installed.Version == inst.Version
			r := installedRow(inst)
			r.Status = statusOf(e, selected)
			if selected || e.Installed == nil {
				r.Detail = e.Problem
			}
			unlessDeps(&r, e.Name)
			rows = append(rows, r)
		}
	}
	for _, inst := range installed {
		if !seen[inst.Name] {
			r := installedRow(inst)
			r.Status, r.Detail = StatusInstalled, "not in the config; enable it with `marina plugin enable "+inst.Name+"`"
			rows = append(rows, r)
		}
	}
	problems = verifyRows(store, rows)
	return rows, problems, nil
}

// verifyRows checks the binary of every installed row against the sha256
// recorded at install and pinned in the lock file, marks the rows that
// fail, and returns one line per problem. An unreadable lock file marks the
// active installed plugins (nothing can check them before a launch, so no
// run can use them) and is a problem itself.
func verifyRows(store *pluginstore.Store, rows []Row) []string {
	var problems []string
	lf, lockErr := store.ReadLock()
	if lockErr != nil {
		problems = append(problems, fmt.Sprintf("lock file unreadable: %v", lockErr))
	}
	results, err := store.ListInstalls(lf) // lf is nil when unreadable: manifests only
	if err != nil {
		problems = append(problems, err.Error())
	}
	byPath := map[string]error{}
	trust := map[string]pluginsign.Result{}
	for _, res := range results {
		if res.Installed.Path != "" {
			byPath[res.Installed.Path] = res.Err
			trust[res.Installed.Path] = store.TrustOf(&res.Installed)
		}
	}
	for i := range rows {
		r := &rows[i]
		if r.Path == "" {
			continue
		}
		switch err := byPath[r.Path]; {
		case errors.Is(err, pluginstore.ErrModified) || errors.Is(err, pluginstore.ErrLockMismatch):
			r.Status, r.Detail = StatusModified, err.Error()
			problems = append(problems, about(*r, err))
		case err != nil:
			if r.Status == StatusActive {
				r.Status = StatusUnavailable
			}
			r.Detail = err.Error()
			problems = append(problems, about(*r, err))
		case lockErr != nil && r.Status == StatusActive:
			r.Status, r.Detail = StatusLockUnreadable, lockErr.Error()
		}
		// Under pluginTrust.policy warn, what enforce would refuse is
		// flagged: a signature that is invalid or by an untrusted key, and
		// an unsigned build once the user trusts some key.
		if t, ok := trust[r.Path]; ok {
			r.Signature = t.String()
			flag := t.Status == pluginsign.Invalid || t.Status == pluginsign.Untrusted ||
				t.Status == pluginsign.Unsigned && len(store.Trust.Keys) > 0
			if flag && r.Detail == "" {
				r.Detail = "signature: " + t.String()
			}
		}
	}
	return problems
}

// statusOf is the status of a row of entry e: selected says the row is the
// version e selects (always true for a built-in).
func statusOf(e Entry, selected bool) string {
	switch {
	case !e.Enabled:
		return StatusDisabled
	case e.Problem != "" && selected:
		return StatusUnavailable
	case e.Problem != "" && e.Installed == nil:
		return StatusUnavailable
	case selected:
		return StatusActive
	default:
		return StatusInstalled
	}
}

// installedRow is the row of an installed version, its status not yet set.
func installedRow(inst pluginstore.Installed) Row {
	r := describeRow(inst.Description, inst.Source, inst.SHA256)
	r.Name, r.Version, r.Path = inst.Name, inst.Version, inst.Path
	if inst.InsecureSkipChecksum {
		r.Source += InsecureSourceMark
	}
	return r
}

// describeRow is the row of a plugin described by d (nil: no description),
// installed from source ("built-in" for the built-ins) with sha256 sum.
func describeRow(d *sdk.Description, source, sum string) Row {
	if d == nil {
		return Row{Source: source, SHA256: sum, Hooks: []string{}, Dependencies: []string{}}
	}
	r := rowOf(d, source)
	r.SHA256 = sum
	return r
}

// rowOf is the row of a plugin described by d, installed from source, its
// status not yet set. An optional dependency is marked with "?".
func rowOf(d *sdk.Description, source string) Row {
	r := Row{Name: d.Name, Version: d.Version, Source: source, Protocol: d.Protocol, Hooks: []string{}, Dependencies: []string{}}
	for _, h := range d.Hooks {
		r.Hooks = append(r.Hooks, string(h))
	}
	for _, dep := range d.Dependencies {
		name := dep.Name
		if dep.Optional {
			name += "?"
		}
		r.Dependencies = append(r.Dependencies, name)
	}
	return r
}

// about is err as a problem line about row r: the store's messages name the
// plugin and version already ("plugin acme 1.1.0: binary ... was modified
// after install"); others get them in front.
func about(r Row, err error) string {
	msg := err.Error()
	if strings.HasPrefix(msg, fmt.Sprintf("plugin %s %s", r.Name, r.Version)) {
		return msg
	}
	return fmt.Sprintf("plugin %s %s: %s", r.Name, r.Version, msg)
}
