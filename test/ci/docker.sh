#!/usr/bin/env bash
# docker.sh — make a Docker engine answer on /var/run/docker.sock (tier-2 tests).
#
# Idempotent: installs Debian's docker.io only when dockerd is missing, starts
# /usr/sbin/dockerd in the background only when the socket does not answer, then
# waits (bounded) for `docker info`. Exits non-zero, with the daemon log tail, when
# the engine does not come up — CI must fail rather than skip docker tests.
#
# Must run as root (CI does). Environment knobs:
#   DOCKER_WAIT_SECONDS  how long to wait for the daemon (default 60)
#   DOCKERD_LOG          daemon log file (default /var/log/marina-dockerd.log)
#   DOCKERD_PIDFILE      daemon pidfile (default /var/run/marina-dockerd.pid)
set -euo pipefail

WAIT="${DOCKER_WAIT_SECONDS:-60}"
LOG="${DOCKERD_LOG:-/var/log/marina-dockerd.log}"
PIDFILE="${DOCKERD_PIDFILE:-/var/run/marina-dockerd.pid}"
DOCKERD=/usr/sbin/dockerd

say() { echo "docker.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

answering() { timeout 10 docker info >/dev/null 2>&1; }

# alive PID: PID is a process that has not exited (zombies count as exited: this
# machine's init may reap late).
alive() {
  local stat
  [ -n "$1" ] && stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"                                   # the fields after "(comm) "
  [ "${stat%% *}" != Z ]
}

# dockerd_alive PID: PID is a live dockerd (guards against a reused pid).
dockerd_alive() { alive "$1" && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = dockerd ]; }

if [ "$(id -u)" -ne 0 ]; then
  if command -v docker >/dev/null && answering; then
    say "docker engine already answering (not root; nothing to do)"
    exit 0
  fi
  die "must run as root to install and start dockerd (try: sudo $0)"
fi

# 1. Install Debian's docker.io when the daemon binary (or the CLI) is missing.
#    apt-get update only when the package index does not know docker.io yet.
if [ ! -x "$DOCKERD" ] || ! command -v docker >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-cache show docker.io >/dev/null 2>&1; then
    say "apt-get update"
    apt-get update -qq
  fi
  say "installing docker.io"
  # Debian's docker.io pulls in containerd, runc, tini and iptables.
  apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null \
    || { say "install failed, retrying after apt-get update"; apt-get update -qq;
         apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null; }
  [ -x "$DOCKERD" ] || die "docker.io installed but $DOCKERD is missing"
fi
command -v docker >/dev/null || die "docker CLI not on PATH after installing docker.io"

# 2. Start dockerd when the socket does not answer.
if answering; then
  say "docker engine already answering: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?')"
  exit 0
fi

old="$(cat "$PIDFILE" 2>/dev/null || true)"
if dockerd_alive "$old"; then
  say "dockerd (pid $old) is running but not answering yet; waiting"
  started="$old"
else
  rm -f "$PIDFILE"
  mkdir -p "$(dirname "$LOG")"
  echo "=== docker.sh: starting dockerd at $(date -u +%FT%TZ)" >>"$LOG"
  say "starting $DOCKERD (log: $LOG)"
  # start-stop-daemon (dpkg) detaches the daemon in its own session, so it outlives
  # this script, and writes the daemon's pid to PIDFILE. dockerd keeps its own
  # /var/run/docker.pid and starts its own containerd.
  start-stop-daemon --start --background --make-pidfile --pidfile "$PIDFILE" \
    --output "$LOG" --exec "$DOCKERD"
  started="$(cat "$PIDFILE")"
fi

# 3. Wait, bounded, for `docker info`.
deadline=$(( $(date +%s) + WAIT ))
while ! answering; do
  if ! alive "$started"; then
    say "dockerd exited during start-up; last lines of $LOG:"
    tail -n 40 "$LOG" >&2 2>/dev/null || true
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    say "docker engine did not answer within ${WAIT}s; last lines of $LOG:"
    tail -n 40 "$LOG" >&2 2>/dev/null || true
    exit 1
  fi
  sleep 1
done
say "docker engine ready: server $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?')"
