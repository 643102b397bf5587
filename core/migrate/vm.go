package migrate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/bcollard/marina/core/config"
	"go.yaml.in/yaml/v3"
)

// Lima's file names inside an instance directory (lima-vm/lima/v2
// pkg/limatype/filenames), read here without importing Lima.
const (
	limaYAML = "lima.yaml"
	// longestSock is Lima's longest socket name in an instance directory
	// (ssh.sock plus the 16 characters ssh appends).
	longestSock = "ssh.sock.1234567890123456"
)

// unixPathMax is the host's limit for a socket path (Lima's osutil): 104 on
// macOS, 108 on Linux. Lima refuses an instance whose longest socket path
// reaches it.
func unixPathMax() int {
	if runtime.GOOS == "linux" {
		return 108
	}
	return 104
}

// probeVM finds klimax's VM (or the one an earlier run moved) and decides,
// from its pid files, whether it runs.
func probeVM(h paths, name string) VMInfo {
	v := VMInfo{Name: name, Dir: h.klimaxVM(name), Target: h.marinaVM(name)}
	srcExists, dstExists := exists(v.Dir), exists(v.Target)
	switch {
	case !srcExists && dstExists && isFile(filepath.Join(v.Target, limaYAML)):
		v.State = VMAdopted
	case !srcExists:
		v.State = VMAbsent
	case !isFile(filepath.Join(v.Dir, limaYAML)):
		v.State = VMBroken
		v.Detail = "no " + limaYAML + " in it"
	default:
		v.State, v.Detail = runState(v.Dir)
	}
	return v
}

// runState reads every Lima pid file in an instance directory (ha.pid for
// the host agent, <driver>.pid for the VM process): a live process means
// running, an unreadable file unknown, none or only stale ones stopped.
func runState(dir string) (VMState, string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return VMUnknown, fmt.Sprintf("cannot read %s: %v", dir, err)
	}
	var stale []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".pid") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return VMUnknown, fmt.Sprintf("cannot read %s: %v", e.Name(), err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			return VMUnknown, fmt.Sprintf("%s does not hold a process id (%q)", e.Name(), strings.TrimSpace(string(b)))
		}
		if pidAlive(pid) {
			return VMRunning, fmt.Sprintf("%s: process %d runs", e.Name(), pid)
		}
		stale = append(stale, fmt.Sprintf("%s: process %d is gone", e.Name(), pid))
	}
	if len(stale) > 0 {
		return VMStopped, "stale " + strings.Join(stale, ", ")
	}
	return VMStopped, ""
}

// pidAlive reports whether a process pid exists (one we may not signal
// exists too).
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// adoptable says whether the VM will be marina's, now or after the user
// stops it (so it keeps its name).
func (v VMInfo) adoptable() bool {
	switch v.State {
	case VMAdopted, VMStopped, VMRunning, VMUnknown:
		return !socketTooLong(v.Target)
	}
	return false
}

func socketTooLong(instDir string) bool {
	return len(filepath.Join(instDir, longestSock)) >= unixPathMax()
}

// planVM adopts klimax's VM when it can, or says what to do instead.
func (p *Plan) planVM(h paths, k *klimaxConfig, clusters []string) {
	v := p.VM
	st := Step{Kind: KindVM, Name: v.Name, From: v.Dir, To: v.Target}
	recreate := fmt.Sprintf("recreate it instead: `klimax destroy`, then `marina up` (a new VM named %s)", p.Config.VM.Name)
	adopt := false
	switch {
	case v.State == VMAdopted:
		st.Action = ActionDone
		adopt = true
	case v.State == VMAbsent:
		st.Action = ActionNone
		st.Note = fmt.Sprintf("no klimax VM at %s; `marina up` creates marina's VM", h.tilde(v.Dir))
	case v.State == VMBroken:
		st.Action = ActionManual
		st.Note = fmt.Sprintf("%s is not a complete Lima instance (%s); `klimax destroy` removes it; `marina up` creates marina's VM", h.tilde(v.Dir), v.Detail)
	case socketTooLong(v.Target):
		st.Action = ActionManual
		st.Note = fmt.Sprintf("it cannot move: %s is too long a path for Lima's sockets (%d characters, the limit is %d); %s",
			h.tilde(v.Target), len(filepath.Join(v.Target, longestSock)), unixPathMax()-1, recreate)
	case p.Config.VM.Name != v.Name && v.State != VMAdopted:
		st.Action = ActionManual
		st.Note = fmt.Sprintf("its name %q is not a valid marina VM name (see vm.name above), and Lima names an instance after its directory; %s", v.Name, recreate)
	case exists(v.Target):
		st.Action = ActionSkip
		st.Note = fmt.Sprintf("marina already has a VM at %s; keep one: `marina destroy` removes marina's (then run `marina migrate` again), `klimax destroy` klimax's", h.tilde(v.Target))
	case v.State == VMRunning:
		st.Action = ActionManual
		st.Note = fmt.Sprintf("it runs (%s): stop it first: `klimax down`, then run `marina migrate` again to adopt it", v.Detail)
	case v.State == VMUnknown:
		st.Action = ActionManual
		st.Note = fmt.Sprintf("its state is unknown (%s): stop it first: `klimax down`, then run `marina migrate` again to adopt it", v.Detail)
	case !sameFS(v.Dir, v.Target):
		st.Action = ActionManual
		st.Note = fmt.Sprintf("~/.klimax and ~/.marina are on different filesystems and the VM's disks are not copied: move it yourself (`mv %s %s`), then run `marina migrate` again; or %s",
			v.Dir, v.Target, recreate)
	default:
		st.Action = ActionMove
		st.Note = "stopped; rename into marina's LIMA_HOME; its disks, OS and Docker images are kept"
		if v.Detail != "" {
			st.Note = "stopped (" + v.Detail + "); rename into marina's LIMA_HOME; its disks, OS and Docker images are kept"
		}
		adopt = true
	}
	p.Steps = append(p.Steps, st)
	if !adopt {
		return
	}

	// The registry cache mount in the instance's lima.yaml.
	if k.CacheStorage == "host" {
		limaFile := filepath.Join(v.Target, limaYAML)
		if st.Action == ActionMove {
			limaFile = filepath.Join(v.Dir, limaYAML)
		}
		found, done, err := cacheMount(limaFile, h)
		ms := Step{Kind: KindVMMount, Name: v.Name, From: h.klimaxCache(), To: h.marinaCache()}
		switch {
		case err != nil:
			ms.Action = ActionManual
			ms.Note = fmt.Sprintf("cannot read %s (%v): make its registry-cache mount share %s instead of %s", limaFile, err, h.marinaCache(), h.klimaxCache())
		case found:
			ms.Action = ActionEdit
			ms.Note = fmt.Sprintf("the VM's %s shares the registry cache: share marina's instead", limaYAML)
		case done:
			ms.Action = ActionDone
		default:
			ms = Step{}
		}
		if ms.Kind != "" {
			p.Steps = append(p.Steps, ms)
		}
	}

	// What runs inside cannot be taken over.
	if st.Action == ActionMove || p.VM.State == VMAdopted {
		var names []string
		for _, c := range clusters {
			if !marinaKubeconfig(filepath.Join(h.marinaKubeDir(), c+".kubeconfig")) {
				names = append(names, c+"-control-plane")
			}
		}
		if len(names) == 0 && p.VM.State == VMAdopted {
			return
		}
		for _, m := range k.Mirrors {
			names = append(names, m.Name)
		}
		if len(names) == 0 {
			return // nothing of klimax's uses the network: marina recreates it
		}
		p.Steps = append(p.Steps, Step{Kind: KindVMContents, Name: v.Name, Action: ActionManual,
			Note: "klimax's containers cannot be taken over, and marina recreates the `kind` network with an ip-range that keeps Docker's addresses off the MetalLB pools, " +
				"which it can only do once nothing uses it. After the move: `marina up` (it starts the VM and stops at the network step), then " +
				"`marina shell -- docker rm -f " + strings.Join(names, " ") + "` (and any other kind cluster: `marina shell -- docker ps -a --filter label=io.x-k8s.kind.cluster`), then `marina up` again"})
	}
}

// cacheMount reports whether the lima.yaml at path shares klimax's
// registry cache (found), or already shares marina's (done).
func cacheMount(path string, h paths) (found, done bool, err error) {
	doc, err := readYAML(path)
	if err != nil {
		return false, false, err
	}
	for _, m := range mountNodes(doc) {
		loc := mountField(m, "location")
		if loc == nil {
			continue
		}
		switch expandHome(loc.Value, h.home) {
		case h.klimaxCache():
			found = true
		case h.marinaCache():
			done = true
		}
	}
	return found, done, nil
}

// rewriteCacheMount edits the lima.yaml at path so that the mount of
// klimax's registry cache shares marina's (location, and mountPoint when it
// named the same path), keeping everything else. It reports whether it
// changed the file.
func rewriteCacheMount(path string, h paths) ([]byte, bool, error) {
	doc, err := readYAML(path)
	if err != nil {
		return nil, false, err
	}
	changed := false
	for _, m := range mountNodes(doc) {
		loc := mountField(m, "location")
		if loc == nil || expandHome(loc.Value, h.home) != h.klimaxCache() {
			continue
		}
		loc.Value, loc.Tag, loc.Style = h.marinaCache(), "!!str", 0
		if mp := mountField(m, "mountPoint"); mp != nil && !isNull(mp) && expandHome(mp.Value, h.home) == h.klimaxCache() {
			mp.Value, mp.Tag, mp.Style = h.marinaCache(), "!!str", 0
		}
		changed = true
	}
	if !changed {
		return nil, false, nil
	}
	var b bytes.Buffer
	config.GuardYAML(doc)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, false, fmt.Errorf("render %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return nil, false, err
	}
	return b.Bytes(), true, nil
}

func readYAML(path string) (*yaml.Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	return &doc, nil
}

// mountNodes returns the entries of the top-level mounts list.
func mountNodes(doc *yaml.Node) []*yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "mounts" && root.Content[i+1].Kind == yaml.SequenceNode {
			var out []*yaml.Node
			for _, m := range root.Content[i+1].Content {
				if m.Kind == yaml.MappingNode {
					out = append(out, m)
				}
			}
			return out
		}
	}
	return nil
}

func mountField(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1]
		}
	}
	return nil
}

// expandHome resolves the home forms Lima accepts in a mount location:
// "~", "~/..." and "{{.Home}}/...".
func expandHome(p, home string) string {
	switch {
	case p == "~":
		return home
	case strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[2:])
	case strings.HasPrefix(p, "{{.Home}}"):
		return filepath.Join(home, strings.TrimPrefix(p, "{{.Home}}"))
	}
	return filepath.Clean(p)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// subdirs lists the directories in dir.
func subdirs(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// emptyOrMissing reports whether dir does not exist or is an empty directory.
func emptyOrMissing(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

// sameFS reports whether src and where dst would be created are on one
// filesystem (so a rename works); dst's nearest existing ancestor decides.
func sameFS(src, dst string) bool {
	a, ok := device(src)
	if !ok {
		return false
	}
	for d := dst; ; d = filepath.Dir(d) {
		if b, ok := device(d); ok {
			return a == b
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

func device(p string) (uint64, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true //nolint:unconvert // Dev is int32 on darwin
}
