#!/usr/bin/env bash
# test/vm/run.sh (`make test-vm`): marina's lima driver against a real VM.
#
# As root: the Debian image (image.sh, cached), Lima's guest agent (built from
# the pinned module the way the driver builds it, cached), the marina binary,
# marina-lima beside it (marina's Lima engine: it boots, stops and deletes the
# VM and is the VM's host agent) and the test binary; a user of its own (Lima
# refuses root, and the guest user gets the host uid, so it must be a uid the
# guest does not have); then the test (vm_test.go) as that user, in a scratch
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
  lima0_cleanup
  cp "$work/dnsmasq.log" "$work/logs/" 2>/dev/null || true
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
  for p in qemu-system-x86 qemu-utils ovmf openssh-client dnsmasq-base iproute2 sudo; do
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

# lima0: a tap device for the test user, with this machine's address on it
# and dnsmasq leasing the VM's one (no router, no DNS: the VM still has no
# way out); lima0relay (root: only root opens /dev/net/tun here) relays it
# to the socket Lima connects qemu's lima0 to.
# The route marina adds through it needs sudo: a drop-in allows exactly
# those commands. All removed at the end.
tap=mvm0
lima0_net=192.168.106
bridge=172.27.0.0/16
sudoers=/etc/sudoers.d/marina-vmtest
dnsmasq_pid="" relay_pid=""
lima0_setup() {
  if ip link show "$tap" >/dev/null 2>&1; then
    ip link del "$tap"
  fi
  ip tuntap add dev "$tap" mode tap
  ip addr add "$lima0_net.1/24" dev "$tap"
  ip link set "$tap" up
  dnsmasq --keep-in-foreground --conf-file=/dev/null --port=0 --no-resolv --no-hosts \
    --interface="$tap" --bind-interfaces --except-interface=lo \
    --dhcp-range="$lima0_net.2,$lima0_net.2,255.255.255.0,12h" --dhcp-option=3 --dhcp-option=6 \
    --leasefile-ro --pid-file="$work/dnsmasq.pid" --log-dhcp >"$work/dnsmasq.log" 2>&1 &
  dnsmasq_pid=$!
  "$work/lima0relay" -tap "$tap" -socket "$work/lima0.sock" -owner "$(id -u "$user")" >"$work/lima0relay.log" 2>&1 &
  relay_pid=$!
  local i
  for i in $(seq 1 50); do [ -S "$work/lima0.sock" ] && break; sleep 0.1; done
  [ -S "$work/lima0.sock" ] || { cat "$work/lima0relay.log" >&2; return 1; }
  local cmd rules=()
  for ip in /usr/sbin/ip /bin/ip; do
    for cmd in "route replace $bridge via $lima0_net.2" "route del $bridge via $lima0_net.2"; do
      rules+=("$ip $cmd")
    done
  done
  (IFS=,; printf '%s ALL=(root) NOPASSWD: %s\n' "$user" "${rules[*]}") >"$sudoers.new"
  chmod 0440 "$sudoers.new"
  visudo -cqf "$sudoers.new"
  mv -f "$sudoers.new" "$sudoers"
}
lima0_cleanup() {
  rm -f "$sudoers"
  if [ -n "$relay_pid" ]; then kill "$relay_pid" 2>/dev/null || true; wait "$relay_pid" 2>/dev/null || true; fi
  if [ -n "$dnsmasq_pid" ]; then kill "$dnsmasq_pid" 2>/dev/null || true; wait "$dnsmasq_pid" 2>/dev/null || true; fi
  if ip -4 route show exact "$bridge" | grep -q "dev $tap"; then ip route del "$bridge" dev "$tap" || true; fi
  if ip link show "$tap" >/dev/null 2>&1; then ip link del "$tap" || true; fi
}
save_images() {
  local images=(marina-test/etcd:v3.7.3 marina-test/coredns:v1.15.0)
  if ! docker image inspect "${images[@]}" >/dev/null 2>&1; then
    echo "test-vm: this machine's Docker lacks ${images[*]}: run make test-setup first" >&2
    return 1
  fi
  docker save -o "$work/images.tar" "${images[@]}"
  chmod 0644 "$work/images.tar"
}

# Short paths: Lima's sockets live in the instance directory (108-byte limit).
work="$(mktemp -d /tmp/mvm.XXXXXX)"
chmod 755 "$work"
mkdir -p "$work/t" "$work/logs"
chown "$user:" "$work/t" "$work/logs"
build() {
  # marina-lima beside marina (and the test binary), where it finds it.
  go build -o "$work/" ./cmd/marina ./cmd/marina-lima
  go test -c -o "$work/vm.test" ./test/vm
  go build -o "$work/lima0relay" ./test/vm/lima0relay
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
timed "build marina, marina-lima + test binary" build
timed "lima0 (tap, dnsmasq, sudoers drop-in)" lima0_setup
timed "local DNS images (docker save)" save_images

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
  MARINA_TEST_VM_LIMA0_SOCKET="$work/lima0.sock" \
  MARINA_TEST_VM_IMAGES="$work/images.tar" \
  MARINA_TEST_VM_RESTRICT="${MARINA_TEST_VM_RESTRICT:-1}" \
  QEMU_SYSTEM_X86_64="$(cat "$work/qemu")" \
  "$work/vm.test" -test.v -test.count=1 -test.timeout=90m -test.run '^TestVM$'
