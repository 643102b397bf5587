// Package kubeconfig owns the kubeconfig files marina writes: the
// per-cluster file (~/.kube/marina/<name>.kubeconfig) and marina's entries in
// the user's own kubeconfig (~/.kube/config, or the files of $KUBECONFIG).
//
// Everything goes through client-go's clientcmd (Load, LoadFromFile, Write),
// never hand-rolled YAML, so every field clientcmd knows survives a rewrite:
// other clusters, contexts and users, exec and auth-provider settings,
// extensions at every level, preferences. What clientcmd does not model is
// lost on a rewrite, exactly as with `kubectl config`: comments and keys that
// are not part of the kubeconfig schema. The backups (see BackupSuffix) keep
// them.
//
// # Naming and ownership
//
// A cluster's context, cluster and user entries are all named after the
// cluster ("dev", never kind's "kind-dev"). Every entry marina writes carries
// an extension named Marker ("marina.dev"):
//
//	extensions:
//	- name: marina.dev
//	  extension:
//	    managedBy: marina
//
// The marker is how marina tells its own entries from a user's entry that
// happens to have the same name: Merge refuses to replace an entry without
// the marker (unless MergeOptions.Overwrite) and Remove never deletes one.
// A marker is used rather than, say, comparing server addresses because it
// is explicit, survives `kubectl config` edits (clientcmd round-trips
// extensions) and needs no lookup elsewhere.
//
// # What marina replaced
//
// Merge with Overwrite replaces the user's own entries of the cluster's
// name, and with SetCurrent the file's current-context. Both are recorded
// in a state file next to the kubeconfig file (<file>.marina.state, see
// StateSuffix), written under the same lock, and Remove puts them back: the
// user's entries, and the current-context from before, if that context
// still exists. So `merge --overwrite dev` then `remove dev` leaves the
// user's dev as it was, however many runs happened in between.
//
// # Which file, with a $KUBECONFIG list
//
// Merge and Remove resolve files exactly like kubectl (see Target): an entry
// that already exists is updated in the file that defines it (the first file
// in the list that has it, which is the one kubectl uses); a new entry and
// current-context go to kubectl's default file, the first file of the list
// that exists, or the last one if none exists. So `kubectl config view`
// shows what marina wrote and `kubectl config delete-context` removes it
// from the same file.
//
// # Safety
//
// Writers serialise on a lock file next to each file they rewrite, named
// after the resolved file (<file>.marina.lock with symlinks followed, flock,
// so a crash never leaves it held): two writers that reach one file by a
// symlink and by its real path take the same lock. They also take kubectl's
// own <name>.lock, for the name given and the resolved one, while they read,
// modify and write, so a concurrent `kubectl config` cannot lose marina's
// change or the other way round. Files are replaced atomically (temporary
// file in the same directory, fsync, rename: see core/atomicfile), keeping
// their mode (0600 for a new file): a reader or a crash sees the old file or
// the new one, never a half-written one. Before a Target changes a file for
// the first time, the previous content is copied to a new backup,
// <file>.marina.bak.<time> (see BackupSuffix); the newest KeepBackups are
// kept. Backups and the state file are also named after the resolved file.
package kubeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bcollard/marina/core/atomicfile"
)

// Marker is the name of the extension marina puts on every cluster, context
// and user entry it writes. Its presence, not its value, marks the entry as
// marina's.
const Marker = "marina.dev"

// markerValue is the marker extension's content.
const markerValue = `{"managedBy":"marina"}`

// ValidateName returns an error unless name is a valid marina cluster name:
// a DNS-1123 label (lowercase letters, digits and '-', starting and ending
// with a letter or digit, at most 63 characters). Entry names and file names
// are derived from it.
func ValidateName(name string) error {
	if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
		return fmt.Errorf("cluster name %q is not valid: %s; use a DNS label such as \"dev\" or \"team-a-1\"", name, strings.Join(msgs, "; "))
	}
	return nil
}

// ReadCluster loads the kubeconfig at path (a per-cluster file). A missing
// file is an error that wraps fs.ErrNotExist.
func ReadCluster(path string) (*clientcmdapi.Config, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read kubeconfig %s: %w", path, err)
	}
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w; fix the file or delete it and export it again", path, err)
	}
	return cfg, nil
}

// WriteCluster writes cfg to path, the per-cluster kubeconfig, atomically
// with mode 0600 (it holds admin credentials; a wider mode of an existing
// file is narrowed), creating the parent directory with mode 0700 if it is
// missing.
func WriteCluster(path string, cfg *clientcmdapi.Config) error {
	if cfg == nil {
		return fmt.Errorf("write kubeconfig %s: the config is nil", path)
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: serialise: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("write kubeconfig %s: create directory: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return err
	}
	return narrowMode(path)
}

// narrowMode makes path 0600 if it is readable or writable by others.
func narrowMode(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("check mode of %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return fmt.Errorf("make %s private (0600): %w", path, err)
		}
	}
	return nil
}

// Rename renames the single cluster, context and user of cfg (kind exports
// them as "kind-<name>") to name, points the context at the renamed cluster
// and user, sets current-context to name and marks the three entries as
// marina's. It fails, leaving cfg unchanged, unless cfg has exactly one
// context whose cluster and user are cfg's only cluster and user.
func Rename(cfg *clientcmdapi.Config, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("rename kubeconfig entries: the config is nil")
	}
	if len(cfg.Contexts) != 1 || len(cfg.Clusters) != 1 || len(cfg.AuthInfos) != 1 {
		return fmt.Errorf("rename kubeconfig entries to %q: want exactly one context, cluster and user as kind exports them, found contexts %v, clusters %v, users %v",
			name, sortedKeys(cfg.Contexts), sortedKeys(cfg.Clusters), sortedKeys(cfg.AuthInfos))
	}
	var ctxName string
	var ctx *clientcmdapi.Context
	for k, v := range cfg.Contexts {
		ctxName, ctx = k, v
	}
	cluster, ok := cfg.Clusters[ctx.Cluster]
	if !ok {
		return fmt.Errorf("rename kubeconfig entries to %q: context %q refers to cluster %q, which the config does not have (it has %v)", name, ctxName, ctx.Cluster, sortedKeys(cfg.Clusters))
	}
	user, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return fmt.Errorf("rename kubeconfig entries to %q: context %q refers to user %q, which the config does not have (it has %v)", name, ctxName, ctx.AuthInfo, sortedKeys(cfg.AuthInfos))
	}
	ctx.Cluster, ctx.AuthInfo = name, name
	mark(&cluster.Extensions)
	mark(&ctx.Extensions)
	mark(&user.Extensions)
	cfg.Clusters = map[string]*clientcmdapi.Cluster{name: cluster}
	cfg.Contexts = map[string]*clientcmdapi.Context{name: ctx}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{name: user}
	cfg.CurrentContext = name
	return nil
}

// SetServer points the single cluster of cfg (a per-cluster kubeconfig) at
// server, an http(s) URL with a host and no path, e.g.
// "https://192.168.105.3:7001". Use it when the API server's address
// changed (the VM got a new IP): the certificate and credentials stay valid.
func SetServer(cfg *clientcmdapi.Config, server string) error {
	if err := ValidateServer(server); err != nil {
		return err
	}
	if cfg == nil {
		return errors.New("set server: the config is nil")
	}
	if len(cfg.Clusters) != 1 {
		return fmt.Errorf("set server: want a per-cluster kubeconfig with exactly one cluster, found %v", sortedKeys(cfg.Clusters))
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	return nil
}

// ValidateServer returns an error unless server is an http or https URL
// whose host is an IP address or a DNS name, with an optional port (1-65535)
// and nothing after it but an optional "/".
func ValidateServer(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %q is not a URL: %w; give one like https://192.168.105.3:7001", server, err)
	}
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return fmt.Errorf("server %q: scheme must be https (or http), got %q; give one like https://192.168.105.3:7001", server, u.Scheme)
	case u.Hostname() == "":
		return fmt.Errorf("server %q has no host; give one like https://192.168.105.3:7001", server)
	case u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || u.ForceQuery:
		return fmt.Errorf("server %q: only scheme, host and port are allowed (no user, path, query or fragment); give one like https://192.168.105.3:7001", server)
	}
	if _, err := netip.ParseAddr(u.Hostname()); err != nil {
		if msgs := validation.IsDNS1123Subdomain(strings.ToLower(u.Hostname())); len(msgs) > 0 {
			return fmt.Errorf("server %q: host %q is neither an IP address nor a DNS name (%s)", server, u.Hostname(), strings.Join(msgs, "; "))
		}
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("server %q: port %q is not in 1-65535", server, p)
		}
	}
	return nil
}

// IsMarina reports whether an entry's extensions carry marina's Marker.
func IsMarina(extensions map[string]runtime.Object) bool {
	_, ok := extensions[Marker]
	return ok
}

// mark adds marina's Marker to an entry's extensions.
func mark(ext *map[string]runtime.Object) {
	if *ext == nil {
		*ext = map[string]runtime.Object{}
	}
	(*ext)[Marker] = &runtime.Unknown{Raw: []byte(markerValue), ContentType: runtime.ContentTypeJSON}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
