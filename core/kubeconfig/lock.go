package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/bcollard/marina/core/lock"
)

// Lock file suffixes: marina's flock file, and the file kubectl creates
// (O_EXCL) while `kubectl config` rewrites a kubeconfig.
const (
	LockSuffix        = ".marina.lock"
	kubectlLockSuffix = ".lock"
)

// Bounds on waiting for locks: marina's own lock is held for milliseconds
// by a healthy process; kubectl's lock file outlives a crashed kubectl, so
// waiting for it must give up and say so.
var (
	lockTimeout        = time.Minute
	kubectlLockTimeout = 10 * time.Second
	lockPoll           = 20 * time.Millisecond
)

// lockFiles takes the locks of files: for each file's resolved path (so
// that writers naming one file by a symlink and by its real path exclude
// each other), in a fixed (sorted) order so that two writers never
// deadlock, marina's lock <resolved>.marina.lock; then kubectl's lock file
// <name>.lock for the name the file was given by and for its resolved path,
// since a kubectl may reach the file by either. It returns the resolved
// paths it locked and a func that releases everything.
func lockFiles(ctx context.Context, files []*file) (func(), map[string]bool, error) {
	locked := map[string]bool{}
	var kubectlNames []string
	named := map[string]string{} // kubectl lock file -> the kubeconfig it guards
	for _, f := range files {
		locked[f.real] = true
		for _, n := range []string{f.real, f.path} {
			if _, ok := named[n+kubectlLockSuffix]; !ok {
				named[n+kubectlLockSuffix] = n
				kubectlNames = append(kubectlNames, n+kubectlLockSuffix)
			}
		}
	}
	reals := slices.Sorted(maps.Keys(locked))
	slices.Sort(kubectlNames)

	var held []*lock.Lock
	var kubectlHeld []string
	release := func() {
		for _, p := range slices.Backward(kubectlHeld) {
			_ = os.Remove(p) // best effort: a leftover is reported by the next writer
		}
		for _, l := range slices.Backward(held) {
			_ = l.Release()
		}
	}

	lctx, cancel := context.WithTimeout(ctx, lockTimeout)
	defer cancel()
	for _, p := range reals {
		l, err := lock.Acquire(lctx, p+LockSuffix, lock.Options{Wait: true, PollInterval: lockPoll})
		if err != nil {
			release()
			return nil, nil, fmt.Errorf("lock kubeconfig %s: %w", p, err)
		}
		held = append(held, l)
	}

	kctx, kcancel := context.WithTimeout(ctx, kubectlLockTimeout)
	defer kcancel()
	for _, name := range kubectlNames {
		if err := acquireKubectlLock(kctx, name, named[name]); err != nil {
			release()
			return nil, nil, err
		}
		kubectlHeld = append(kubectlHeld, name)
	}
	return release, locked, nil
}

// acquireKubectlLock creates kubectl's lock file name exclusively, polling
// while it exists until ctx is done.
func acquireKubectlLock(ctx context.Context, name, kubeconfig string) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("lock kubeconfig %s: %s still exists: kubectl is changing the file, or a kubectl (or marina) that crashed left it behind; if no kubectl is running, delete %s and try again (%w)",
				kubeconfig, name, name, ctx.Err())
		case <-t.C:
		}
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			if err := f.Close(); err != nil {
				_ = os.Remove(name)
				return fmt.Errorf("lock kubeconfig %s: close kubectl's lock file: %w", kubeconfig, err)
			}
			return nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("lock kubeconfig %s: create kubectl's lock file: %w", kubeconfig, err)
		}
		t.Reset(lockPoll)
	}
}
