package plugin

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/emptypb"
)

// shutdownMethod is go-plugin's controller RPC that stops the plugin's
// gRPC server; a plugin built with the SDK then exits.
const shutdownMethod = "/plugin.GRPCController/Shutdown"

// killWait bounds the wait for a process after SIGKILL (it only outlives
// SIGKILL while stuck in the kernel).
const killWait = 5 * time.Second

// pollInterval is how often a process group is checked while waiting.
const pollInterval = 20 * time.Millisecond

// terminate stops the plugin once; later calls wait for the first and
// return its result. The sequence, each wait bounded by KillGrace:
//
//  0. snapshot the plugin's process tree (see procTree), so that
//     descendants are known even once the plugin has exited (while step 1's
//     request travels);
//  1. ask the plugin to shut down (go-plugin's controller Shutdown RPC) and
//     wait for the process to exit (the SDK's Serve kills the plugin's
//     descendants before it exits);
//  2. SIGTERM the process group and wait;
//  3. freeze (SIGSTOP) and SIGKILL the plugin's whole tree, and wait for
//     the plugin to be reaped;
//  4. sweep: what is left of the tree — the group, every descendant ever
//     seen, the orphans marina adopted as a child subreaper, and their
//     descendants, setsid(2) or not — gets SIGTERM, a wait, then SIGKILL;
//     adopted orphans are reaped. Skipped when the kernel says marina, a
//     child subreaper, has no child left at all (Linux: noChildren), as
//     nothing of the plugin can then be left anywhere;
//  5. release go-plugin's goroutines and socket directory, the socket base
//     dir and marina's subreaper status.
//
// The returned error (only wanted by Close, report=true) says the plugin
// had to be killed or could not be.
func (i *Instance) terminate(report bool) error {
	i.stopOnce.Do(func() {
		i.stopping.Store(true)
		defer close(i.stopped)
		i.stopErr = i.stopProcess()
	})
	<-i.stopped
	if !report {
		return nil
	}
	i.mu.Lock()
	failed := i.failed
	i.mu.Unlock()
	if failed != nil {
		return nil // the failure was reported by the call that caused it
	}
	return i.stopErr
}

func (i *Instance) stopProcess() error {
	grace := i.opts.KillGrace
	r := i.getRunner()
	var escalated string
	survivors := 0
	if r != nil && r.isStarted() {
		tree := newProcTree(r.pgid(), r.token)
		if !r.exited() && i.conn != nil {
			// The snapshot is read while the shutdown request travels: the
			// plugin answers it and ends its own descendants before it
			// exits, which takes longer than reading the process table,
			// and whatever the snapshot misses the sweep still finds (the
			// group, marina's adopted orphans).
			scanned := make(chan struct{})
			go func() {
				defer close(scanned)
				tree.scan()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			start := time.Now()
			_ = i.conn.Invoke(ctx, shutdownMethod, &emptypb.Empty{}, &emptypb.Empty{})
			cancel()
			<-scanned
			r.waitExit(grace - time.Since(start))
		} else {
			tree.scan()
		}
		if !r.exited() {
			escalated = fmt.Sprintf("did not exit within %s of the shutdown request; sent SIGTERM to its process group", grace)
			tree.scan()
			r.signalGroup(syscall.SIGTERM)
			if !r.waitExit(grace) {
				escalated = fmt.Sprintf("ignored the shutdown request and SIGTERM for %s each; killed its process group", grace)
				tree.end(0, false)
				r.signalGroup(syscall.SIGKILL)
				r.waitExit(killWait)
			}
		}
		// Linux: marina, a child subreaper, with no child left at all has
		// nothing of the plugin left anywhere (see noChildren); the sweep
		// is for when it has (an orphan, another plugin, a helper).
		if !r.exited() || !noChildren() {
			survivors = tree.end(grace, true)
			sweepGroup(r.pgid(), grace)
		}
	}
	i.releaseClient(r, grace)
	for _, w := range i.stdio {
		w.Close() // a last line without a newline; nothing after
	}
	if i.releaseLifetime != nil {
		i.releaseLifetime()
	}

	switch {
	case r != nil && r.isStarted() && !r.exited():
		return i.newError("stop", KindStop, fmt.Sprintf("process %d survived SIGKILL", r.pgid()), nil)
	case r != nil && groupAlive(r.pgid()):
		return i.newError("stop", KindStop, fmt.Sprintf("processes of group %d survived SIGKILL", r.pgid()), nil)
	case survivors > 0:
		return i.newError("stop", KindStop, fmt.Sprintf("%d descendant processes of plugin process %d survived SIGKILL", survivors, r.pgid()), nil)
	case escalated != "":
		return i.newError("stop", KindStop, escalated, nil)
	}
	return nil
}

// sweepGroup ends what is left of process group pgid after its leader
// exited: SIGTERM, up to grace for them to exit, then SIGKILL. (The tree
// sweep already did; this covers systems without a process-table reader.)
func sweepGroup(pgid int, grace time.Duration) {
	if !groupAlive(pgid) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	if waitGroupGone(pgid, grace) {
		return
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	waitGroupGone(pgid, killWait)
}

// waitGroupGone polls until no live process is in group pgid, up to d.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}

// releaseClient lets go-plugin clean up (its goroutines, the socket
// directory). Its Kill waits for the plugin's pipes to reach EOF; should a
// process that left the group still hold them, marina's ends are closed.
func (i *Instance) releaseClient(r *procRunner, grace time.Duration) {
	if i.client == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		i.client.Kill()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-time.After(grace + time.Second):
	}
	if r != nil {
		r.closePipes()
	}
	select {
	case <-done:
	case <-time.After(killWait):
		i.opts.Logger.Warn("go-plugin did not release the plugin; continuing", "plugin", i.spec.Name)
	}
}
