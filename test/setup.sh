#!/usr/bin/env bash
# setup.sh — everything the tests need on this machine, made ready when missing
# (what `make test` runs first; `make test-setup` runs it alone):
#
#   0. host tools                     sudo/visudo, iproute2 (Debian packages, as root)
#   1. a Docker engine answering      test/ci/docker.sh (installs docker.io and
#                                     starts dockerd; as root)
#   2. the tier-2 test images         test/images/build.sh (from Go modules)
#   3. the tier-3 binaries            test/tools/build.sh (kube-apiserver, kubectl,
#                                     the node's kubelet, kubeadm, ..., etcd,
#                                     MetalLB's controller and speaker, ExternalDNS)
#   4. the kind node image            test/node/build.sh (needs 2 and 3; as root)
#
# Each step is cached and takes about a second when nothing changed; cold, the
# whole takes ~8-10 min on 2 cores (measured: tier-3 447 s, images ~1.5 min). Every step prints its
# duration.
#
# For local loops without Docker or without the tier-3 binaries:
#   MARINA_SKIP_DOCKER=1   skip steps 1-2 (the tests that need Docker skip too)
#   MARINA_SKIP_KUBE=1     skip step 3 (the tests that need an API server skip)
# Both are ignored when CI is set: CI sets up and runs every tier.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

skip() { [ -z "${CI:-}" ] && [ "${!1:-}" = 1 ]; }

# shellcheck source=test/timed.sh
. test/timed.sh
step() { timed test-setup ready "$@"; }

docker_engine() {
  if [ "$(id -u)" -eq 0 ]; then
    bash test/ci/docker.sh
  elif command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; then
    say "docker engine answering (not root: nothing to install)"
  else
    die "no Docker engine answers and this is not root: run sudo bash test/ci/docker.sh once (or MARINA_SKIP_DOCKER=1 to skip the tests that need Docker)"
  fi
}

# Host tools some tests run for real: sudo and visudo (the sudoers drop-in of
# `marina sudoers`, checked by visudo and matched by sudo -l), iproute2 (ip, for
# the guest-network and route-overlap tests in network namespaces), util-linux
# (unshare: the host-trust tests in a private mount namespace), ca-certificates
# (update-ca-certificates, the trust store those tests change a copy of),
# openssl and curl (the lab CA's name constraints, checked by other verifiers
# than Go's). Debian's packages, as root.
host_tools() {
  local missing=()
  command -v visudo >/dev/null || missing+=(sudo)
  command -v ip >/dev/null || missing+=(iproute2)
  command -v unshare >/dev/null || missing+=(util-linux)
  [ -x /usr/sbin/update-ca-certificates ] || missing+=(ca-certificates)
  command -v openssl >/dev/null || missing+=(openssl)
  command -v curl >/dev/null || missing+=(curl)
  if [ ${#missing[@]} -eq 0 ]; then
    say "sudo, visudo, ip, unshare, update-ca-certificates, openssl, curl present"
    return
  fi
  [ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}: install them (sudo apt-get install -y ${missing[*]}) or run as root"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}
step "host tools (sudo, visudo, ip, unshare, ca-certificates, openssl, curl)" host_tools

if skip MARINA_SKIP_DOCKER; then
  say "MARINA_SKIP_DOCKER=1: no Docker engine and no test images (tests that need them skip)"
else
  step "Docker engine" docker_engine
  step "tier-2 test images" bash test/images/build.sh
fi

if skip MARINA_SKIP_KUBE; then
  say "MARINA_SKIP_KUBE=1: no tier-3 binaries (tests that need an API server skip)"
else
  step "tier-3 binaries (kube-apiserver, kubelet, kubeadm, ..., etcd, MetalLB, ExternalDNS)" bash test/tools/build.sh
  if skip MARINA_SKIP_DOCKER; then
    say "MARINA_SKIP_DOCKER=1: no kind node image (the real-node tests skip)"
  else
    step "kind node image (rootfs, containerd, kubelet, preloaded images)" bash test/node/build.sh
  fi
fi
