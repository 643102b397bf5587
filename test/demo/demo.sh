#!/usr/bin/env bash
# demo.sh — marina's main job on a fresh Linux machine (what `make demo` runs).
#
# No VM and no container registry needed: it makes a Docker engine answer
# (test/ci/docker.sh, as root), builds the images of marina's services from Go
# modules (test/images/build.sh), builds marina, and runs `marina up` on the host
# driver with those images. Then it shows `marina status` and `marina doctor`, and
# resolves a name in the local zone through marina's DNS server.
#
# The demo lab has its own config file ($MARINA_DEMO_CONFIG, default
# ~/.marina/demo.yaml) so your own ~/.marina/config.yaml is left alone; use it with
#   export MARINA_CONFIG=~/.marina/demo.yaml
# and remove the lab with `marina destroy --yes` (same variable set).
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=local

say() { printf '\n== %s\n' "$*"; }

say "Docker engine"
bash test/ci/docker.sh

say "service images, built from Go modules (cached after the first run)"
bash test/images/build.sh

say "marina"
make build >/dev/null
MARINA="$PWD/bin/marina"

CONFIG="${MARINA_DEMO_CONFIG:-$HOME/.marina/demo.yaml}"
mkdir -p "$(dirname "$CONFIG")"
if [ ! -f "$CONFIG" ]; then
  # Only the images differ from the defaults: the locally built ones. The
  # mirrors' upstreams cannot be reached without internet, so the demo runs none.
  cat >"$CONFIG" <<'YAML'
# marina demo lab (test/demo/demo.sh): the defaults, with locally built images.
vm:
  driver: host
images:
  registry: marina-test/registry:v3.1.2
  dnsEtcd: marina-test/etcd:v3.7.3
  dnsServer: marina-test/coredns:v1.15.0
registries:
  mirrors: []
YAML
fi
export MARINA_CONFIG="$CONFIG"

say "marina up (config $CONFIG)"
"$MARINA" up

say "marina up again: nothing to change"
"$MARINA" up

say "marina status"
"$MARINA" status

say "marina doctor"
"$MARINA" doctor

say "a name in the local zone, resolved by marina's DNS server"
# The record is written the way ExternalDNS writes the name of a LoadBalancer
# Service (in a cluster, ExternalDNS does this by itself).
docker exec marina-dns-etcd etcdctl put /skydns/internal/demo/hello '{"host":"172.30.1.16","ttl":30}' >/dev/null
"$MARINA" dns lookup hello.demo.internal

say "done: the lab is up. export MARINA_CONFIG=$CONFIG to use it; marina destroy --yes removes it."
