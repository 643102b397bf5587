package kubeconfig

import (
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/tools/clientcmd"
)

// Target is the user's kubeconfig as kubectl sees it: the files kubectl
// loads, in its precedence order, which Merge and Remove edit. Make one with
// DefaultTarget or NewTarget per run (one marina command) and use it for
// every Merge and Remove of that run: it remembers which files it has
// already backed up, so a run makes one backup of each file it changes
// (<file>.marina.bak.<time>, see BackupSuffix), with the content from before
// the run's first change. A Target built as a literal backs up before every
// change instead.
//
// The rule, kubectl's (clientcmd.PathOptions.GetDefaultFilename and
// ModifyConfig), applied per entry (cluster, context, user):
//   - an entry that exists is updated or removed in the file that defines it
//     first in Files (the definition kubectl uses; later duplicates are
//     shadowed and left alone by Merge);
//   - a new entry, and current-context, go to DefaultFile: the only file, or
//     with several the first one that exists, or the last one if none does.
//
// Writing new entries to that default file rather than always to the first
// file of the list is deliberate: it is where `kubectl config set-context`
// would put them, so marina and kubectl never disagree about which file
// holds what, and marina does not create a file the user listed but has
// not made (e.g. a per-project file at the head of $KUBECONFIG).
type Target struct {
	// Files is the loading precedence: the $KUBECONFIG list without empty
	// entries and duplicates, or ~/.kube/config.
	Files []string

	run *runState
}

// runState is shared by the copies of a Target made by NewTarget.
type runState struct {
	mu sync.Mutex
	// backedUp maps the resolved path of each file this run changed to the
	// backup it made ("" when the run created the file).
	backedUp map[string]string
}

// Precedence returns the files kubectl loads for a user with home
// directory home and $KUBECONFIG set to kubeconfigEnv: the list's entries
// in order, without empty entries and duplicates, or
// <home>/.kube/config when the list is empty. Paths are kept as given
// (relative entries are relative to the working directory, as for kubectl).
func Precedence(home, kubeconfigEnv string) []string {
	var files []string
	seen := map[string]bool{}
	for _, f := range filepath.SplitList(kubeconfigEnv) {
		if f == "" || seen[f] {
			continue
		}
		seen[f] = true
		files = append(files, f)
	}
	if len(files) == 0 {
		files = []string{filepath.Join(home, clientcmd.RecommendedHomeDir, clientcmd.RecommendedFileName)}
	}
	return files
}

// DefaultTarget returns the Target kubectl would use in this process's
// environment: $KUBECONFIG, or <home>/.kube/config.
func DefaultTarget(home string) Target {
	return NewTarget(Precedence(home, os.Getenv(clientcmd.RecommendedConfigPathEnvVar))...)
}

// NewTarget returns a Target over files (in precedence order) that backs up
// each file at most once.
func NewTarget(files ...string) Target {
	return Target{Files: files, run: &runState{backedUp: map[string]string{}}}
}

// DefaultFile returns where kubectl, and so Merge, writes a new entry and
// current-context: the only file, or the first file that exists, or the
// last file when none exists.
func (t Target) DefaultFile() string {
	exists := make([]bool, len(t.Files))
	for i, f := range t.Files {
		_, err := os.Stat(f)
		exists[i] = err == nil
	}
	return defaultFile(t.Files, exists)
}

// defaultFile implements DefaultFile on a snapshot of which files exist.
func defaultFile(files []string, exists []bool) string {
	if len(files) == 1 {
		return files[0]
	}
	for i, f := range files {
		if exists[i] {
			return f
		}
	}
	if len(files) == 0 {
		return ""
	}
	return files[len(files)-1]
}

// backup returns the backup this run made of the file at real (a resolved
// path; "" when the run created the file), and whether the run already
// dealt with it. A Target without run state never has.
func (t Target) backup(real string) (string, bool) {
	if t.run == nil {
		return "", false
	}
	t.run.mu.Lock()
	defer t.run.mu.Unlock()
	bak, ok := t.run.backedUp[real]
	return bak, ok
}

// backedUp records that real's content from before this run's first change
// is saved in bak ("" when there was none: the run created the file).
func (t Target) backedUp(real, bak string) {
	if t.run == nil {
		return
	}
	t.run.mu.Lock()
	defer t.run.mu.Unlock()
	t.run.backedUp[real] = bak
}
