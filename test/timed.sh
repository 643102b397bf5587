# timed.sh — sourced by test/run.sh and test/setup.sh: one way to time a step.
#
#   timed LABEL VERB NAME CMD...
#
# says NAME (through the caller's `say`), runs CMD, says "NAME: VERB in Ns", and
# appends "LABEL: NAME Ns" to $TEST_TIMINGS when it is set (.ci/run's table; a
# NAME's parenthesised tail is left out there). CMD's failure ends the caller
# (set -e), so only finished steps are recorded.
timed() {
  local label="$1" verb="$2" name="$3"
  shift 3
  local t0=$SECONDS
  say "$name"
  "$@"
  local d=$(( SECONDS - t0 ))
  say "$name: $verb in ${d}s"
  [ -z "${TEST_TIMINGS:-}" ] || printf '%s: %-22s %5ss\n' "$label" "${name%% (*}" "$d" >>"$TEST_TIMINGS"
}
