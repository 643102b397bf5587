#!/usr/bin/env bash
# test/vm/run.sh (`make test-vm`): marina's lima driver against a real VM.
#
# As root: the Debian image (image.sh, cached), Lima's guest agent (built from
# the pinned module the way the driver builds it, cached), the marina binary
# (the VM's host agent) and the test binary; a user of its own (Lima refuses
# root, and the guest user gets the host uid, so it must be a uid the guest
# does not have); then the test (vm_test.go) as that user, in a scratch
# directory. qemu runs under TCG here, its user-mode network restricted
# (restrict=on: the VM reaches neither the host nor the internet; Lima's SSH
# forward still works). Every step is timed.
#
# Environment: MARINA_TEST_VM_USER (default marina-vmtest),
# MARINA_TEST_VM_CPUS (default 2), MARINA_TEST_VM_RESTRICT=0 (qemu's
# user network unrestricted), MARINA_TEST_VM_KEEP=1 (keep the scratch
# directory), MARINA_TEST_VM_KVM=1 (let qemu use KVM, where it works),
# MARINA_TEST_CACHE (see image.sh), FORCE=1 (rebuild the image).
# The VM's logs of the last run are kept in $cache/last-run.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=local

if [ "$(id -u)" != 0 ]; then
  echo "make test-vm runs as root (image build, a test user of its own)" >&2
  exit 1
fi

user="${MARINA_TEST_VM_USER:-marina-vmtest}"
cache="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}/vm"
timings=()
timed() {
  local name="$1" t0=$SECONDS
  shift
  echo "== test-vm: $name"
  "$@"
  timings+=("$(printf '%-44s %5ss' "$name" "$(( SECONDS - t0 ))")")
}
summary() {
  local rc=$?
  echo
  echo "== test-vm: setup durations"
  local s
  for s in "${timings[@]}"; do echo "  $s"; done
  cleanup
  [ "$rc" = 0 ] && echo "== test-vm: passed" || echo "== test-vm: FAILED (exit $rc)"
}

work=""
cleanup() {
  [ -n "$work" ] && [ -d "$work" ] || return 0
  # A failed or killed test may leave its VM running: stop its processes by
  # the PIDs Lima recorded (host agent first, then qemu), nothing else.
  local f pid
  while IFS= read -r f; do
    pid="$(cat "$f" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
      echo "test-vm: killing leftover $(basename "$f" .pid) (pid $pid)"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done < <(find "$work" -path '*/.marina/lima/*' \( -name ha.pid -o -name qemu.pid \) 2>/dev/null)
  # The VM's logs (host agent, serial console) of the last run stay in the cache.
  rm -rf "$cache/last-run"
  cp -r "$work/logs" "$cache/last-run" 2>/dev/null || true
  if [ "${MARINA_TEST_VM_KEEP:-}" = 1 ]; then
    echo "test-vm: kept $work (MARINA_TEST_VM_KEEP=1)"
  else
    rm -rf "$work"
  fi
}
trap summary EXIT

host_packages() {
  local p missing=()
  for p in qemu-system-x86 qemu-utils ovmf openssh-client; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
      missing+=("$p")
    fi
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  fi
}
timed "host packages" host_packages

timed "image (image.sh)" bash test/vm/image.sh
# shellcheck disable=SC1091
. "$cache/image.env"

lima_version="$(go list -m -f '{{.Version}}' github.com/lima-vm/lima/v2)"
guestagent="$cache/lima-guestagent-$lima_version.Linux-x86_64"
build_guestagent() {
  if [ -s "$guestagent" ]; then
    echo "up to date: $guestagent"
    return 0
  fi
  go run ./test/vm/guestagent -out "$guestagent"
}
timed "Lima guest agent ($lima_version)" build_guestagent

make_user() {
  if ! id -u "$user" >/dev/null 2>&1; then
    useradd --no-create-home --user-group --shell /bin/bash "$user"
  fi
  local uid
  uid="$(id -u "$user")"
  # Lima gives the guest user the host uid: 0 is refused, and the image's
  # system users (and nobody) hold the low ones.
  if [ "$uid" -lt 1000 ] || [ "$uid" = 65534 ]; then
    echo "test-vm: user $user has uid $uid; it needs a regular uid (>= 1000, not 65534) that the guest image does not use" >&2
    return 1
  fi
  echo "$user: uid $uid"
}
timed "test user" make_user

# Short paths: Lima's sockets live in the instance directory (108-byte limit).
work="$(mktemp -d /tmp/mvm.XXXXXX)"
chmod 755 "$work"
mkdir -p "$work/t" "$work/logs"
chown "$user:" "$work/t" "$work/logs"
build() {
  go build -o "$work/marina" ./cmd/marina
  go test -c -o "$work/vm.test" ./test/vm
  install -m 0644 "$MARINA_TEST_VM_IMAGE" "$work/image.qcow2"
  install -m 0644 "$guestagent" "$work/lima-guestagent.Linux-x86_64"
  local qemu restrict=0 tcg=1
  qemu="$(command -v qemu-system-x86_64)"
  [ "${MARINA_TEST_VM_RESTRICT:-1}" = 1 ] && restrict=1
  [ "${MARINA_TEST_VM_KVM:-}" = 1 ] && tcg=0
  # Lima's qemu driver runs $QEMU_SYSTEM_X86_64: this wrapper of the real
  # qemu (same PID: exec) changes only what Lima cannot be told:
  #  - TCG: Lima picks KVM whenever /dev/kvm exists, but this machine's
  #    /dev/kvm is root-only and does not run a guest (qemu aborts setting
  #    MSRs), so accel=kvm becomes accel=tcg and -cpu host becomes -cpu max;
  #  - restrict=on on the user-mode network: the VM reaches neither the host
  #    nor the internet (explicit forwards such as Lima's SSH still work).
  cat >"$work/qemu-system-x86_64" <<EOF
#!/bin/bash
args=() prev=
for a in "\$@"; do
  if [ $restrict = 1 ] && [ "\$prev" = -netdev ] && [[ "\$a" == user,* ]]; then a="\$a,restrict=on"; fi
  if [ $tcg = 1 ] && [ "\$prev" = -machine ]; then a="\${a/accel=kvm/accel=tcg}"; fi
  if [ $tcg = 1 ] && [ "\$prev" = -cpu ] && [[ "\$a" == host* ]]; then a="max\${a#host}"; fi
  args+=("\$a"); prev="\$a"
done
exec $qemu "\${args[@]}"
EOF
  chmod 755 "$work/qemu-system-x86_64"
  qemu="$work/qemu-system-x86_64"
  echo "$qemu" >"$work/qemu"
}
timed "build marina + test binary" build

cd "$work/t"
timed "test (as $user)" runuser -u "$user" -- env -i \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME="$work/t" TMPDIR="$work/t" USER="$user" LOGNAME="$user" \
  MARINA_TEST_VM=1 \
  MARINA_TEST_VM_IMAGE="$work/image.qcow2" \
  MARINA_TEST_VM_IMAGE_SHA256="$MARINA_TEST_VM_IMAGE_SHA256" \
  MARINA_TEST_VM_GUESTAGENT="$work/lima-guestagent.Linux-x86_64" \
  MARINA_TEST_VM_MARINA="$work/marina" \
  MARINA_TEST_VM_CPUS="${MARINA_TEST_VM_CPUS:-2}" \
  MARINA_TEST_VM_LOGS="$work/logs" \
  QEMU_SYSTEM_X86_64="$(cat "$work/qemu")" \
  "$work/vm.test" -test.v -test.count=1 -test.timeout=90m -test.run '^TestVM$'
