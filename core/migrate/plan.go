package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/exitcode"
	"github.com/bcollard/marina/core/kubeconfig"
	"github.com/bcollard/marina/core/userfile"
)

// Options say where to read from and write to.
type Options struct {
	// ConfigPath is marina's config file to write; "" means
	// <home>/.marina/config.yaml.
	ConfigPath string
	// KlimaxConfig is klimax's config file; "" means <home>/.klimax/config.yaml.
	KlimaxConfig string
	// Force replaces an existing marina config that differs from the
	// migrated one; the old file is kept as <ConfigPath>.bak.
	Force bool
	// KubeconfigFiles are the files kubectl loads, searched for the
	// contexts klimax merged; nil means $KUBECONFIG's list, else
	// <home>/.kube/config.
	KubeconfigFiles []string
}

// KeyStatus says what became of one klimax key.
type KeyStatus string

// The key statuses.
const (
	// KeyWritten: the value is carried over and written to marina's config.
	KeyWritten KeyStatus = "written"
	// KeyDefault: the value is marina's default too; nothing to write.
	KeyDefault KeyStatus = "default"
	// KeyMarinaDefault: klimax's value is not kept and marina's default
	// applies; the note says why.
	KeyMarinaDefault KeyStatus = "marina-default"
	// KeyDropped: the key is not carried over; the note says why.
	KeyDropped KeyStatus = "not-migrated"
)

// KeyMapping is one klimax key and what it becomes in marina's config.
type KeyMapping struct {
	KlimaxKey string `json:"klimaxKey"`
	// MarinaKey is empty for a key that is not migrated.
	MarinaKey string    `json:"marinaKey,omitempty"`
	Status    KeyStatus `json:"status"`
	// Value is the value marina uses (for a dropped key: klimax's value).
	// Passwords show as "(set)" and are never part of it.
	Value string `json:"value"`
	Note  string `json:"note,omitempty"`
}

// Kind is what a step is about.
type Kind string

// The step kinds.
const (
	KindConfig        Kind = "config"
	KindRegistryCache Kind = "registry-cache"
	KindGuestCache    Kind = "guest-cache"
	KindKubeconfig    Kind = "kubeconfig"
	KindContext       Kind = "context"
	KindVM            Kind = "vm"
	KindVMMount       Kind = "vm-mount"
	KindVMContents    Kind = "vm-contents"
	KindCluster       Kind = "cluster"
)

// Action is what Apply does for a step.
type Action string

// The actions. Only write, move, copy and edit change anything.
const (
	ActionWrite  Action = "write"
	ActionMove   Action = "move"
	ActionCopy   Action = "copy"
	ActionEdit   Action = "edit"
	ActionDone   Action = "done"   // already done by an earlier run
	ActionNone   Action = "none"   // nothing there to migrate
	ActionKeep   Action = "keep"   // left as it is, on purpose
	ActionSkip   Action = "skip"   // what is there conflicts; left alone
	ActionManual Action = "manual" // the user must act; the note says how
)

// Changes reports whether the action changes files.
func (a Action) Changes() bool {
	return a == ActionWrite || a == ActionMove || a == ActionCopy || a == ActionEdit
}

// Step is one thing the migration does or reports.
type Step struct {
	Kind Kind `json:"kind"`
	// Name is the mirror, cluster or VM the step is about.
	Name   string `json:"name,omitempty"`
	Action Action `json:"action"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Note   string `json:"note,omitempty"`
}

// VMState is what the files say about klimax's VM.
type VMState string

// The VM states.
const (
	VMAbsent  VMState = "absent"  // no klimax VM
	VMStopped VMState = "stopped" // no Lima process runs for it
	VMRunning VMState = "running" // a pid file names a live process
	VMUnknown VMState = "unknown" // a pid file cannot be read
	VMBroken  VMState = "broken"  // a directory that is not a Lima instance
	VMAdopted VMState = "adopted" // already moved to marina's LIMA_HOME
)

// VMInfo describes klimax's VM.
type VMInfo struct {
	Name string `json:"name"`
	// Dir is klimax's instance directory, Target marina's.
	Dir    string  `json:"dir"`
	Target string  `json:"target"`
	State  VMState `json:"state"`
	Detail string  `json:"detail,omitempty"`
}

// Plan is what a migration will do, computed from files without changing
// anything. Apply carries it out.
type Plan struct {
	Home string `json:"home"`
	// KlimaxConfig is klimax's config file; KlimaxConfigFound says whether
	// it exists (without it klimax's defaults are migrated).
	KlimaxConfig      string `json:"klimaxConfig"`
	KlimaxConfigFound bool   `json:"klimaxConfigFound"`
	// ConfigPath is marina's config file.
	ConfigPath string       `json:"configPath"`
	VM         VMInfo       `json:"vm"`
	Keys       []KeyMapping `json:"keys"`
	Steps      []Step       `json:"steps"`
	Warnings   []string     `json:"warnings,omitempty"`

	// Config is the configuration marina will load from the written file
	// (DNS addresses derived from the bridge, as config.Load does). It
	// holds credentials, so it is not part of the JSON form.
	Config *config.Config `json:"-"`

	// configYAML is the content of the config file.
	configYAML  []byte
	writtenKeys int
	force       bool
	// conflict is why Apply refuses (marina's config exists and differs).
	conflict string
}

// ConfigYAML returns the content Apply writes to ConfigPath. It holds
// credentials: write it, do not print it.
func (p *Plan) ConfigYAML() []byte { return append([]byte(nil), p.configYAML...) }

// Refusal returns the usage error Apply returns without changing anything
// (marina's config exists and differs, and Force is not set), or nil.
func (p *Plan) Refusal() error {
	if p.conflict == "" {
		return nil
	}
	return exitcode.NewUsage(errors.New(p.conflict))
}

// ErrNoKlimax is returned (wrapped) by NewPlan when there is no klimax
// installation to migrate.
var ErrNoKlimax = errors.New("no klimax installation found")

// paths of one home directory.
type paths struct {
	home string
}

func (h paths) klimaxDir() string        { return filepath.Join(h.home, ".klimax") }
func (h paths) klimaxCache() string      { return filepath.Join(h.home, ".klimax", "registry-cache") }
func (h paths) marinaCache() string      { return filepath.Join(h.home, ".marina", "registry-cache") }
func (h paths) limaHome() string         { return filepath.Join(h.home, ".marina", "lima") }
func (h paths) klimaxKubeDir() string    { return filepath.Join(h.home, ".kube", "klimax") }
func (h paths) marinaKubeDir() string    { return filepath.Join(h.home, ".kube", "marina") }
func (h paths) tilde(p string) string    { return tilde(h.home, p) }
func (h paths) klimaxVM(n string) string { return filepath.Join(h.klimaxDir(), n) }
func (h paths) marinaVM(n string) string { return filepath.Join(h.limaHome(), n) }

// tilde shows a path under home as ~/...
func tilde(home, p string) string {
	if home == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if rel, err := filepath.Rel(home, p); err == nil && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel) {
		return "~/" + filepath.ToSlash(rel)
	}
	return p
}

// NewPlan works out, from files only, what migrating the klimax
// installation under home (an absolute path) to marina involves. It changes
// nothing.
func NewPlan(home string, opts Options) (*Plan, error) {
	if !filepath.IsAbs(home) {
		return nil, fmt.Errorf("the home directory %q is not an absolute path", home)
	}
	h := paths{home: home}
	p := &Plan{Home: home, force: opts.Force}
	p.KlimaxConfig = opts.KlimaxConfig
	if p.KlimaxConfig == "" {
		p.KlimaxConfig = filepath.Join(home, ".klimax", "config.yaml")
	}
	p.ConfigPath = opts.ConfigPath
	if p.ConfigPath == "" {
		p.ConfigPath = filepath.Join(home, ".marina", "config.yaml")
	}

	// klimax's config: lenient, like klimax; what is not carried is listed.
	data, err := userfile.ReadFile(p.KlimaxConfig, userfile.MaxSize)
	switch {
	case err == nil:
		p.KlimaxConfigFound = true
	case errors.Is(err, fs.ErrNotExist) && opts.KlimaxConfig != "":
		return nil, exitcode.NewUsage(fmt.Errorf("klimax config %s does not exist; name klimax's config file (klimax's -c) or leave the flag out for ~/.klimax/config.yaml", p.KlimaxConfig))
	case errors.Is(err, fs.ErrNotExist):
		if !isDir(h.klimaxDir()) && !isDir(h.klimaxKubeDir()) {
			return nil, exitcode.NewUsage(fmt.Errorf("%w: neither %s nor %s exists, so there is nothing to migrate; `marina up` starts from scratch",
				ErrNoKlimax, p.KlimaxConfig, h.klimaxDir()))
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf("%s does not exist: klimax's defaults are migrated", h.tilde(p.KlimaxConfig)))
	default:
		return nil, fmt.Errorf("read klimax config %s: %w", p.KlimaxConfig, err)
	}
	k, drops, err := parseKlimax(data)
	if err != nil {
		return nil, exitcode.NewUsage(fmt.Errorf("klimax config %s: %w; fix it or write marina's config by hand (`marina config init`)", p.KlimaxConfig, err))
	}

	// The VM first: vm.name depends on whether it can be adopted.
	p.VM = probeVM(h, k.VMName)

	m := newMapper(k, p.VM)
	if err := m.run(drops); err != nil {
		return nil, err
	}
	p.Keys, p.Config, p.writtenKeys = m.keys, m.cfg, len(m.written)
	if p.configYAML, err = renderConfig(m.cfg, m.written, h.tilde(p.KlimaxConfig)); err != nil {
		return nil, err
	}

	if err := p.planConfig(h); err != nil {
		return nil, err
	}
	p.planRegistryCache(h, k)
	clusters, err := p.planKubeconfigs(h, opts)
	if err != nil {
		return nil, err
	}
	p.planVM(h, k, clusters)
	p.planClusters(h, clusters)
	return p, nil
}

// planConfig compares the migrated config with an existing marina config.
func (p *Plan) planConfig(h paths) error {
	st := Step{Kind: KindConfig, From: p.KlimaxConfig, To: p.ConfigPath}
	if !p.KlimaxConfigFound {
		st.From = ""
	}
	written := p.writtenKeys
	old, err := userfile.ReadFile(p.ConfigPath, userfile.MaxSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		st.Action = ActionWrite
		st.Note = fmt.Sprintf("%s; mode 0600", settings(written))
	case err != nil:
		return fmt.Errorf("read marina config %s: %w", p.ConfigPath, err)
	case string(old) == string(p.configYAML):
		st.Action = ActionDone
	default:
		diff := diffKeys(old, p.configYAML)
		what := "differs from the migrated config"
		if len(diff) > 0 {
			what = "differs from the migrated config in " + strings.Join(diff, ", ")
		}
		if p.force {
			st.Action = ActionWrite
			st.Note = fmt.Sprintf("replaces the existing file, which %s; the old one is kept as %s", what, h.tilde(p.ConfigPath+".bak"))
		} else {
			st.Action = ActionSkip
			st.Note = fmt.Sprintf("exists and %s; nothing is migrated until you choose: --force replaces it (the old one is kept as %s)",
				what, h.tilde(p.ConfigPath+".bak"))
			p.conflict = fmt.Sprintf("%s already exists and %s; see `marina migrate --dry-run`, then keep it and migrate by hand, or run `marina migrate --force` to replace it (the old file is kept as %s.bak)",
				p.ConfigPath, what, p.ConfigPath)
		}
	}
	p.Steps = append(p.Steps, st)
	return nil
}

// planRegistryCache moves the host registry cache mirror by mirror.
func (p *Plan) planRegistryCache(h paths, k *klimaxConfig) {
	if k.CacheStorage == "guest" {
		p.Steps = append(p.Steps, Step{Kind: KindGuestCache, Action: ActionNone, From: "(VM) /var/lib/klimax/registry-cache",
			Note: "klimax cached in the VM; marina keeps guest caches in Docker volumes (marina-registry-cache-<mirror>), so the mirrors fill again from upstream; " +
				"once the VM runs under marina, `marina shell -- sudo rm -rf /var/lib/klimax/registry-cache` frees the space"})
	}
	entries, err := os.ReadDir(h.klimaxCache())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("cannot read %s: %v; the registry cache is not moved", h.klimaxCache(), err))
		return
	}
	vmBusy := p.VM.State == VMRunning || p.VM.State == VMUnknown
	moved := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		src := filepath.Join(h.klimaxCache(), e.Name())
		dst := filepath.Join(h.marinaCache(), e.Name())
		st := Step{Kind: KindRegistryCache, Name: e.Name(), From: src, To: dst}
		size, files, _ := treeSize(src)
		dstEmpty, dstErr := emptyOrMissing(dst)
		switch {
		case vmBusy:
			st.Action = ActionManual
			st.Note = fmt.Sprintf("the klimax VM is %s and its mirrors write here: stop it first: `klimax down`, then run `marina migrate` again", p.VM.State)
		case dstErr != nil:
			st.Action = ActionSkip
			st.Note = fmt.Sprintf("cannot read %s: %v", h.tilde(dst), dstErr)
		case !dstEmpty:
			st.Action = ActionSkip
			st.Note = fmt.Sprintf("%s exists and is not empty; both are kept: compare them, remove the one you do not need, and run `marina migrate` again", h.tilde(dst))
		default:
			st.Action = ActionMove
			how := "rename (same filesystem)"
			if !sameFS(src, dst) {
				how = "copy, verify every file, then remove the original (another filesystem)"
			}
			st.Note = fmt.Sprintf("%s, %s; %s", count(files, "file"), humanSize(size), how)
		}
		p.Steps = append(p.Steps, st)
		moved++
	}
	if moved == 0 {
		// Nothing left at klimax's side: done by an earlier run, or never there.
		st := Step{Kind: KindRegistryCache, From: h.klimaxCache(), To: h.marinaCache(), Action: ActionNone, Note: "no registry cache on the host"}
		if k.CacheStorage == "guest" && !isDir(h.klimaxCache()) {
			return
		}
		if names := subdirs(h.marinaCache()); len(names) > 0 {
			st.Action = ActionDone
			st.Note = "moved: " + strings.Join(names, ", ")
		}
		p.Steps = append(p.Steps, st)
	}
}

// planKubeconfigs copies the per-cluster kubeconfigs and reports klimax's
// contexts in the user's kubeconfig. It returns the clusters klimax knew.
func (p *Plan) planKubeconfigs(h paths, opts Options) ([]string, error) {
	entries, err := os.ReadDir(h.klimaxKubeDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", h.klimaxKubeDir(), err)
	}
	var clusters []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".kubeconfig")
		if !ok || e.IsDir() || name == "" {
			continue
		}
		clusters = append(clusters, name)
	}
	sort.Strings(clusters)
	files := opts.KubeconfigFiles
	if files == nil {
		files = kubeconfig.Precedence(h.home, os.Getenv("KUBECONFIG"))
	}
	for _, name := range clusters {
		src := filepath.Join(h.klimaxKubeDir(), name+".kubeconfig")
		dst := filepath.Join(h.marinaKubeDir(), name+".kubeconfig")
		st := Step{Kind: KindKubeconfig, Name: name, From: src, To: dst}
		srcData, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("read klimax's kubeconfig %s: %w", src, err)
		}
		dstData, err := os.ReadFile(dst)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			st.Action = ActionCopy
			st.Note = "mode 0600; the original is kept; valid while klimax's cluster runs"
		case err != nil:
			st.Action = ActionSkip
			st.Note = fmt.Sprintf("cannot read %s: %v", h.tilde(dst), err)
		case string(dstData) == string(srcData):
			st.Action = ActionDone
		case marinaKubeconfig(dst):
			st.Action = ActionKeep
			st.Note = "marina's own kubeconfig for " + name + " is there (the cluster was recreated with marina); klimax's is not copied over it"
		default:
			st.Action = ActionSkip
			st.Note = fmt.Sprintf("%s exists with other content; both are kept", h.tilde(dst))
		}
		p.Steps = append(p.Steps, st)
		if marinaKubeconfig(dst) {
			continue // recreated: marina's entries replace klimax's
		}
		for _, f := range files {
			cfg, err := clientcmd.LoadFromFile(f)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				p.Warnings = append(p.Warnings, fmt.Sprintf("cannot read kubeconfig %s: %v; klimax's contexts in it are not reported", f, err))
				continue
			}
			c, ok := cfg.Contexts[name]
			if !ok || kubeconfig.IsMarina(c.Extensions) {
				continue
			}
			p.Steps = append(p.Steps, Step{Kind: KindContext, Name: name, Action: ActionKeep, From: f,
				Note: fmt.Sprintf("klimax's context %s keeps its name; marina never replaces or removes kubeconfig entries it did not write, so before marina recreates %s, remove them: "+
					"`kubectl config delete-context %s`, `kubectl config delete-cluster %s`, `kubectl config delete-user %s`", name, name, name, name, name)})
			break
		}
	}
	return clusters, nil
}

// marinaKubeconfig reports whether the per-cluster kubeconfig at path was
// written by marina (its context carries marina's marker).
func marinaKubeconfig(path string) bool {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return false
	}
	for _, c := range cfg.Contexts {
		if kubeconfig.IsMarina(c.Extensions) {
			return true
		}
	}
	return false
}

// planClusters says what becomes of each cluster klimax made.
func (p *Plan) planClusters(h paths, clusters []string) {
	for _, name := range clusters {
		st := Step{Kind: KindCluster, Name: name}
		switch {
		case marinaKubeconfig(filepath.Join(h.marinaKubeDir(), name+".kubeconfig")):
			st.Action = ActionDone
			st.Note = "recreated with marina"
		case p.VM.State == VMAbsent || p.VM.State == VMBroken:
			st.Action = ActionManual
			st.Note = fmt.Sprintf("klimax's VM is gone, and the cluster with it: recreate it with `marina cluster create %s` after `marina up`", name)
		default:
			st.Action = ActionManual
			st.Note = fmt.Sprintf("recreate it: `marina cluster create %s` once `marina up` has run; klimax's cluster cannot be taken over "+
				"(marina manages clusters by their marina.dev/slot node label, which klimax's lack)", name)
		}
		p.Steps = append(p.Steps, st)
	}
}

// count writes "1 file", "3 files".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// settings says how many settings the config file holds.
func settings(n int) string {
	if n == 1 {
		return "1 setting (everything else is marina's default)"
	}
	return fmt.Sprintf("%d settings (everything else is marina's default)", n)
}

// diffKeys lists the keys whose values differ between two YAML documents
// (values are never shown: they may be credentials).
func diffKeys(a, b []byte) []string {
	fa, fb := flatten(a), flatten(b)
	if fa == nil || fb == nil {
		return nil
	}
	var out []string
	for k, v := range fa {
		if w, ok := fb[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	// Collapse list items to their list.
	var res []string
	seen := map[string]bool{}
	for _, k := range out {
		if i := strings.Index(k, "["); i >= 0 {
			k = k[:i]
		}
		if !seen[k] {
			seen[k] = true
			res = append(res, k)
		}
	}
	if len(res) > 8 {
		res = append(res[:8], fmt.Sprintf("and %d more", len(res)-8))
	}
	return res
}
