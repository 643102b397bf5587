#!/usr/bin/env bash
# run.sh — the README's test command (`make test`): sets the machine up, then
# runs every tier, each phase timed.
#
#   setup     test/setup.sh: Docker, the tier-2 images, the tier-3 binaries
#             (installed and built when missing, cached)
#   marina    marina's own packages (cmd/, core/, plugins/, sdk/), -race
#   process   the process-heavy packages (plugin processes, kind helpers, locks,
#             kubeconfig writers, the plugin test harness), -race, PROC_COUNT
#             runs in a row (2 in CI: a flake shows as a failure, not as luck)
#   harness   the test harness packages (test/...: the k8s-heavy helpers and
#             the kind stand-in; the modules of the node image, test/node and
#             test/node/agents: the docker shim, the CNI agent, the echo
#             server), without -race: they are not what ships, and
#             race-instrumenting their Kubernetes dependencies costs minutes
#   e2e       the end-to-end tests (test/e2e), verbosely: marina up, cluster
#             create/delete against the kind stand-in, then with real kind
#             nodes (TestRealNodes), beside a user's lab
#
# Environment:
#   PROC_COUNT       runs of the process-heavy packages (default 1; CI: 2)
#   TEST_PHASES      the phases to run (default all, in the order above)
#   TEST_TIMINGS   a file to append "phase seconds" lines to (.ci/run's summary)
#   GOTESTFLAGS      extra flags for every go test (e.g. -run, -v)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

say() { echo "run.sh: $*" >&2; }

# The SDK is a module of its own (sdk/go.mod, required with a replace to
# ./sdk): its packages are named by import path, which the go command
# resolves from the root module.
sdk_mod=github.com/bcollard/marina/sdk
proc_pkgs=(./core/plugin ./core/kind ./core/lock ./core/kubeconfig "$sdk_mod/plugintest")
proc_re="/(core/plugin|core/kind|core/lock|core/kubeconfig|sdk/plugintest)\$"
count="${PROC_COUNT:-1}"
phases="${TEST_PHASES:-setup marina process harness e2e}"
read -r -a extra <<<"${GOTESTFLAGS:-}"

# shellcheck source=test/timed.sh
. test/timed.sh

harness() {
  go test -count=1 "${extra[@]}" $(go list ./test/... | grep -v '/test/e2e$')
  (cd test/node && go test -count=1 "${extra[@]}" ./...)
  (cd test/node/agents && go test -count=1 "${extra[@]}" ./...)
}

for phase in $phases; do
  case "$phase" in
    setup) timed "make test" passed setup bash test/setup.sh ;;
    marina)
      # shellcheck disable=SC2046
      timed "make test" passed marina go test -race -count=1 "${extra[@]}" $(go list ./... "$sdk_mod/..." | grep -v '/test/' | grep -Ev "$proc_re") ;;
    process) timed "make test" passed process go test -race -count="$count" "${extra[@]}" "${proc_pkgs[@]}" ;;
    harness)
      # shellcheck disable=SC2046
      timed "make test" passed harness harness ;;
    e2e) timed "make test" passed e2e go test -count=1 -v -timeout 45m "${extra[@]}" ./test/e2e ;;
    *) say "unknown phase $phase (setup marina process harness e2e)"; exit 2 ;;
  esac
done
