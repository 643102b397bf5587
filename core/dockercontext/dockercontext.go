// Package dockercontext writes Docker CLI contexts in the docker CLI's own
// context store format (~/.docker/contexts/meta/<sha256 of the name>/meta.json,
// and currentContext in ~/.docker/config.json), so `marina docker-context`
// works without the docker CLI installed and the CLI reads the result as if
// `docker context create` had made it.
//
// Only the keys marina owns are touched: other contexts, and every other key
// of config.json (auths, credential helpers, plugins, ...), are kept.
package dockercontext

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/bcollard/marina/core/atomicfile"
)

// Store is a Docker CLI configuration directory (~/.docker, or $DOCKER_CONFIG).
type Store struct {
	Dir string
}

// Default returns the store the docker CLI uses: $DOCKER_CONFIG or ~/.docker.
func Default() (Store, error) {
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return Store{Dir: d}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Store{}, err
	}
	return Store{Dir: filepath.Join(home, ".docker")}, nil
}

// meta is the context store's meta.json.
type meta struct {
	Name      string                    `json:"Name"`
	Metadata  map[string]any            `json:"Metadata"`
	Endpoints map[string]dockerEndpoint `json:"Endpoints"`
}

type dockerEndpoint struct {
	Host          string `json:"Host"`
	SkipTLSVerify bool   `json:"SkipTLSVerify"`
}

var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.+-]+$`) })

// metaDir is where the CLI keeps context name's metadata.
func (s Store) metaDir(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(s.Dir, "contexts", "meta", hex.EncodeToString(sum[:]))
}

// Ensure creates or updates context name pointing at host. It reports
// whether anything changed.
func (s Store) Ensure(name, host, description string) (bool, error) {
	if !validName().MatchString(name) || name == "default" {
		return false, fmt.Errorf("docker context name %q is not valid (letters, digits, _ . + -; not \"default\"); set vm.name", name)
	}
	want := meta{Name: name, Metadata: map[string]any{"Description": description},
		Endpoints: map[string]dockerEndpoint{"docker": {Host: host}}}
	b, err := json.Marshal(want)
	if err != nil {
		return false, err
	}
	path := filepath.Join(s.metaDir(name), "meta.json")
	if cur, err := os.ReadFile(path); err == nil {
		var have meta
		if json.Unmarshal(cur, &have) == nil && have.Name == name && have.Endpoints["docker"] == want.Endpoints["docker"] &&
			have.Metadata["Description"] == description {
			return false, nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return false, fmt.Errorf("write docker context %s: %w", name, err)
	}
	return true, nil
}

// Remove deletes context name (a missing one is fine) and, when it is the
// current context, switches back to the default.
func (s Store) Remove(name string) error {
	if err := os.RemoveAll(s.metaDir(name)); err != nil {
		return err
	}
	cur, err := s.Current()
	if err != nil {
		return err
	}
	if cur == name {
		return s.Use("default")
	}
	return nil
}

// Current returns the current context ("default" when none is set).
func (s Store) Current() (string, error) {
	cfg, err := s.readConfig()
	if err != nil {
		return "", err
	}
	var cur string
	if raw, ok := cfg["currentContext"]; ok {
		if err := json.Unmarshal(raw, &cur); err != nil {
			return "", fmt.Errorf("%s: currentContext: %w", s.configPath(), err)
		}
	}
	if cur == "" {
		cur = "default"
	}
	return cur, nil
}

// Use makes name the current context ("default" clears it), keeping every
// other key of config.json.
func (s Store) Use(name string) error {
	if name != "default" {
		if _, err := os.Stat(filepath.Join(s.metaDir(name), "meta.json")); err != nil {
			return fmt.Errorf("docker context %s does not exist: %w", name, err)
		}
	}
	cfg, err := s.readConfig()
	if err != nil {
		return err
	}
	if name == "default" {
		delete(cfg, "currentContext")
	} else {
		b, _ := json.Marshal(name)
		cfg["currentContext"] = b
	}
	b, err := json.MarshalIndent(cfg, "", "\t")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(s.configPath()); err == nil {
		mode = fi.Mode().Perm()
	}
	return atomicfile.WriteFile(s.configPath(), append(b, '\n'), mode)
}

func (s Store) configPath() string { return filepath.Join(s.Dir, "config.json") }

// readConfig reads config.json as raw keys (missing file = empty).
func (s Store) readConfig() (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(s.configPath())
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(b) == 0) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	cfg := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w; fix or move it, then run again", s.configPath(), err)
	}
	return cfg, nil
}
