package pluginstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/sdk"
)

// cacheDir holds one <sha256>.json description per binary digest.
func (s *Store) cacheDir() string { return filepath.Join(s.root, ".cache", "descriptions") }

// CachedDescription returns the description cached for the binary with the
// given hex sha256, if any. A binary's description is a function of its
// bytes, so a digest hit never needs to launch it.
func (s *Store) CachedDescription(sha256hex string) (*sdk.Description, bool) {
	if !isHexSHA256(sha256hex) {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(s.cacheDir(), sha256hex+".json"))
	if err != nil {
		return nil, false
	}
	var d sdk.Description
	if err := json.Unmarshal(data, &d); err != nil || d.Name == "" {
		return nil, false
	}
	return &d, true
}

// putCache stores d for the digest. The cache is an optimisation: callers
// ignore its errors.
func (s *Store) putCache(sha256hex string, d *sdk.Description) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.cacheDir(), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(s.cacheDir(), sha256hex+".json"), data, 0o644)
}

// DescribeCached returns the description of the binary at path and its hex
// sha256, launching it through the Describer only when no description is
// cached for that digest. It is how `marina plugin list` describes binaries
// outside the store (marina's built-ins) without starting them every time.
func (s *Store) DescribeCached(ctx context.Context, path string) (*sdk.Description, string, error) {
	sum, err := hashFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("describe %s: %w", path, err)
	}
	if d, ok := s.CachedDescription(sum); ok {
		return d, sum, nil
	}
	if s.describe == nil {
		return nil, "", fmt.Errorf("describe %s: the plugin store has no Describer", path)
	}
	ctx, cancel := context.WithTimeout(ctx, s.describeTimeout())
	defer cancel()
	d, err := s.describe(ctx, path)
	if err != nil {
		return nil, "", fmt.Errorf("describe %s: %w", path, err)
	}
	if d == nil {
		return nil, "", fmt.Errorf("describe %s: the plugin returned no description", path)
	}
	_ = s.putCache(sum, d)
	return d, sum, nil
}
