package registries

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// keyFile is the name, in the plugin's state directory, of the key that
// keys the mirrors' spec-hash label (sdk/container.WithHashKey): the label
// changes whenever a mirror's credentials change, yet reveals nothing about
// them.
const keyFile = "spec-hash.key"

const keySize = 32

// hashKey returns the key stored in stateDir, creating it (0600, in a 0700
// directory) on first use.
func hashKey(stateDir string) ([]byte, error) {
	if stateDir == "" {
		return nil, errors.New("the plugin's state directory (Env.StateDir) is empty; marina passes one, check the host")
	}
	p := filepath.Join(stateDir, keyFile)
	key, err := os.ReadFile(p)
	switch {
	case err == nil:
		if len(key) != keySize {
			return nil, fmt.Errorf("%s holds %d bytes, not %d: remove it and run again (the mirrors are recreated once)", p, len(key), keySize)
		}
		return key, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read the mirrors' hash key: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create the plugin's state directory: %w", err)
	}
	key = make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate the mirrors' hash key: %w", err)
	}
	// Write a temporary file and link it into place: a concurrent run that
	// got there first wins, and nobody ever reads a half-written key.
	tmp, err := os.CreateTemp(stateDir, keyFile+".*")
	if err != nil {
		return nil, fmt.Errorf("write the mirrors' hash key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(key)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), p); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return hashKey(stateDir)
		}
		return nil, fmt.Errorf("write %s: %w", p, err)
	}
	return key, nil
}
