package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/bcollard/marina/core/atomicfile"
)

// Kinds of kubeconfig entries, as Entry.Kind reports them.
const (
	KindCluster        = "cluster"
	KindContext        = "context"
	KindUser           = "user"
	KindCurrentContext = "current-context"
)

// entryKinds are the named entry kinds, in the order they are reported.
var entryKinds = []string{KindContext, KindCluster, KindUser}

// maxAttempts bounds how often Merge and Remove re-plan when the set of
// files to change moved between planning and locking.
const maxAttempts = 5

// MergeOptions controls Merge.
type MergeOptions struct {
	// SetCurrent also makes the cluster's context the current context.
	SetCurrent bool
	// Overwrite replaces entries of the same name that marina did not write
	// (they lack the Marker extension) instead of failing with
	// *ConflictError. The replaced entries are kept in the file's state
	// file (see StateSuffix), and Remove puts them back; the file is also
	// backed up like for any change.
	Overwrite bool
	// UpdateOnly changes nothing unless marina's context for the cluster is
	// already in the target: for refreshing a cluster's entries after its
	// address changed without adding them where the user removed them.
	UpdateOnly bool
}

// Entry names one kubeconfig entry and the file that holds it.
type Entry struct {
	// Kind is KindCluster, KindContext, KindUser or KindCurrentContext.
	Kind string `json:"kind"`
	// Name is the entry's name (for KindCurrentContext, the context named).
	Name string `json:"name"`
	// File is the kubeconfig file that holds the entry.
	File string `json:"file"`
}

// String renders e as `context "dev" in /home/u/.kube/config`.
func (e Entry) String() string {
	return fmt.Sprintf("%s %q in %s", e.Kind, e.Name, e.File)
}

// Report says what Merge or Remove did.
type Report struct {
	// Changed lists the entries added, updated or removed (for
	// current-context: set, restored or cleared), in file precedence order.
	// Only entries of files that were written: after an error, what is
	// listed happened and nothing else did.
	Changed []Entry `json:"changed"`
	// Written lists the files rewritten, in precedence order. Empty when
	// everything was already as asked.
	Written []string `json:"written"`
	// Backups lists the backup files this call wrote.
	Backups []string `json:"backups,omitempty"`
	// Replaced lists the user's own entries that Merge with Overwrite
	// replaced; they are kept in <file>.marina.state until Remove puts
	// them back.
	Replaced []Entry `json:"replaced,omitempty"`
	// Restored lists what Remove put back: the user's entries that an
	// overwrite had replaced, and the current-context (Name is the context)
	// that was set before marina made the cluster's context current.
	Restored []Entry `json:"restored,omitempty"`
	// Skipped lists entries named after the cluster that Remove left
	// alone because marina did not write them.
	Skipped []Entry `json:"skipped,omitempty"`
	// Warnings says what a rewrite dropped: fields a file had that the
	// kubeconfig format does not define (typos, or fields of another tool),
	// which clientcmd, like kubectl config, does not keep.
	Warnings []string `json:"warnings,omitempty"`
}

// normalized returns r with empty rather than nil lists, so that JSON
// shows [] for "nothing".
func (r Report) normalized() Report {
	if r.Changed == nil {
		r.Changed = []Entry{}
	}
	if r.Written == nil {
		r.Written = []string{}
	}
	return r
}

// ConflictError is returned by Merge when entries named after the cluster
// exist but were not written by marina (they lack the Marker extension).
type ConflictError struct {
	// Name is the cluster name.
	Name string
	// Entries are the conflicting entries.
	Entries []Entry
}

// Error names each conflicting entry and the ways out.
func (e *ConflictError) Error() string {
	parts := make([]string, len(e.Entries))
	var fixes []string
	for i, en := range e.Entries {
		parts[i] = en.String()
		switch en.Kind {
		case KindContext:
			fixes = append(fixes, fmt.Sprintf("kubectl config rename-context %s %s-old", en.Name, en.Name))
		case KindCluster:
			fixes = append(fixes, "kubectl config delete-cluster "+en.Name)
		case KindUser:
			fixes = append(fixes, "kubectl config delete-user "+en.Name)
		}
	}
	verb, them := "exist and were", "them"
	if len(e.Entries) == 1 {
		verb, them = "exists and was", "it"
	}
	return fmt.Sprintf("cannot merge cluster %q: %s already %s not written by marina (no %s extension); rename or delete %s (%s), or overwrite %s (marina kubeconfig merge --overwrite %s)",
		e.Name, strings.Join(parts, ", "), verb, Marker, them, strings.Join(fixes, "; "), them, e.Name)
}

// Merge adds or updates the context, cluster and user named name in the
// target, taken from cfg (typically the per-cluster kubeconfig, already
// Renamed): cfg must have a context called name; its cluster and user are
// copied under name as well, marked as marina's. Which file gets each entry
// is kubectl's rule (see Target). Every other entry, extension and
// preference of the target's files is kept.
//
// An existing entry of the same name that marina did not write is not
// replaced: Merge fails with *ConflictError unless opts.Overwrite. Merge
// waits for other marina processes and for kubectl (see the package doc)
// until ctx is done or a bounded time passes. A file whose content would not
// change is not rewritten.
func Merge(ctx context.Context, t Target, cfg *clientcmdapi.Config, name string, opts MergeOptions) (Report, error) {
	if err := ValidateName(name); err != nil {
		return Report{}, err
	}
	want, err := entriesFor(cfg, name)
	if err != nil {
		return Report{}, err
	}
	return t.transact(ctx, func(v *view) (Report, error) {
		return planMerge(v, want, name, opts)
	})
}

// Remove deletes the context, cluster and user named exactly name from
// every file of the target, if marina wrote them (entries without the Marker
// are left alone and listed in Report.Skipped), and undoes what Merge
// replaced: the user's own entries that an overwrite replaced are put back
// (unless another entry of that name has appeared since: then they stay in
// the state file and a warning says so), and where current-context names
// the cluster's context it goes back to what it was before Merge with
// SetCurrent changed it, if that context still exists, or else is cleared
// unless a context of that name remains. Nothing else changes: a context of
// the user's own that uses marina's cluster or user stays, and no longer
// works once they are gone. Removing what is not there is not an error.
func Remove(ctx context.Context, t Target, name string) (Report, error) {
	if err := ValidateName(name); err != nil {
		return Report{}, err
	}
	return t.transact(ctx, func(v *view) (Report, error) {
		return planRemove(v, name), nil
	})
}

// entriesFor returns a config holding only marina's three entries for name,
// built from cfg and normalised through clientcmd's serialisation so that
// it compares equal to the same entries loaded from a file.
func entriesFor(cfg *clientcmdapi.Config, name string) (*clientcmdapi.Config, error) {
	if cfg == nil {
		return nil, fmt.Errorf("merge cluster %q: the kubeconfig is nil", name)
	}
	kctx, ok := cfg.Contexts[name]
	if !ok {
		return nil, fmt.Errorf("merge cluster %q: its kubeconfig has no context %q (it has %v); rename kind's entries first (kubeconfig.Rename)", name, name, sortedKeys(cfg.Contexts))
	}
	cluster, ok := cfg.Clusters[kctx.Cluster]
	if !ok {
		return nil, fmt.Errorf("merge cluster %q: context %q refers to cluster %q, which its kubeconfig does not have (it has %v)", name, name, kctx.Cluster, sortedKeys(cfg.Clusters))
	}
	user, ok := cfg.AuthInfos[kctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("merge cluster %q: context %q refers to user %q, which its kubeconfig does not have (it has %v)", name, name, kctx.AuthInfo, sortedKeys(cfg.AuthInfos))
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[name] = cluster.DeepCopy()
	out.AuthInfos[name] = user.DeepCopy()
	c := kctx.DeepCopy()
	c.Cluster, c.AuthInfo = name, name
	out.Contexts[name] = c
	// Relative certificate and key paths are relative to the file they were
	// read from; make them absolute before they move to another file.
	if err := clientcmd.ResolveLocalPaths(out); err != nil {
		return nil, fmt.Errorf("merge cluster %q: resolve file paths in its kubeconfig: %w", name, err)
	}
	out.Clusters[name].LocationOfOrigin = ""
	out.AuthInfos[name].LocationOfOrigin = ""
	out.Contexts[name].LocationOfOrigin = ""
	mark(&out.Clusters[name].Extensions)
	mark(&out.AuthInfos[name].Extensions)
	mark(&out.Contexts[name].Extensions)
	data, err := clientcmd.Write(*out)
	if err != nil {
		return nil, fmt.Errorf("merge cluster %q: serialise its entries: %w", name, err)
	}
	norm, err := clientcmd.Load(data)
	if err != nil {
		return nil, fmt.Errorf("merge cluster %q: reload its entries: %w", name, err)
	}
	return norm, nil
}

// planMerge applies Merge to the loaded files in v.
func planMerge(v *view, want *clientcmdapi.Config, name string, opts MergeOptions) (Report, error) {
	if opts.UpdateOnly {
		f := v.origin(KindContext, name)
		if f == nil {
			return Report{}, nil
		}
		if ext, _ := entryExt(f.cfg, KindContext, name); !IsMarina(ext) {
			return Report{}, nil
		}
	}
	def := v.defaultFile()
	dest := map[string]*file{}
	var conflicts, replaced []Entry
	for _, k := range entryKinds {
		f := v.origin(k, name)
		if f == nil {
			dest[k] = def
			continue
		}
		dest[k] = f
		if ext, _ := entryExt(f.cfg, k, name); !IsMarina(ext) {
			e := Entry{Kind: k, Name: name, File: f.path}
			if opts.Overwrite {
				replaced = append(replaced, e)
			} else {
				conflicts = append(conflicts, e)
			}
		}
	}
	if len(conflicts) > 0 {
		return Report{}, &ConflictError{Name: name, Entries: conflicts}
	}
	// Merge only adds to the state files: write them before the kubeconfig,
	// so that a failure in between loses no user entry.
	v.stateFirst = true
	var rep Report
	for _, e := range replaced {
		f := dest[e.Kind]
		setEntry(f.state.cluster(name).entries, f.cfg, e.Kind, name)
		f.stateDirty = true
		rep.Replaced = append(rep.Replaced, e)
	}
	for _, k := range entryKinds {
		if setEntry(dest[k].cfg, want, k, name) {
			dest[k].dirty = true
			rep.Changed = append(rep.Changed, Entry{Kind: k, Name: name, File: dest[k].path})
		}
	}
	if opts.SetCurrent && v.currentContext() != name {
		if prev := def.cfg.CurrentContext; prev != name {
			def.state.cluster(name).PreviousCurrentContext = &prev
			def.stateDirty = true
		}
		def.cfg.CurrentContext = name
		def.dirty = true
		rep.Changed = append(rep.Changed, Entry{Kind: KindCurrentContext, Name: name, File: def.path})
	}
	v.sortEntries(rep.Changed)
	v.sortEntries(rep.Replaced)
	return rep, nil
}

// planRemove applies Remove to the loaded files in v.
func planRemove(v *view, name string) Report {
	var rep Report
	removedContext := false
	for _, f := range v.files {
		for _, k := range entryKinds {
			ext, ok := entryExt(f.cfg, k, name)
			if !ok {
				continue
			}
			e := Entry{Kind: k, Name: name, File: f.path}
			if !IsMarina(ext) {
				rep.Skipped = append(rep.Skipped, e)
				continue
			}
			deleteEntry(f.cfg, k, name)
			f.dirty = true
			rep.Changed = append(rep.Changed, e)
			removedContext = removedContext || k == KindContext
		}
	}
	restoredContext := restoreEntries(v, name, &rep)
	// current-context: back to what it was before marina set it, or cleared
	// when it would name a context that is gone. A context of that name
	// that is the user's (and was not put back here) is left current.
	owned := removedContext || restoredContext || v.origin(KindContext, name) == nil
	for _, f := range v.files {
		if f.cfg.CurrentContext != name || !owned {
			continue
		}
		var prev *string
		if s := f.state.Clusters[name]; s != nil {
			prev = s.PreviousCurrentContext
		}
		switch {
		case prev != nil && *prev != name && (*prev == "" || v.origin(KindContext, *prev) != nil):
			f.cfg.CurrentContext = *prev
		case v.origin(KindContext, name) == nil:
			f.cfg.CurrentContext = ""
		default:
			continue
		}
		f.dirty = true
		rep.Changed = append(rep.Changed, Entry{Kind: KindCurrentContext, Name: name, File: f.path})
		if f.cfg.CurrentContext != "" {
			rep.Restored = append(rep.Restored, Entry{Kind: KindCurrentContext, Name: f.cfg.CurrentContext, File: f.path})
		}
	}
	// Forget the previous current-context: the cluster is gone. A record of
	// another cluster that points at this one's context now points at what
	// this one's pointed at, so removing that one later restores a context
	// that exists.
	for _, f := range v.files {
		s := f.state.Clusters[name]
		if s == nil || s.PreviousCurrentContext == nil {
			continue
		}
		for other, o := range f.state.Clusters {
			if other != name && o.PreviousCurrentContext != nil && *o.PreviousCurrentContext == name {
				prev := *s.PreviousCurrentContext
				o.PreviousCurrentContext = &prev
			}
		}
		s.PreviousCurrentContext = nil
		f.stateDirty = true
	}
	v.sortEntries(rep.Changed)
	v.sortEntries(rep.Restored)
	return rep
}

// restoreEntries puts back, in the file that had them, the user's entries
// named name that an overwrite replaced, where no entry of that kind and
// name is left in any file, and forgets them in the state. An entry of that
// name that appeared since is not replaced: the saved one stays in the
// state, with a warning. It reports whether it put back a context.
func restoreEntries(v *view, name string, rep *Report) bool {
	restoredContext := false
	for _, f := range v.files {
		s := f.state.Clusters[name]
		if s == nil {
			continue
		}
		for _, k := range entryKinds {
			if _, ok := entryExt(s.entries, k, name); !ok {
				continue
			}
			switch cur := v.origin(k, name); {
			case cur == nil:
				setEntry(f.cfg, s.entries, k, name)
				f.dirty = true
				rep.Restored = append(rep.Restored, Entry{Kind: k, Name: name, File: f.path})
				restoredContext = restoredContext || k == KindContext
			case sameEntry(cur.cfg, s.entries, k, name):
				// Already back: a run whose state update failed after it
				// restored the entry, or a merge whose write failed.
			default:
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("did not put back your %s %q that marina replaced in %s: %s holds a %s of that name now; the one marina replaced stays in %s, copy it from there if you want it back",
					k, name, f.path, cur.path, k, f.real+StateSuffix))
				continue
			}
			deleteEntry(s.entries, k, name)
			f.stateDirty = true
		}
	}
	return restoredContext
}

// entryExt returns the extensions of the entry of kind k named name in cfg,
// and whether the entry exists.
func entryExt(cfg *clientcmdapi.Config, k, name string) (map[string]runtime.Object, bool) {
	switch k {
	case KindCluster:
		if e, ok := cfg.Clusters[name]; ok {
			return e.Extensions, true
		}
	case KindContext:
		if e, ok := cfg.Contexts[name]; ok {
			return e.Extensions, true
		}
	case KindUser:
		if e, ok := cfg.AuthInfos[name]; ok {
			return e.Extensions, true
		}
	}
	return nil, false
}

// deleteEntry removes the entry of kind k named name from cfg.
func deleteEntry(cfg *clientcmdapi.Config, k, name string) {
	switch k {
	case KindCluster:
		delete(cfg.Clusters, name)
	case KindContext:
		delete(cfg.Contexts, name)
	case KindUser:
		delete(cfg.AuthInfos, name)
	}
}

// sameEntry reports whether the entries of kind k named name in a and b
// are equal, ignoring where they were loaded from.
func sameEntry(a, b *clientcmdapi.Config, k, name string) bool {
	c := a.DeepCopy()
	return !setEntry(c, b, k, name)
}

// setEntry copies the entry of kind k named name from want, which must have
// it, into cfg and reports whether that changed cfg.
func setEntry(cfg, want *clientcmdapi.Config, k, name string) bool {
	switch k {
	case KindCluster:
		return setIfChanged(cfg.Clusters, name, want.Clusters[name].DeepCopy(), func(e *clientcmdapi.Cluster) *string { return &e.LocationOfOrigin })
	case KindContext:
		return setIfChanged(cfg.Contexts, name, want.Contexts[name].DeepCopy(), func(e *clientcmdapi.Context) *string { return &e.LocationOfOrigin })
	case KindUser:
		return setIfChanged(cfg.AuthInfos, name, want.AuthInfos[name].DeepCopy(), func(e *clientcmdapi.AuthInfo) *string { return &e.LocationOfOrigin })
	}
	return false
}

// setIfChanged stores e under name in m unless an equal entry (ignoring
// where it was loaded from) is there, and reports whether it stored it.
func setIfChanged[E interface{ DeepCopy() E }](m map[string]E, name string, e E, origin func(E) *string) bool {
	*origin(e) = ""
	if old, ok := m[name]; ok {
		cmp := old.DeepCopy()
		*origin(cmp) = ""
		if reflect.DeepEqual(cmp, e) {
			return false
		}
	}
	m[name] = e
	return true
}

// file is one kubeconfig file of a Target as loaded for a change.
type file struct {
	path   string // as the Target names it
	real   string // resolved (resolvePath): what locks, backups, state are named after
	exists bool
	raw    []byte // content as read, for the backup
	cfg    *clientcmdapi.Config
	dirty  bool
	// unknown lists fields of the file that the kubeconfig format does not
	// define; a rewrite drops them.
	unknown []string
	// state is what marina replaced in the file (see StateSuffix);
	// stateDirty says it changed.
	state      *state
	stateDirty bool
}

// view is the Target's files as loaded, in precedence order.
type view struct {
	files []*file
	// stateFirst writes the state files before the kubeconfig files (the
	// plan only adds to them); otherwise after (it only forgets).
	stateFirst bool
}

// loadView reads every file of paths, and marina's state for it. A missing
// file is an empty config; a file that does not parse is an error (marina
// does not rewrite what it cannot read, and kubectl would fail on it too).
// A later name of a file already listed (a symlink to it, say) is left out:
// the first one takes precedence for everything anyway.
func loadView(paths []string) (*view, error) {
	v := &view{}
	seen := map[string]bool{}
	for _, p := range paths {
		real, err := resolvePath(p)
		if err != nil {
			return nil, err
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		f := &file{path: p, real: real, cfg: clientcmdapi.NewConfig()}
		if f.state, err = loadState(real + StateSuffix); err != nil {
			return nil, err
		}
		raw, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, fmt.Errorf("read kubeconfig %s: %w", p, err)
		default:
			f.exists, f.raw = true, raw
			cfg, err := clientcmd.Load(raw)
			if err != nil {
				return nil, fmt.Errorf("read kubeconfig %s: %w; fix the file (marina does not rewrite a kubeconfig it cannot parse) or take it out of $KUBECONFIG", p, err)
			}
			f.cfg = cfg
			f.unknown = unknownFields(raw)
		}
		v.files = append(v.files, f)
	}
	return v, nil
}

// unknownFields lists the fields of a kubeconfig file that are not part of
// the kubeconfig format (clientcmd's v1 Config), by path, e.g.
// `unknown field "users[2].user.token-file"`. Extensions may hold anything
// and are kept, so they never show up here.
func unknownFields(raw []byte) []string {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil // clientcmd parsed it; nothing more to learn here
	}
	strict, err := sigsjson.UnmarshalStrict(j, &clientcmdv1.Config{})
	if err != nil {
		return nil
	}
	out := make([]string, len(strict))
	for i, e := range strict {
		out[i] = e.Error()
	}
	return out
}

// origin returns the first file that defines the entry of kind k named
// name (the definition kubectl uses), or nil.
func (v *view) origin(k, name string) *file {
	for _, f := range v.files {
		if _, ok := entryExt(f.cfg, k, name); ok {
			return f
		}
	}
	return nil
}

// defaultFile is Target.DefaultFile on this snapshot.
func (v *view) defaultFile() *file {
	paths := make([]string, len(v.files))
	exists := make([]bool, len(v.files))
	for i, f := range v.files {
		paths[i], exists[i] = f.path, f.exists
	}
	def := defaultFile(paths, exists)
	for _, f := range v.files {
		if f.path == def {
			return f
		}
	}
	return v.files[len(v.files)-1]
}

// currentContext is the effective current-context: the first file that
// sets one wins, as in kubectl.
func (v *view) currentContext() string {
	for _, f := range v.files {
		if f.cfg.CurrentContext != "" {
			return f.cfg.CurrentContext
		}
	}
	return ""
}

// dirtyFiles lists the files to rewrite: their content or their state.
func (v *view) dirtyFiles() []*file {
	var out []*file
	for _, f := range v.files {
		if f.dirty || f.stateDirty {
			out = append(out, f)
		}
	}
	return out
}

// sortEntries orders entries by file precedence, then kind, stably.
func (v *view) sortEntries(es []Entry) {
	rank := map[string]int{}
	for i, f := range v.files {
		rank[f.path] = i
	}
	slices.SortStableFunc(es, func(a, b Entry) int { return rank[a.File] - rank[b.File] })
}

// transact runs plan on the target's files under the locks of the files it
// changes and writes the changed files. Planning happens once without locks
// to learn which files to lock, then again under the locks on a fresh read;
// if the second plan wants a file the first did not, it starts over.
func (t Target) transact(ctx context.Context, plan func(*view) (Report, error)) (Report, error) {
	if len(t.Files) == 0 {
		return Report{}, errors.New("no kubeconfig file to change: the target lists none; use DefaultTarget or NewTarget")
	}
	for range maxAttempts {
		v, err := loadView(t.Files)
		if err != nil {
			return Report{}, err
		}
		rep, err := plan(v)
		if err != nil {
			return Report{}, err
		}
		dirty := v.dirtyFiles()
		if len(dirty) == 0 {
			return rep.normalized(), nil
		}
		unlock, locked, err := lockFiles(ctx, dirty)
		if err != nil {
			return Report{}, err
		}
		rep, ok, err := func() (Report, bool, error) {
			defer unlock()
			v, err := loadView(t.Files)
			if err != nil {
				return Report{}, false, err
			}
			rep, err := plan(v)
			if err != nil {
				return Report{}, false, err
			}
			for _, f := range v.dirtyFiles() {
				if !locked[f.real] {
					return Report{}, false, nil
				}
			}
			err = t.write(v, &rep)
			if err != nil {
				rep = rep.onlyWritten()
			}
			return rep, true, err
		}()
		if ok || err != nil {
			return rep.normalized(), err
		}
	}
	return Report{}, fmt.Errorf("the kubeconfig files %v kept changing while marina was locking them; try again", t.Files)
}

// write backs up (once per run) and atomically rewrites v's changed files
// and their state files, recording what it did in rep.
func (t Target) write(v *view, rep *Report) error {
	for _, f := range v.files {
		if f.stateDirty && v.stateFirst {
			if err := f.state.write(f.real + StateSuffix); err != nil {
				return err
			}
		}
		if f.dirty {
			if err := t.writeFile(f, rep); err != nil {
				return err
			}
		}
		if f.stateDirty && !v.stateFirst {
			if err := f.state.write(f.real + StateSuffix); err != nil {
				return fmt.Errorf("%w (%s itself is written)", err, f.path)
			}
		}
	}
	return nil
}

// writeFile backs f up unless this run already did, and rewrites it.
func (t Target) writeFile(f *file, rep *Report) error {
	bak, done := t.backup(f.real)
	if !done {
		if f.exists {
			var warnings []string
			var err error
			bak, warnings, err = writeBackup(f.real, f.raw)
			if err != nil {
				return err
			}
			rep.Backups = append(rep.Backups, bak)
			rep.Warnings = append(rep.Warnings, warnings...)
		}
		t.backedUp(f.real, bak)
	}
	data, err := clientcmd.Write(*f.cfg)
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: serialise: %w", f.path, err)
	}
	if !f.exists {
		if err := os.MkdirAll(filepath.Dir(f.real), 0o700); err != nil {
			return fmt.Errorf("write kubeconfig %s: create directory: %w", f.path, err)
		}
	}
	if err := atomicfile.WriteFile(f.real, data, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", f.path, err)
	}
	rep.Written = append(rep.Written, f.path)
	if len(f.unknown) > 0 {
		keeps := "the previous content is lost"
		if bak != "" {
			keeps = bak + " keeps the previous content"
		}
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: the rewrite dropped content the kubeconfig format does not define (%s), as kubectl config would; %s",
			f.path, strings.Join(f.unknown, ", "), keeps))
	}
	return nil
}

// onlyWritten returns r without the entries of files it did not write:
// after a failed write, the report says what happened and nothing else.
func (r Report) onlyWritten() Report {
	keep := func(es []Entry) []Entry {
		var out []Entry
		for _, e := range es {
			if slices.Contains(r.Written, e.File) {
				out = append(out, e)
			}
		}
		return out
	}
	r.Changed, r.Replaced, r.Restored = keep(r.Changed), keep(r.Replaced), keep(r.Restored)
	return r
}
