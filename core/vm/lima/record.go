package lima

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/config"
	"github.com/bcollard/marina/core/vm/limavm"
)

// recordFile is marina's note, in the Lima instance directory, of the
// config values the VM was created with. It goes away with the instance.
const recordFile = "marina-vm.json"

// Record holds the config values the VM was created with, so Status
// compares them with the current config (Drift). Most take effect only when
// the VM is recreated; cpus, memory and disk are applied to it (resize.go)
// and updated here when they are.
type Record struct {
	CPUs                 int    `json:"cpus"`
	Memory               string `json:"memory"`
	Disk                 string `json:"disk"`
	Rosetta              bool   `json:"rosetta"`
	CacheStorage         string `json:"cacheStorage"`
	DisablePortMirroring bool   `json:"disablePortMirroring"`
}

// recordOf is what a VM created from cfg on a goarch host records. Rosetta
// is recorded as it takes effect (only on arm64 with vz).
func recordOf(cfg *config.Config, goos, goarch string) Record {
	return Record{
		CPUs:                 cfg.VM.CPUs,
		Memory:               cfg.VM.Memory,
		Disk:                 cfg.VM.Disk,
		Rosetta:              cfg.VM.Rosetta && goos == "darwin" && goarch == "arm64",
		CacheStorage:         cfg.Registries.CacheStorage,
		DisablePortMirroring: cfg.Network.DisablePortMirroring,
	}
}

func writeRecord(instDir string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(instDir, recordFile)
	if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("record the VM's creation settings in %s: %w", path, err)
	}
	return nil
}

// readRecord returns the record, or (nil, nil) when there is none.
func readRecord(instDir string) (*Record, error) {
	path := filepath.Join(instDir, recordFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s is not marina's VM record (%v); it is rewritten when the VM is recreated (`marina destroy && marina up`)", path, err)
	}
	return &r, nil
}

// Drift lists, one line per key, the values that differ between what the
// VM was created with and what the config now says. Sizes compare by
// value, so 10GiB and 10240MiB are the same.
func Drift(created, want Record) []string {
	var d []string
	diff := func(key string, vm, cfg any) {
		d = append(d, fmt.Sprintf("%s: the config says %v, the VM was created with %v", key, cfg, vm))
	}
	if created.CPUs != want.CPUs {
		diff("vm.cpus", created.CPUs, want.CPUs)
	}
	if !limavm.SameSize(created.Memory, want.Memory) {
		diff("vm.memory", created.Memory, want.Memory)
	}
	if !limavm.SameSize(created.Disk, want.Disk) {
		diff("vm.disk", created.Disk, want.Disk)
	}
	if created.Rosetta != want.Rosetta {
		diff("vm.rosetta", created.Rosetta, want.Rosetta)
	}
	if created.CacheStorage != want.CacheStorage {
		diff("registries.cacheStorage", created.CacheStorage, want.CacheStorage)
	}
	if created.DisablePortMirroring != want.DisablePortMirroring {
		diff("network.disablePortMirroring", created.DisablePortMirroring, want.DisablePortMirroring)
	}
	return d
}
