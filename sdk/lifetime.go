package sdk

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
)

// Process lifetime of a served plugin (see docs/design.md, "Plugin process
// lifetime"): nothing the plugin started outlives it, and the plugin does
// not outlive marina.
const (
	// parentPoll is how often Serve checks that marina (the parent) runs.
	parentPoll = 200 * time.Millisecond
	// teardownGrace is how long the plugin's descendants get to exit after
	// SIGTERM before they are killed.
	teardownGrace = 500 * time.Millisecond
	// teardownKill bounds the wait after SIGKILL.
	teardownKill = 2 * time.Second
)

// lifetime ends a served plugin: on SIGTERM, when marina exits (the parent
// changes), or when the server stops, it kills every descendant of the
// plugin process, then exits.
type lifetime struct {
	once      sync.Once
	parent    int
	socketDir string
}

// subreaper is true once becomeSubreaper made this process a child
// subreaper (Linux): every descendant is then its child or below one.
var subreaper bool

// startLifetime makes the plugin a child subreaper where the OS has them
// (Linux), so that every process it starts stays in its tree even when its
// parent exits (a daemonising or setsid(2) grandchild), and starts
// watching for SIGTERM and for marina's exit.
func startLifetime() *lifetime {
	lt := &lifetime{parent: os.Getppid(), socketDir: os.Getenv(goplugin.EnvUnixSocketDir)}
	becomeSubreaper()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		tick := time.NewTicker(parentPoll)
		defer tick.Stop()
		for {
			select {
			case <-sigs:
				lt.exit(128+int(syscall.SIGTERM), "received SIGTERM; plugin stopping")
			case <-tick.C:
				if os.Getppid() != lt.parent {
					lt.exit(2, "marina (the parent process) exited; plugin stopping")
				}
			}
		}
	}()
	return lt
}

// exit kills the plugin's descendants, removes its socket directory if
// marina is gone (marina removes it otherwise), and exits with code. Only
// the first call does it; later ones block until the process exits.
func (lt *lifetime) exit(code int, msg string) {
	lt.once.Do(func() {
		if msg != "" {
			fmt.Fprintln(os.Stderr, msg)
		}
		killDescendants(teardownGrace, teardownKill)
		if os.Getppid() != lt.parent {
			removeSocketDir(lt.socketDir)
		}
		os.Exit(code)
	})
	select {}
}

// removeSocketDir removes the socket directory go-plugin's host made for
// this plugin (os.MkdirTemp "plugin-dir*"), which a killed host cannot.
func removeSocketDir(dir string) {
	if dir == "" || !strings.HasPrefix(filepath.Base(dir), "plugin-dir") {
		return
	}
	_ = os.RemoveAll(dir)
}
