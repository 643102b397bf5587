// Command docker is the tests' stand-in for the docker CLI on the PATH of
// marina's kind helper, the one seam between the real-node tests and a
// user's Docker: kind (pkg/cluster/internal/providers/docker) runs node
// containers with `docker run --privileged` and commands in them with
// `docker exec --privileged`, and Docker on this machine refuses
// --privileged (its capability bounding set lacks CAP_SYS_RESOURCE). The shim
// rewrites exactly those arguments (see Rewrite) and execs the real docker
// CLI with the rest unchanged.
//
// The real CLI is $MARINA_TEST_REAL_DOCKER, or the first `docker` on PATH
// that is not this program. With $MARINA_TEST_DOCKER_SHIM_LOG set, every
// rewritten command line is appended to that file (one line each).
package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	real, err := realDocker()
	if err != nil {
		fmt.Fprintf(os.Stderr, "docker (marina test shim): %v\n", err)
		os.Exit(127)
	}
	args, changed := Rewrite(os.Args[1:])
	if changed {
		logLine(args)
	}
	err = syscall.Exec(real, append([]string{"docker"}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "docker (marina test shim): exec %s: %v\n", real, err)
	os.Exit(127)
}

// realDocker finds the docker CLI the shim stands in front of.
func realDocker() (string, error) {
	if p := os.Getenv("MARINA_TEST_REAL_DOCKER"); p != "" {
		return p, nil
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	self, _ = filepath.EvalSymlinks(self)
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		p := filepath.Join(dir, "docker")
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			continue
		}
		if r, _ := filepath.EvalSymlinks(p); r == self {
			continue
		}
		return p, nil
	}
	return "", errors.New("no docker CLI on PATH besides this shim; set MARINA_TEST_REAL_DOCKER")
}

func logLine(args []string) {
	path := os.Getenv("MARINA_TEST_DOCKER_SHIM_LOG")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "docker %s\n", strings.Join(args, " "))
}

// NodeFlags replace --privileged in `docker run`: every capability but
// CAP_SYS_RESOURCE (the one this machine's bounding set lacks), no seccomp
// or AppArmor profile, every device node allowed by the device cgroup, and
// /dev/kmsg for the kubelet. What --privileged does besides — read-write
// cgroup and /sys mounts — the node image's entrypoint does itself when it
// finds them read-only; /proc/sys stays read-only, so a node never changes
// the host's kernel settings.
var NodeFlags = []string{
	"--cap-add", "ALL",
	"--cap-drop", "SYS_RESOURCE",
	"--security-opt", "seccomp=unconfined",
	"--security-opt", "apparmor=unconfined",
	"--device-cgroup-rule", "a *:* rwm",
	"--device", "/dev/kmsg",
}

// modulesMount is kind's read-only mount of the host's kernel modules. This
// machine has no /lib/modules, and Docker would create the directory on the
// host for a missing bind source: the shim leaves the mount out.
var modulesMount = []string{"/lib/modules:/lib/modules:ro", "--volume=/lib/modules:/lib/modules:ro"}

// Rewrite returns the docker CLI arguments to run instead of args, and
// whether they differ: in `run` and `create`, --privileged becomes NodeFlags
// and kind's /lib/modules mount is dropped; in `exec`, --privileged is
// dropped (the command then has the node's own capabilities, which are all
// it could get). Everything else is passed through unchanged. Only the
// arguments before the first one that is not a flag (the image, the
// container) are looked at.
func Rewrite(args []string) ([]string, bool) {
	if len(args) == 0 {
		return args, false
	}
	cmd := args[0]
	if cmd == "container" && len(args) > 1 {
		// `docker container run|create|exec` is the same command.
		out, changed := Rewrite(args[1:])
		return append([]string{"container"}, out...), changed
	}
	if cmd != "run" && cmd != "create" && cmd != "exec" {
		return args, false
	}
	out := []string{cmd}
	changed := false
	i := 1
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break // the image or container: the command's own arguments follow
		}
		switch {
		case a == "--privileged" || a == "--privileged=true":
			changed = true
			if cmd != "exec" {
				out = append(out, NodeFlags...)
			}
			continue
		case cmd != "exec" && (a == "--volume" || a == "-v") && i+1 < len(args) && args[i+1] == modulesMount[0]:
			changed = true
			i++
			continue
		case cmd != "exec" && a == modulesMount[1]:
			changed = true
			continue
		}
		out = append(out, a)
		if takesValue(a) && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return append(out, args[i:]...), changed
}

// boolFlags are the flags of run, create and exec that kind passes without
// a value; every other flag given without "=" takes the next argument.
var boolFlags = map[string]bool{
	"--detach": true, "-d": true, "--tty": true, "-t": true, "--interactive": true,
	"-i": true, "-it": true, "-dt": true, "--rm": true, "--init": true, "--privileged": true,
	"--read-only": true, "--publish-all": true, "-P": true, "--no-healthcheck": true,
	"--oom-kill-disable": true, "--sig-proxy": true, "--quiet": true, "-q": true,
}

func takesValue(flag string) bool {
	if strings.Contains(flag, "=") {
		return false
	}
	return !boolFlags[flag]
}
