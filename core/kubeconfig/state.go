package kubeconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/core/atomicfile"
)

// StateSuffix is appended to a kubeconfig file's resolved path to name the
// file where marina keeps what it replaced in it, so that Remove can put it
// back: the user's own entries that Merge with Overwrite replaced, and the
// current-context Merge with SetCurrent replaced. It is JSON, mode 0600 (it
// holds credentials), written atomically under the kubeconfig's lock, and
// deleted when it has nothing left to keep.
const StateSuffix = ".marina.state"

// stateVersion is the format version written to the state file.
const stateVersion = 1

// state is the content of a state file.
type state struct {
	// Version is stateVersion.
	Version int `json:"version"`
	// Clusters holds, by cluster name, what marina replaced in the file.
	Clusters map[string]*saved `json:"clusters"`
}

// saved is what marina replaced in one kubeconfig file for one cluster.
type saved struct {
	// Replaced is a kubeconfig (YAML, as clientcmd writes it) holding the
	// user's own context, cluster and user entries named after the cluster
	// that Merge with Overwrite replaced.
	Replaced string `json:"replaced,omitempty"`
	// PreviousCurrentContext is the file's current-context before Merge
	// with SetCurrent set it to the cluster's context ("" when it had
	// none); nil when marina did not change it.
	PreviousCurrentContext *string `json:"previousCurrentContext,omitempty"`

	// entries is Replaced, loaded.
	entries *clientcmdapi.Config
}

// loadState reads the state file at path; a missing file is an empty state.
func loadState(path string) (*state, error) {
	st := &state{Version: stateVersion, Clusters: map[string]*saved{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read marina's kubeconfig state %s: %w", path, err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("read marina's kubeconfig state %s: %w; it holds the entries marina replaced (merge --overwrite) and the current-context it changed: fix the file, or delete it to forget them (the %s.* backups keep earlier content)", path, err, strings.TrimSuffix(path, StateSuffix)+BackupSuffix)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("read marina's kubeconfig state %s: version %d, this marina reads version %d; use a marina that wrote it, or delete the file to forget what it keeps", path, st.Version, stateVersion)
	}
	if st.Clusters == nil {
		st.Clusters = map[string]*saved{}
	}
	for name, s := range st.Clusters {
		if s == nil {
			delete(st.Clusters, name)
			continue
		}
		s.entries = clientcmdapi.NewConfig()
		if s.Replaced != "" {
			cfg, err := clientcmd.Load([]byte(s.Replaced))
			if err != nil {
				return nil, fmt.Errorf("read marina's kubeconfig state %s: the entries saved for %q do not parse: %w; fix the file or delete it", path, name, err)
			}
			s.entries = cfg
		}
	}
	return st, nil
}

// cluster returns the saved record for name, creating it.
func (st *state) cluster(name string) *saved {
	s := st.Clusters[name]
	if s == nil {
		s = &saved{entries: clientcmdapi.NewConfig()}
		st.Clusters[name] = s
	}
	return s
}

// hasEntries reports whether s keeps any replaced entry.
func (s *saved) hasEntries() bool {
	return len(s.entries.Contexts)+len(s.entries.Clusters)+len(s.entries.AuthInfos) > 0
}

// write stores st at path atomically with mode 0600, or deletes the file
// when st keeps nothing.
func (st *state) write(path string) error {
	for name, s := range st.Clusters {
		if !s.hasEntries() && s.PreviousCurrentContext == nil {
			delete(st.Clusters, name)
			continue
		}
		s.Replaced = ""
		if s.hasEntries() {
			data, err := clientcmd.Write(*s.entries)
			if err != nil {
				return fmt.Errorf("write marina's kubeconfig state %s: serialise the entries saved for %q: %w", path, name, err)
			}
			s.Replaced = string(data)
		}
	}
	if len(st.Clusters) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete marina's kubeconfig state %s (it has nothing left to keep): %w", path, err)
		}
		return nil
	}
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("write marina's kubeconfig state %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write marina's kubeconfig state: %w", err)
	}
	return narrowMode(path)
}

// StateFile returns the path of the state file of the kubeconfig file at
// path: <resolved path>.marina.state (symlinks followed), or
// <path>.marina.state when path cannot be resolved.
func StateFile(path string) string {
	real, err := resolvePath(path)
	if err != nil {
		return path + StateSuffix
	}
	return real + StateSuffix
}
