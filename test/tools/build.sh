#!/usr/bin/env bash
# build.sh — build the binaries of marina's tier-3 tests, statically and without any
# download but the Go module proxy:
#   kube-apiserver, kubectl  k8s.io/kubernetes (this module)
#   kubelet, kubeadm, kube-controller-manager, kube-scheduler, kube-proxy
#                            the same module: the tests' kind node image (test/node)
#   etcd                     test/images (the same wrapper main as the tier-2 etcd image)
#   metallb-controller       go.universe.tf/metallb/controller (module ./metallb)
#   metallb-speaker          go.universe.tf/metallb/speaker (the same module; node image)
#   external-dns             sigs.k8s.io/external-dns (module ./externaldns, Go 1.27:
#                            GOTOOLCHAIN from its go.mod's toolchain line, for it alone)
#   cert-manager-controller  github.com/cert-manager/cert-manager (version pinned by
#                            ./certmanager/go.mod) with its cmd/controller (_overlay)
#
#   test/tools/build.sh
#
# The binaries go to $MARINA_TEST_CACHE/kube/bin (outside the checkout), where
# sdk/kubetest finds them. A file .inputs next to them records the hash of what
# determined them (every module's go.mod and go.sum, this script, the tools, etcd,
# overlay and stub sources, the Go version); when it matches and every binary is
# there, nothing is built, so a second run takes about a second. A cold build takes
# ~15-20 min on 2 cores (and several GB of Go build cache), see README.md.
#
# Environment:
#   MARINA_TEST_CACHE  cache dir (default $HOME/.cache/marina-test). Go's own module
#                      and build caches stay where `go env GOMODCACHE GOCACHE` say.
#   FORCE=1            rebuild even when the binaries are up to date.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
images="$(cd "$here/../images" && pwd)"
metallb="$here/metallb"
externaldns="$here/externaldns"
certmanager="$here/certmanager"
cd "$here"

CACHE="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}"
BIN="$CACHE/kube/bin"
export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"

say() { echo "build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# The Go toolchain of ExternalDNS (it needs Go 1.27; everything else builds with the
# machine's Go): the toolchain line of its module, fetched from the module proxy.
edns_toolchain="$(awk '$1 == "toolchain" { print $2 }' "$externaldns/go.mod")"
[[ "$edns_toolchain" =~ ^go1\.[0-9]+\.[0-9]+$ ]] ||
  die "$externaldns/go.mod has no toolchain line goMAJOR.MINOR.PATCH (got \"$edns_toolchain\")"

kube_cmds=(kube-apiserver kubectl kubelet kubeadm kube-controller-manager kube-scheduler kube-proxy)
binaries=("${kube_cmds[@]}" etcd metallb-controller metallb-speaker external-dns cert-manager-controller)

# inputs: hash of everything that determines the binaries.
inputs() {
  {
    go version
    go env GOOS GOARCH CGO_ENABLED
    echo "external-dns toolchain $edns_toolchain"
    # Paths relative to test/, so that another checkout of the same sources
    # (CI's fresh clone) finds the binaries up to date.
    (cd "$here/.." && sha256sum tools/go.mod tools/go.sum tools/build.sh tools/tools.go \
      images/go.mod images/go.sum tools/metallb/go.mod tools/metallb/go.sum \
      tools/externaldns/go.mod tools/externaldns/go.sum tools/certmanager/go.mod tools/certmanager/go.sum)
    (cd "$here/.." && find images/etcd -maxdepth 1 -type f -name '*.go' | LC_ALL=C sort | xargs sha256sum)
    (cd "$here" && find metallb/_overlay externaldns/_overlay externaldns/stub certmanager/_overlay -type f \( -name '*.go' -o -name go.mod \) |
      LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -d' ' -f1
}

complete() {
  local b
  for b in "${binaries[@]}"; do
    [ -x "$BIN/$b" ] || return 1
  done
}

mkdir -p "$CACHE/kube"
# One build at a time per cache dir (CI and a developer shell may overlap).
exec 9>"$CACHE/kube/.lock"
flock -w 1800 9 || die "another build.sh holds $CACHE/kube/.lock (waited 30 min)"

hash="$(inputs)"
if [ "${FORCE:-}" != 1 ] && complete && [ "$(cat "$BIN/.inputs" 2>/dev/null || true)" = "$hash" ]; then
  say "$BIN is up to date (${binaries[*]})"
  exit 0
fi

version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
  die "cannot read the version of k8s.io/kubernetes from $here/go.mod"
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] ||
  die "k8s.io/kubernetes $version in $here/go.mod is not a release vMAJOR.MINOR.PATCH"
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
etcd_version="$(cd "$images" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" ||
  die "cannot read the version of go.etcd.io/etcd/server/v3 from $images/go.mod"
metallb_version="$(cd "$metallb" && go list -m -f '{{.Version}}' go.universe.tf/metallb)" ||
  die "cannot read the version of go.universe.tf/metallb from $metallb/go.mod"
edns_version="$(cd "$externaldns" && GOTOOLCHAIN="$edns_toolchain" go list -m -f '{{.Version}}' sigs.k8s.io/external-dns)" ||
  die "cannot read the version of sigs.k8s.io/external-dns from $externaldns/go.mod (with GOTOOLCHAIN=$edns_toolchain)"
cm_version="$(cd "$certmanager" && go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)" ||
  die "cannot read the version of github.com/cert-manager/cert-manager from $certmanager/go.mod"

# Without these stamps the binaries report v0.0.0-master+$Format:...$, which kubectl
# cannot parse; hack/lib/version.sh sets the same variables in both packages.
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean"
done

# Build next to the old binaries and swap at the end, so a failed build leaves the
# previous set alone and a running test never sees half a set.
new="$CACHE/kube/bin.new"
rm -rf "$new"
mkdir -p "$new"

start=$(date +%s)
# One go build for all: their shared packages compile once and the links run
# side by side.
say "go build k8s.io/kubernetes/cmd/{$(IFS=,; echo "${kube_cmds[*]}")} ($version) -> $BIN/"
t0=$(date +%s)
go build -trimpath -ldflags "$ldflags" -o "$new/" "${kube_cmds[@]/#/k8s.io/kubernetes/cmd/}"
say "  ${kube_cmds[*]} built in $(( $(date +%s) - t0 ))s"
say "go build etcd ($etcd_version, from $images/etcd) -> $BIN/etcd"
t0=$(date +%s)
(cd "$images" && go build -trimpath -ldflags "-s -w" -o "$new/etcd" ./etcd)
say "  etcd built in $(( $(date +%s) - t0 ))s"

# MetalLB v0.16.2 requires github.com/metallb/frr-k8s v0.0.27, which the module proxy
# does not serve; metallb/go.mod replaces it with v0.0.21, which lacks one type that
# MetalLB compiles against (AsPathPrependPrefixes, and its field in Advertise). Build
# against a copy of v0.0.21's api/v1beta1 with them added (metallb/_overlay), made
# here in the cache: files in the module cache cannot be overlaid, and no copy of
# frr-k8s lives in the checkout. The controller does not use the type at run time.
src="$CACHE/kube/src"
rm -rf "$src"
mkdir -p "$src/metallb-mod" "$src/frr-k8s/api"
(cd "$metallb" && go mod download github.com/metallb/frr-k8s) ||
  die "cannot download github.com/metallb/frr-k8s (the replacement in $metallb/go.mod)"
frr="$(cd "$metallb" && go list -m -f '{{.Dir}}' github.com/metallb/frr-k8s)"
[ -f "$frr/api/v1beta1/frrconfiguration_types.go" ] ||
  die "github.com/metallb/frr-k8s in $metallb/go.mod has no api/v1beta1/frrconfiguration_types.go (dir \"$frr\")"
cp "$frr/go.mod" "$src/frr-k8s/"
cp -r "$frr/api/v1beta1" "$src/frr-k8s/api/"
chmod -R u+w "$src/frr-k8s"
types="$src/frr-k8s/api/v1beta1/frrconfiguration_types.go"
anchor=$'\tPrefixesWithCommunity []CommunityPrefixes `json:"withCommunity,omitempty"`'
added=$'\tPrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"` // added by marina\'s test/tools/build.sh'
grep -qxF "$anchor" "$types" || die "no PrefixesWithCommunity field in $types to add PrefixesWithAsPathPrepend after"
awk -v anchor="$anchor" -v added="$added" '{ print } $0 == anchor { print added }' "$types" >"$types.new"
mv "$types.new" "$types"
cp "$metallb/_overlay/aspathprepend.go" "$src/frr-k8s/api/v1beta1/zz_marina_aspathprepend.go"
sed "s#^replace github.com/metallb/frr-k8s => .*#replace github.com/metallb/frr-k8s => $src/frr-k8s#" \
  "$metallb/go.mod" >"$src/metallb-mod/go.mod"
grep -q "=> $src/frr-k8s\$" "$src/metallb-mod/go.mod" || die "no replace of github.com/metallb/frr-k8s in $metallb/go.mod"
cp "$metallb/go.sum" "$src/metallb-mod/go.sum"

# MetalLB sets its version in the source (internal/version); its Makefile stamps only
# gitCommit and gitBranch, which a module zip does not have.
say "go build go.universe.tf/metallb/{controller,speaker} ($metallb_version) -> $BIN/metallb-{controller,speaker}"
t0=$(date +%s)
(cd "$metallb" && go build -modfile="$src/metallb-mod/go.mod" -trimpath -ldflags "-s -w" \
  -o "$src/metallb-out/" go.universe.tf/metallb/controller go.universe.tf/metallb/speaker)
mv "$src/metallb-out/controller" "$new/metallb-controller"
mv "$src/metallb-out/speaker" "$new/metallb-speaker"
say "  metallb-controller and metallb-speaker built in $(( $(date +%s) - t0 ))s"

# ExternalDNS links every provider's SDK (AWS, Azure, Google, OCI, ...), most of a
# cold build. The tests use the coredns provider and the txt registry only, so the
# build compiles a copy of the module (made here in the cache) whose provider and
# registry tables (provider/factory/provider.go, registry/factory/registry.go) are
# replaced by externaldns/_overlay's: upstream's API and code, fewer entries.
# Everything else is upstream's, unchanged.
(cd "$externaldns" && GOTOOLCHAIN="$edns_toolchain" go mod download sigs.k8s.io/external-dns) ||
  die "cannot download sigs.k8s.io/external-dns (the require in $externaldns/go.mod)"
edns_dir="$(cd "$externaldns" && GOTOOLCHAIN="$edns_toolchain" go list -m -f '{{.Dir}}' sigs.k8s.io/external-dns)"
[ -f "$edns_dir/provider/factory/provider.go" ] && [ -f "$edns_dir/registry/factory/registry.go" ] ||
  die "sigs.k8s.io/external-dns in $externaldns/go.mod has no provider/factory/provider.go or registry/factory/registry.go (dir \"$edns_dir\"); update externaldns/_overlay for this version"
mkdir -p "$src/external-dns" "$src/externaldns-mod"
(cd "$edns_dir" && tar --exclude=./docs --exclude=./charts --exclude=./e2e --exclude='*_test.go' -cf - .) | tar -C "$src/external-dns" -xf -
chmod -R u+w "$src/external-dns"
(cd "$externaldns/_overlay" && find . -name '*.go' | while read -r f; do cp "$f" "$src/external-dns/$f"; done)
{ cat "$externaldns/go.mod"; echo; echo "replace sigs.k8s.io/external-dns => $src/external-dns"; } |
  sed "s#=> \./stub/#=> $externaldns/stub/#" >"$src/externaldns-mod/go.mod"
cp "$externaldns/go.sum" "$src/externaldns-mod/go.sum"

say "go build sigs.k8s.io/external-dns ($edns_version, coredns/txt build, GOTOOLCHAIN=$edns_toolchain) -> $BIN/external-dns"
t0=$(date +%s)
(cd "$externaldns" && GOTOOLCHAIN="$edns_toolchain" go build -modfile="$src/externaldns-mod/go.mod" -trimpath \
  -ldflags "-s -w -X sigs.k8s.io/external-dns/pkg/apis/externaldns.Version=$edns_version" \
  -o "$new/external-dns" sigs.k8s.io/external-dns)
say "  external-dns built in $(( $(date +%s) - t0 ))s"

# cert-manager's controller: its main and app (cmd/controller) are a module of their
# own upstream, github.com/cert-manager/cert-manager/controller-binary, which the
# module proxy does not serve (it lives under a path tag). Its code is small and
# imports the root module's internal packages, so it is built inside a copy of the
# root module (cert-manager's own go.mod and go.sum) with certmanager/_overlay's copy
# of cmd/controller from the same tag, the import path of its app rewritten. The
# Venafi issuer's client (github.com/Venafi/vcert/v5) is not served either: the two
# Venafi controller packages are replaced by their names only (_overlay/pkg) and the
# Venafi issuer's import dropped: marina's issuer is a CA issuer.
say "go build github.com/cert-manager/cert-manager/cmd/controller ($cm_version) -> $BIN/cert-manager-controller"
t0=$(date +%s)
(cd "$certmanager" && go mod download github.com/cert-manager/cert-manager) ||
  die "cannot download github.com/cert-manager/cert-manager (the require in $certmanager/go.mod)"
cm_dir="$(cd "$certmanager" && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)"
[ -d "$cm_dir/internal/cmd/util" ] ||
  die "github.com/cert-manager/cert-manager in $certmanager/go.mod has no internal/cmd/util (dir \"$cm_dir\"); update certmanager/_overlay for this version"
mkdir -p "$src/cert-manager"
(cd "$cm_dir" && tar --exclude=./docs --exclude=./design --exclude=./logo -cf - .) | tar -C "$src/cert-manager" -xf -
chmod -R u+w "$src/cert-manager"
for d in pkg/controller/certificaterequests/venafi pkg/controller/certificatesigningrequests/venafi; do
  [ -d "$src/cert-manager/$d" ] || die "cert-manager $cm_version has no $d; update certmanager/_overlay for this version"
  rm -f "$src/cert-manager/$d"/*.go
done
cp -r "$certmanager/_overlay/." "$src/cert-manager/"
grep -q 'pkg/issuer/venafi"' "$src/cert-manager/cmd/controller/app/start.go" ||
  die "certmanager/_overlay/cmd/controller/app/start.go no longer imports the Venafi issuer; update build.sh"
sed -i '/pkg\/issuer\/venafi"/d' "$src/cert-manager/cmd/controller/app/start.go"
sed -i 's#github.com/cert-manager/cert-manager/controller-binary/#github.com/cert-manager/cert-manager/cmd/controller/#' \
  "$src/cert-manager/cmd/controller/main.go" "$src/cert-manager/cmd/controller/app/"*.go
(cd "$src/cert-manager" && go build -mod=mod -trimpath \
  -ldflags "-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=$cm_version" \
  -o "$new/cert-manager-controller" ./cmd/controller)
say "  cert-manager-controller built in $(( $(date +%s) - t0 ))s"

# Smoke checks: the static binaries run and report the versions of the go.mod files.
out="$("$new/kube-apiserver" --version 2>&1)" || die "kube-apiserver --version failed: $out"
[ "$out" = "Kubernetes $version" ] || die "kube-apiserver --version printed \"$out\", want \"Kubernetes $version\""
for b in kubelet kube-controller-manager kube-scheduler kube-proxy; do
  out="$("$new/$b" --version 2>&1)" || die "$b --version failed: $out"
  [ "$out" = "Kubernetes $version" ] || die "$b --version printed \"$out\", want \"Kubernetes $version\""
done
out="$("$new/kubeadm" version -o short 2>&1)" || die "kubeadm version failed: $out"
[ "$out" = "$version" ] || die "kubeadm version printed \"$out\", want \"$version\""
out="$("$new/kubectl" version --client -o json 2>&1)" || die "kubectl version --client failed: $out"
grep -q "\"gitVersion\": \"$version\"" <<<"$out" || die "kubectl version --client does not report $version: $out"
out="$("$new/etcd" --version 2>&1)" || die "etcd --version failed: $out"
grep -q "^etcd Version: ${etcd_version#v}$" <<<"$out" || die "etcd --version does not report $etcd_version: $out"
# metallb-controller has no --version: check that --help runs (Go's flag package exits
# 0) and that the binary's build info names the module version.
out="$("$new/metallb-controller" --help 2>&1)" || die "metallb-controller --help failed: $out"
grep -q -- "-lb-class" <<<"$out" || die "metallb-controller --help does not list -lb-class: $out"
out="$(go version -m "$new/metallb-controller")" || die "go version -m metallb-controller failed: $out"
grep -Eq "^[[:space:]]mod[[:space:]]go.universe.tf/metallb[[:space:]]$metallb_version[[:space:]]" <<<"$out" ||
  die "metallb-controller was not built from go.universe.tf/metallb $metallb_version: $out"
out="$("$new/metallb-speaker" --help 2>&1)" || die "metallb-speaker --help failed: $out"
grep -q -- "-ml-bindaddr" <<<"$out" || die "metallb-speaker --help does not list -ml-bindaddr: $out"
out="$("$new/external-dns" --version 2>&1)" || die "external-dns --version failed: $out"
[ "$out" = "$edns_version" ] || die "external-dns --version printed \"$out\", want \"$edns_version\""
out="$("$new/cert-manager-controller" --help 2>&1)" || die "cert-manager-controller --help failed: $out"
grep -q -- "--cluster-resource-namespace" <<<"$out" || die "cert-manager-controller --help does not list --cluster-resource-namespace: $out"
out="$(go version -m "$new/cert-manager-controller")" || die "go version -m cert-manager-controller failed: $out"
grep -Eq "^[[:space:]]mod[[:space:]]github.com/cert-manager/cert-manager[[:space:]]" <<<"$out" ||
  die "cert-manager-controller was not built from github.com/cert-manager/cert-manager: $out"

echo "$hash" >"$new/.inputs"
rm -rf "$CACHE/kube/bin.old"
[ ! -e "$BIN" ] || mv "$BIN" "$CACHE/kube/bin.old"
mv "$new" "$BIN"
rm -rf "$CACHE/kube/bin.old"
rm -rf "$src"
say "built ${kube_cmds[*]} ($version), etcd ($etcd_version), metallb-controller and -speaker ($metallb_version)" \
  "external-dns ($edns_version) and cert-manager-controller ($cm_version) into $BIN in $(( $(date +%s) - start ))s"
