#!/usr/bin/env bash
# build.sh — the tests' kind node image, built offline: marina-test/kind-node:<k8s version>.
#
#   test/node/build.sh          (as root; test/setup.sh runs it after the tier-3 binaries)
#
# A normal kind node image (what `kind create cluster --image` and marina's
# images.kindNode take), assembled the way kind v0.33.0 assembles its own
# (images/base/Dockerfile, pkg/build/nodeimage) from parts this machine can get:
#
#   rootfs        Debian bookworm by mmdebstrap (Debian's mirror, the only network used):
#                 systemd, iptables, nftables, iproute2, conntrack, ... (kind's base list)
#   kind's files  images/base/files of the pinned kind module: the entrypoint, the
#                 kubelet and containerd units, containerd's config, /kind/bin/*
#   runtime       containerd v2.3.4 (+ shim, ctr), runc v1.4.3, CNI plugins v1.9.1,
#                 from this module (test/node/go.mod), as kind's base image has them
#   kubernetes    kubelet, kubeadm, kubectl from test/tools (test/tools/build.sh,
#                 the version the tier-3 tests use), in /usr/bin as kind puts them
#   images        preloaded in containerd's k8s.io namespace (ctr import --no-unpack,
#                 pinned, as kind's node image builder does), every one built here:
#                 kube-apiserver, -controller-manager, -scheduler, -proxy, etcd, CoreDNS
#                 (with its kubernetes plugin), pause (from the kubernetes module's C
#                 source), MetalLB controller and speaker, ExternalDNS, cert-manager's
#                 controller (as user 65532, like upstream's distroless image) — tagged with the
#                 names kubeadm and marina's plugins use — plus the CNI agent nodenet
#                 and the echo server of test/node/agents
#   CNI           /kind/manifests/default-cni.yaml runs nodenet (kindnetd cannot be
#                 obtained): ptp + host-local per node, routes between nodes
#
# What differs from kind's own image, and why (test/README.md, "Real nodes"):
#   - /usr/local/bin/marina-node-entrypoint runs before kind's entrypoint. Where
#     Docker ran the node without --privileged (this machine refuses it; the
#     tests' docker shim gives the equivalent flags) it makes the cgroup mounts
#     writable and /proc/sys/net (the node's own network namespace) writable,
#     and answers the kubelet's six kernel tunables with files of the values it
#     wants, so it never writes the host's; /proc/sys stays read-only. Under a
#     real --privileged it does nothing.
#   - systemd-sysctl is masked (with a read-only /proc/sys it could only fail;
#     kind's net.* settings are applied by the wrapper to the node's netns).
#   - containerd: restrict_oom_score_adj = true (runc cannot lower an
#     oom_score_adj without CAP_SYS_RESOURCE).
#   - the kubelet gets failCgroupV1: false through a config drop-in (this
#     machine runs cgroup v1; kubelet 1.35+ refuses it by default).
#
# Cached: the image carries a label marina.test.inputs with the hash of every
# input (this directory, test/tools' and test/images' module files, the kind
# module version, the Go version, the tier-3 binaries); a matching image is left
# alone (about a second). The rootfs tarball is cached by its package list.
# FORCE=1 rebuilds. MARINA_TEST_CACHE (default ~/.cache/marina-test) holds the
# work files under node/.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
test_dir="$(cd "$here/.." && pwd)"
CACHE="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}"
WORK="$CACHE/node"
KUBE_BIN="$CACHE/kube/bin"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:-} -buildvcs=false" DOCKER_BUILDKIT=0

say() { echo "node/build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (mmdebstrap, docker)"
timeout 15 docker info >/dev/null 2>&1 || die "docker engine not answering; run test/ci/docker.sh"

k8s_version="$(cd "$test_dir/tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kind_dir="$(cd "$test_dir/.." && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)"
kind_version="$(cd "$test_dir/.." && go list -m -f '{{.Version}}' sigs.k8s.io/kind)"
[ -d "$kind_dir/images/base/files" ] || (cd "$test_dir/.." && go mod download sigs.k8s.io/kind)
[ -d "$kind_dir/images/base/files" ] || die "no images/base/files in the kind module ($kind_dir)"
k8s_dir="$(cd "$test_dir/tools" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)"
TAG="marina-test/kind-node:$k8s_version"

# kubeadm's images and the tier-3 binaries they hold (name=binary).
kube_images=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
node_bins=(kubelet kubeadm kubectl)
for b in "${kube_images[@]}" "${node_bins[@]}" etcd metallb-controller metallb-speaker external-dns cert-manager-controller; do
  [ -x "$KUBE_BIN/$b" ] || die "$KUBE_BIN/$b missing: run test/tools/build.sh first"
done
coredns_bin="$CACHE/images/coredns/coredns"
[ -x "$coredns_bin" ] || die "$coredns_bin missing: run test/images/build.sh first"

# The rootfs: kind's base package list (images/base/Dockerfile) from bookworm.
SUITE=bookworm
MIRROR="${MARINA_TEST_NODE_MIRROR:-http://deb.debian.org/debian}"
PACKAGES=(
  systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux mount kmod
  libseccomp2 pigz bash ca-certificates curl jq procps e2fsprogs socat
)

inputs() {
  {
    go version
    echo "kubernetes $k8s_version kind $kind_version $SUITE $MIRROR ${PACKAGES[*]}"
    (cd "$test_dir" && find node -path node/agents/.cache -prune -o -type f -print | LC_ALL=C sort | xargs sha256sum)
    (cd "$test_dir" && sha256sum tools/go.mod tools/go.sum images/go.mod images/go.sum)
    cat "$KUBE_BIN/.inputs" 2>/dev/null || true
    sha256sum "$coredns_bin" | cut -d' ' -f1
  } | sha256sum | cut -d' ' -f1
}

mkdir -p "$WORK"
exec 9>"$WORK/.lock"
flock -w 1800 9 || die "another node/build.sh holds $WORK/.lock (waited 30 min)"

hash="$(inputs)"
have="$(docker image inspect -f '{{index .Config.Labels "marina.test.inputs"}}' "$TAG" 2>/dev/null || true)"
if [ "$have" = "$hash" ] && [ "${FORCE:-}" != 1 ]; then
  say "$TAG is up to date"
  exit 0
fi
t_all=$SECONDS

# --- 1. rootfs (cached by its package list) -------------------------------------
rootfs_key="$(echo "$SUITE $MIRROR ${PACKAGES[*]}" | sha256sum | cut -c1-16)"
rootfs_tar="$WORK/rootfs-$rootfs_key.tar"
ROOTFS_IMAGE="marina-test/node-rootfs:$rootfs_key"
if [ ! -s "$rootfs_tar" ] || [ "${FORCE:-}" = 1 ]; then
  command -v mmdebstrap >/dev/null || {
    say "installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null; }
  }
  say "mmdebstrap $SUITE (${#PACKAGES[@]} packages) -> $rootfs_tar"
  t=$SECONDS
  rm -f "$WORK"/rootfs-*.tar
  rm -rf "$rootfs_tar.tmp"
  mmdebstrap --mode=root --format=tar --variant=minbase --components=main \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='rm -f "$1/etc/machine-id" && touch "$1/etc/machine-id"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$SUITE" "$rootfs_tar.tmp" "$MIRROR" >"$WORK/mmdebstrap.log" 2>&1 || {
      tail -n 40 "$WORK/mmdebstrap.log" >&2
      die "mmdebstrap failed (log: $WORK/mmdebstrap.log)"
    }
  mv "$rootfs_tar.tmp" "$rootfs_tar"
  say "  rootfs $(du -h "$rootfs_tar" | cut -f1) in $(( SECONDS - t ))s"
fi
if ! docker image inspect "$ROOTFS_IMAGE" >/dev/null 2>&1; then
  docker import --change 'CMD ["/bin/bash"]' "$rootfs_tar" "$ROOTFS_IMAGE" >/dev/null
fi

# --- 2. the programs of this module and of agents/ ------------------------------
ctx="$WORK/ctx"
rm -rf "$ctx"
mkdir -p "$ctx/bin" "$ctx/cni" "$ctx/images" "$ctx/kind"
t=$SECONDS
say "go build containerd v2, ctr, the runc shim, the CNI plugins (static)"
(cd "$here" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs no_aufs urfave_cli_no_docs" \
  -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)" \
  -o "$ctx/bin/" github.com/containerd/containerd/v2/cmd/containerd \
  github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/ctr)
(cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/cni/" \
  github.com/containernetworking/plugins/plugins/ipam/host-local github.com/containernetworking/plugins/plugins/main/loopback \
  github.com/containernetworking/plugins/plugins/main/ptp github.com/containernetworking/plugins/plugins/meta/portmap)
say "go build runc (cgo, libseccomp: runc's own build tags)"
dpkg-query -W -f='${Status}' libseccomp-dev 2>/dev/null | grep -q "install ok installed" || {
  say "installing libseccomp-dev (runc links libseccomp)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libseccomp-dev >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends libseccomp-dev >/dev/null; }
}
(cd "$here" && CGO_ENABLED=1 go build -trimpath -tags "seccomp urfave_cli_no_docs" \
  -ldflags "-s -w -X main.version=$(go list -m -f '{{.Version}}' github.com/opencontainers/runc | sed 's/^v//')" \
  -o "$ctx/bin/runc" github.com/opencontainers/runc)
say "go build nodenet and echo (test/node/agents)"
(cd "$here/agents" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$ctx/images/" ./cmd/nodenet ./cmd/echo)
say "  programs built in $(( SECONDS - t ))s"

say "gcc -static pause ($k8s_dir/build/pause/linux/pause.c)"
gcc -Os -static -o "$ctx/images/pause" "$k8s_dir/build/pause/linux/pause.c" -DVERSION="\"$k8s_version-marina-test\""

# --- 3. the images the node preloads --------------------------------------------
# kubeadm's list for this version (etcd, pause and CoreDNS tags differ by release).
mapfile -t kubeadm_images < <("$KUBE_BIN/kubeadm" config images list --kubernetes-version "$k8s_version" 2>/dev/null)
[ "${#kubeadm_images[@]}" -ge 7 ] || die "kubeadm config images list gave ${#kubeadm_images[@]} images: ${kubeadm_images[*]}"
image_for() { # image_for <kubeadm image name part>: its full kubeadm tag
  local i
  for i in "${kubeadm_images[@]}"; do
    case "$i" in */"$1":*) echo "$i"; return ;; esac
  done
  die "kubeadm lists no $1 image (${kubeadm_images[*]})"
}
pause_tag="$(image_for pause)"
# kind's containerd config names its own sandbox image; both names point at one image.
kind_pause_tag="$(sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$kind_dir/images/base/files/etc/containerd/config.toml")"
[ -n "$kind_pause_tag" ] || die "no sandbox_image in kind's containerd config.toml"
metallb_version="$(cd "$test_dir/tools/metallb" && go list -m -f '{{.Version}}' go.universe.tf/metallb)"
edns_version="$(cd "$test_dir/tools/externaldns" && GOTOOLCHAIN="$(awk '$1 == "toolchain" { print $2 }' go.mod)" go list -m -f '{{.Version}}' sigs.k8s.io/external-dns)"
cm_version="$(cd "$test_dir/tools/certmanager" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)"

# image <tag> <base> <binary path in image> <source file> [more source=dest pairs]
saved=()
image() {
  local tag="$1" base="$2" dest="$3" src="$4"
  local d
  d="$(mktemp -d "$WORK/img.XXXXXX")"
  cp "$src" "$d/bin"
  {
    echo "FROM $base"
    echo "COPY bin $dest"
    echo "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "ENTRYPOINT [\"$dest\"]"
  } >"$d/Dockerfile"
  docker build -q -t "$tag" "$d" >"$d.log" 2>&1 || { cat "$d.log" >&2; die "docker build $tag failed"; }
  rm -rf "$d" "$d.log"
  saved+=("$tag")
}
t=$SECONDS
say "images: ${kubeadm_images[*]}, MetalLB $metallb_version, ExternalDNS $edns_version, cert-manager $cm_version, nodenet, echo"
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  image "$(image_for "$b")" scratch "/usr/local/bin/$b" "$KUBE_BIN/$b"
done
# kube-proxy programs iptables: it needs the tools, and the backend the node uses
# (kind's entrypoint picks legacy or nft; kube-proxy's upstream image has
# iptables-wrapper for the same choice): the rootfs, with a wrapper doing that.
kp="$(mktemp -d "$WORK/img.XXXXXX")"
cp "$KUBE_BIN/kube-proxy" "$kp/kube-proxy.bin"
cp "$here/image/kube-proxy" "$kp/kube-proxy"
printf 'FROM %s\nCOPY kube-proxy.bin kube-proxy /usr/local/bin/\n' "$ROOTFS_IMAGE" >"$kp/Dockerfile"
docker build -q -t "$(image_for kube-proxy)" "$kp" >"$kp.log" 2>&1 || { cat "$kp.log" >&2; die "docker build kube-proxy failed"; }
rm -rf "$kp" "$kp.log"
saved+=("$(image_for kube-proxy)")
image "$(image_for etcd)" scratch /usr/local/bin/etcd "$KUBE_BIN/etcd"
image "$(image_for coredns)" scratch /coredns "$coredns_bin"
image "$pause_tag" scratch /pause "$ctx/images/pause"
[ "$kind_pause_tag" = "$pause_tag" ] || { docker tag "$pause_tag" "$kind_pause_tag"; saved+=("$kind_pause_tag"); }
image "quay.io/metallb/controller:$metallb_version" scratch /controller "$KUBE_BIN/metallb-controller"
image "quay.io/metallb/speaker:$metallb_version" scratch /speaker "$KUBE_BIN/metallb-speaker"
image "registry.k8s.io/external-dns/external-dns:$edns_version" scratch /external-dns "$KUBE_BIN/external-dns"
# cert-manager's pod runs with runAsNonRoot: the image names a numeric user, as
# upstream's (distroless static, nonroot) does.
cm="$(mktemp -d "$WORK/img.XXXXXX")"
cp "$KUBE_BIN/cert-manager-controller" "$cm/bin"
printf 'FROM scratch\nCOPY bin /app/cmd/controller/controller\nUSER 65532:65532\nENTRYPOINT ["/app/cmd/controller/controller"]\n' >"$cm/Dockerfile"
docker build -q -t "quay.io/jetstack/cert-manager-controller:$cm_version" "$cm" >"$cm.log" 2>&1 || { cat "$cm.log" >&2; die "docker build cert-manager-controller failed"; }
rm -rf "$cm" "$cm.log"
saved+=("quay.io/jetstack/cert-manager-controller:$cm_version")
image marina-test/nodenet:v1 scratch /nodenet "$ctx/images/nodenet"
image marina-test/echo:v1 scratch /echo "$ctx/images/echo"
docker save -o "$ctx/images/preload.tar" "${saved[@]}"
rm -f "$ctx/images/nodenet" "$ctx/images/echo" "$ctx/images/pause"
printf '%s\n' "${saved[@]}" >"$ctx/images/list"
say "  ${#saved[@]} images ($(du -h "$ctx/images/preload.tar" | cut -f1)) in $(( SECONDS - t ))s"

# --- 4. the node image: rootfs + kind's files + ours -----------------------------
t=$SECONDS
cp -r "$kind_dir/images/base/files" "$ctx/kind/files"
chmod -R u+w "$ctx/kind/files"
cp "$here/image/"* "$ctx/"
cp "$here/manifests/default-cni.yaml" "$ctx/default-cni.yaml"
for b in "${node_bins[@]}"; do cp "$KUBE_BIN/$b" "$ctx/bin/$b"; done
echo "$k8s_version" >"$ctx/version"
cat >"$ctx/Dockerfile" <<EOF
FROM $ROOTFS_IMAGE
# kind's base image (images/base/Dockerfile), its file layout and unit set
COPY kind/files/usr/local/bin/ /usr/local/bin/
COPY kind/files/kind/ /kind/
COPY kind/files/etc/ /etc/
RUN chmod 755 /usr/local/bin/* /kind /kind/bin /kind/bin/* \\
 && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service systemd-sysctl.service \\
 && mkdir -p /etc/kubernetes/manifests /opt/cni/bin /kind/manifests /etc/kubernetes/kubelet.conf.d
COPY bin/containerd bin/containerd-shim-runc-v2 bin/ctr /usr/local/bin/
COPY bin/runc /usr/local/sbin/runc
COPY cni/ /opt/cni/bin/
COPY bin/kubelet bin/kubeadm bin/kubectl /usr/bin/
COPY version /kind/version
COPY default-cni.yaml /kind/manifests/default-cni.yaml
COPY marina-node-entrypoint /usr/local/bin/marina-node-entrypoint
COPY 12-marina-test.conf /etc/systemd/system/kubelet.service.d/12-marina-test.conf
COPY 50-marina-test.conf /etc/kubernetes/kubelet.conf.d/50-marina-test.conf
# kind's containerd config, as its base image makes it (ctr oci spec with
# mount-product-files as a createContainer hook, no rlimits), plus
# restrict_oom_score_adj: runc cannot lower an oom_score_adj without
# CAP_SYS_RESOURCE, which this machine does not grant
RUN chmod 755 /usr/local/bin/marina-node-entrypoint \\
 && ctr oci spec \\
    | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \\
    | jq 'del(.process.rlimits)' > /etc/containerd/cri-base.json \\
 && sed -i 's/^\( *restrict_oom_score_adj = \).*/\1true/' /etc/containerd/config.toml \\
 && grep -q '^ *restrict_oom_score_adj = true' /etc/containerd/config.toml \\
 && containerd --version && runc --version && kubelet --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/marina-node-entrypoint", "/usr/local/bin/entrypoint", "/sbin/init"]
EOF
base_tag="marina-test/kind-node-base:$k8s_version"
docker build -q -t "$base_tag" "$ctx" >"$WORK/base.log" 2>&1 || { cat "$WORK/base.log" >&2; die "docker build $base_tag failed"; }
say "  base image in $(( SECONDS - t ))s"

# --- 5. preload the images, as kind's node image builder does --------------------
t=$SECONDS
build_id=""
cleanup() { [ -z "$build_id" ] || docker rm -f -v "$build_id" >/dev/null 2>&1 || true; }
trap cleanup EXIT
build_id="$(docker run -d --entrypoint=sleep --security-opt seccomp=unconfined \
  --label marina.test.node-build=1 "$base_tag" infinity)"
docker cp "$ctx/images/preload.tar" "$build_id:/preload.tar"
docker exec "$build_id" bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &'
docker exec "$build_id" bash -c 'for i in $(seq 1 50); do [ -S /run/containerd/containerd.sock ] && ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; cat /var/log/containerd-build.log; exit 1' ||
  die "containerd did not start in the build container"
docker exec "$build_id" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
  --all-platforms --no-unpack --digests /preload.tar >/dev/null
imported="$(docker exec "$build_id" ctr --namespace=k8s.io images list -q)"
# containerd's names are fully qualified: docker.io/ for a first part that is no host.
qualified() { case "${1%%/*}" in *.*|*:*|localhost) echo "$1" ;; *) echo "docker.io/$1" ;; esac; }
for i in "${saved[@]}"; do
  grep -qxF "$(qualified "$i")" <<<"$imported" || die "image $i not in the node's containerd after the import: $imported"
done
# sleep, the build container's PID 1, reaps nothing: a stopped containerd stays a zombie.
docker exec "$build_id" bash -c 'pkill -x containerd; for i in $(seq 1 150); do ps -C containerd -o stat= | grep -qv "^Z" || exit 0; sleep 0.2; done; exit 1' ||
  die "containerd did not stop in the build container"
docker exec "$build_id" rm -f /preload.tar /var/log/containerd-build.log
docker commit \
  --change 'ENTRYPOINT ["/usr/local/bin/marina-node-entrypoint", "/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'CMD []' \
  --change "LABEL marina.test.inputs=$hash marina.test.image=kind-node" \
  "$build_id" "$TAG" >/dev/null
docker rm -f -v "$build_id" >/dev/null
build_id=""
docker image rm "$base_tag" >/dev/null 2>&1 || true
docker image prune -f --filter "label=marina.test.image=kind-node" >/dev/null
say "  images preloaded in $(( SECONDS - t ))s"
say "$TAG built in $(( SECONDS - t_all ))s ($(docker image inspect -f '{{.Size}}' "$TAG" | awk '{printf "%d MB", $1/1e6}'))"
