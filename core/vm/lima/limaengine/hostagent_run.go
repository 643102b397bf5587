//go:build !darwin || cgo

package limaengine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"github.com/lima-vm/lima/v2/pkg/hostagent"
	"github.com/lima-vm/lima/v2/pkg/hostagent/api/server"
	"github.com/lima-vm/lima/v2/pkg/store"
	"github.com/sirupsen/logrus"

	"github.com/bcollard/marina/core/vm/lima"
)

// RunHostAgent runs a VM's Lima host agent until the VM stops (a port of
// limactl's hidden hostagent command): it writes events as JSON lines to
// stdout and logs as JSON to stderr, which Lima's start and stop read.
// LIMA_HOME is inherited from the marina process that started the VM.
//
// The agent runs under a context that is never cancelled (ctx's values
// only): SIGINT and SIGTERM reach it through its signal channel, on which
// Lima stops the VM gracefully (a guest shutdown) under that context. Were
// the context cancelled by the signal (signal.NotifyContext), the driver's
// stop would run on a dead context and the VM would be killed instead.
func RunHostAgent(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	ctx = context.WithoutCancel(ctx)
	a, err := lima.ParseHostAgentArgs(args)
	if err != nil {
		return err
	}
	if os.Getenv("LIMA_HOME") == "" {
		return errors.New("hostagent: LIMA_HOME is not set; the host agent is started by marina's lima driver, not by hand")
	}
	if a.PIDFile != "" {
		if pid, err := store.ReadPIDFile(a.PIDFile); pid != 0 {
			return fmt.Errorf("hostagent: another host agent may already run with pid %d (pidfile %s)", pid, a.PIDFile)
		} else if err != nil {
			return fmt.Errorf("hostagent: read %s: %w", a.PIDFile, err)
		}
		if err := os.WriteFile(a.PIDFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
			return err
		}
		defer os.RemoveAll(a.PIDFile)
	}
	if a.RunGUI {
		// vz's GUI must run on the main OS thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	signalCh := make(chan os.Signal, 1)
	signal.Notify(signalCh, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signalCh)

	logrus.SetOutput(&syncWriter{w: stderr})
	// Lima's event watcher parses these JSON lines.
	logrus.SetFormatter(new(logrus.JSONFormatter))
	if a.Debug {
		logrus.SetLevel(logrus.TraceLevel)
	} else {
		logrus.SetLevel(logrus.DebugLevel)
	}
	var opts []hostagent.Opt
	if a.GuestAgent != "" {
		opts = append(opts, hostagent.WithGuestAgentBinary(a.GuestAgent))
	}
	if a.NerdctlArchive != "" {
		opts = append(opts, hostagent.WithNerdctlArchive(a.NerdctlArchive))
	}
	if a.Progress {
		opts = append(opts, hostagent.WithCloudInitProgress(true))
	}
	ha, err := hostagent.New(ctx, a.Instance, &syncWriter{w: stdout}, signalCh, opts...)
	if err != nil {
		return fmt.Errorf("hostagent: %w", err)
	}
	mux := http.NewServeMux()
	server.AddRoutes(mux, &server.Backend{Agent: ha})
	srv := &http.Server{Handler: mux}
	if err := os.RemoveAll(a.Socket); err != nil {
		return err
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", a.Socket)
	if err != nil {
		return fmt.Errorf("hostagent: listen on %s: %w", a.Socket, err)
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).Warn("hostagent API server exited with an error")
		}
	}()
	defer srv.Close()
	// Keep the host's route to the bridge on the VM's current address
	// (sleep/wake, a new network) while the VM runs (routewatch.go).
	defer lima.StartRouteWatch(ctx, a.Instance, &lima.Library{})()
	return ha.Run(ctx)
}

// syncWriter syncs a file after every write, so that Lima's watcher sees
// each event as soon as it is written.
type syncWriter struct{ w io.Writer }

func (s *syncWriter) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	if f, ok := s.w.(interface{ Sync() error }); ok && err == nil {
		_ = f.Sync()
	}
	return n, err
}
