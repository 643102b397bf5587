package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bcollard/marina/core/lock"
)

// lockFile is the per-user process lock that serialises state-changing commands.
func lockFile() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find the home directory for ~/.marina: %w", err)
	}
	return filepath.Join(home, ".marina", "marina.lock"), nil
}

// withLock runs fn holding the process lock. By default it queues behind
// another marina process and says whom it waits for; --no-wait fails at once
// with the holder's PID and command.
func (a *app) withLock(ctx context.Context, fn func() error) error {
	path, err := lockFile()
	if err != nil {
		return err
	}
	l, err := lock.Acquire(ctx, path, lock.Options{
		Wait:    !a.global.NoWait,
		Command: "marina " + strings.Join(os.Args[1:], " "),
		OnWait: func(h lock.Holder) {
			fmt.Fprintf(a.err, "waiting for another marina process (PID %d: %s, since %s) to finish...\n", h.PID, h.Command, h.Since.Local().Format(time.TimeOnly))
		},
	})
	if err != nil {
		return err
	}
	defer l.Release()
	return fn()
}
