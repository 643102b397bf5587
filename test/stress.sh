#!/usr/bin/env bash
# stress.sh — the test suite under load (what `make test-stress` runs after
# test-setup). A busy loop runs on every core for the whole run, so every test
# gets about half the CPU it gets on an idle machine; tests that wait on
# processes or time must be written against events (channels, readiness
# probes, polling with a deadline), and this is where the ones that are not
# fail. Fix those; never retry them.
#
#   1. the process-heavy packages (plugin processes, kind helpers, locks,
#      kubeconfig writers, the plugin test harness) with -race -cpu 1 -count 3
#   2. every other marina package with -race
#   3. the test harness packages (test/...)
#   4. the end-to-end tests (test/e2e)
#
# Environment:
#   STRESS_PHASES  which phases to run (default "1 2 3 4")
#   STRESS_LOAD    busy loops to run (default: one per core)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

say() { echo "stress.sh: $*" >&2; }

phases="${STRESS_PHASES:-1 2 3 4}"
load="${STRESS_LOAD:-$(nproc)}"

# The load: busy loops in a process group of their own, killed on exit by
# that group (and only it).
loaders=()
stop_load() {
  local pid
  for pid in "${loaders[@]}"; do
    kill -- "-$pid" 2>/dev/null || true
  done
}
trap stop_load EXIT
for _ in $(seq "$load"); do
  setsid bash -c 'while :; do :; done' &
  loaders+=("$!")
done
say "load: $load busy loop(s) (pids ${loaders[*]})"

start=$SECONDS
for phase in $phases; do
  t0=$SECONDS
  case "$phase" in
    1) say "phase 1: process-heavy packages, -race -cpu 1 -count 3"
       PROC_COUNT=3 GOTESTFLAGS="-cpu 1" TEST_PHASES=process bash test/run.sh ;;
    2) say "phase 2: marina's other packages, -race"
       TEST_PHASES=marina bash test/run.sh ;;
    3) say "phase 3: the test harness packages"
       TEST_PHASES=harness bash test/run.sh ;;
    4) say "phase 4: the end-to-end tests"
       TEST_PHASES=e2e bash test/run.sh ;;
    *) say "unknown phase $phase (phases are 1 2 3 4)"; exit 2 ;;
  esac
  say "phase $phase passed under load in $(( SECONDS - t0 ))s"
done
say "all phases ($phases) passed under load in $(( SECONDS - start ))s"
