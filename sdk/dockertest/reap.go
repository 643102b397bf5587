package dockertest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reapStale removes containers, networks and images labelled by a test process
// that no longer exists (a run killed by its timeout cannot clean up after itself,
// and its network would block the next run's subnet). Objects of live processes,
// including concurrent test binaries, are left alone. Best effort: errors are
// ignored, the next test reports what is really wrong.
func reapStale() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Containers first: a network in use cannot be removed.
	for _, k := range []struct {
		list, inspect, labels string
		rm                    []string
	}{
		{"ps -aq", "container", ".Config.Labels", []string{"container", "rm", "-f", "-v"}},
		{"network ls -q", "network", ".Labels", []string{"network", "rm"}},
		{"image ls -q", "image", ".Config.Labels", []string{"image", "rm", "-f"}},
	} {
		ids, err := docker(ctx, append(strings.Fields(k.list), "--filter", "label="+LabelPID)...)
		if err != nil || ids == "" {
			continue
		}
		args := append([]string{k.inspect, "inspect", "--format",
			`{{.Id}} {{index ` + k.labels + ` "` + LabelPID + `"}}`}, strings.Fields(ids)...)
		out, err := docker(ctx, args...)
		if err != nil {
			continue
		}
		var dead []string
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 2 && !alive(f[1]) {
				dead = append(dead, f[0])
			}
		}
		if len(dead) > 0 && k.inspect == "network" {
			// Containers a test created through another client (the plugin
			// under test, say) carry no test labels but sit on the test's
			// network: remove them so the network can go.
			for _, id := range dead {
				attached, err := docker(ctx, "network", "inspect", "--format",
					`{{range $id, $c := .Containers}}{{$id}} {{end}}`, id)
				if err == nil && strings.TrimSpace(attached) != "" {
					_, _ = docker(ctx, append([]string{"container", "rm", "-f", "-v"}, strings.Fields(attached)...)...)
				}
			}
		}
		if len(dead) > 0 {
			_, _ = docker(ctx, append(k.rm, dead...)...)
		}
	}
}

// alive reports whether pid names a running process (or cannot be judged).
func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return true
	}
	if n == os.Getpid() {
		return true
	}
	err = syscall.Kill(n, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
