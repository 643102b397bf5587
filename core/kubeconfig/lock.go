package kubeconfig

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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

// lockFiles takes, for each path in a fixed (sorted) order so that two
// writers never deadlock, marina's lock <path>.marina.lock and then
// kubectl's <path>.lock. The returned func releases them all.
func lockFiles(ctx context.Context, paths []string) (func(), error) {
	paths = slices.Sorted(slices.Values(paths))
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
	for _, p := range paths {
		l, err := lock.Acquire(lctx, p+LockSuffix, lock.Options{Wait: true, PollInterval: lockPoll})
		if err != nil {
			release()
			return nil, fmt.Errorf("lock kubeconfig %s: %w", p, err)
		}
		held = append(held, l)
	}

	kctx, kcancel := context.WithTimeout(ctx, kubectlLockTimeout)
	defer kcancel()
	for _, p := range paths {
		name := p + kubectlLockSuffix
		if err := acquireKubectlLock(kctx, name, p); err != nil {
			release()
			return nil, err
		}
		kubectlHeld = append(kubectlHeld, name)
	}
	return release, nil
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
