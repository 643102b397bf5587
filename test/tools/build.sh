#!/usr/bin/env bash
# build.sh — build the binaries of marina's tier-3 tests: kube-apiserver and kubectl
# from k8s.io/kubernetes (this module), and etcd from test/images (the same wrapper
# main as the tier-2 etcd image), statically and without any download but the Go
# module proxy.
#
#   test/tools/build.sh
#
# The binaries go to $MARINA_TEST_CACHE/kube/bin (outside the checkout), where
# test/kubetest finds them. A file .inputs next to them records the hash of what
# determined them (both modules' go.mod and go.sum, this script, the tools and etcd
# sources, the Go version); when it matches and every binary is there, nothing is
# built, so a second run takes about a second. A cold build takes ~7 min on 2 cores
# (and ~3 GB of Go build cache).
#
# Environment:
#   MARINA_TEST_CACHE  cache dir (default $HOME/.cache/marina-test). Go's own module
#                      and build caches stay where `go env GOMODCACHE GOCACHE` say.
#   FORCE=1            rebuild even when the binaries are up to date.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
images="$(cd "$here/../images" && pwd)"
cd "$here"

CACHE="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}"
BIN="$CACHE/kube/bin"
export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"

say() { echo "build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# inputs: hash of everything that determines the three binaries.
inputs() {
  {
    go version
    go env GOOS GOARCH CGO_ENABLED
    sha256sum "$here/go.mod" "$here/go.sum" "$here/build.sh" "$here/tools.go"
    sha256sum "$images/go.mod" "$images/go.sum"
    find "$images/etcd" -maxdepth 1 -type f -name '*.go' | LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -d' ' -f1
}

complete() {
  local b
  for b in kube-apiserver kubectl etcd; do
    [ -x "$BIN/$b" ] || return 1
  done
}

mkdir -p "$CACHE/kube"
# One build at a time per cache dir (CI and a developer shell may overlap).
exec 9>"$CACHE/kube/.lock"
flock -w 1800 9 || die "another build.sh holds $CACHE/kube/.lock (waited 30 min)"

hash="$(inputs)"
if [ "${FORCE:-}" != 1 ] && complete && [ "$(cat "$BIN/.inputs" 2>/dev/null || true)" = "$hash" ]; then
  say "$BIN is up to date (kube-apiserver, kubectl, etcd)"
  exit 0
fi

version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" ||
  die "cannot read the version of k8s.io/kubernetes from $here/go.mod"
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] ||
  die "k8s.io/kubernetes $version in $here/go.mod is not a release vMAJOR.MINOR.PATCH"
major="${BASH_REMATCH[1]}" minor="${BASH_REMATCH[2]}"
etcd_version="$(cd "$images" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)" ||
  die "cannot read the version of go.etcd.io/etcd/server/v3 from $images/go.mod"

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
for cmd in kube-apiserver kubectl; do
  say "go build k8s.io/kubernetes/cmd/$cmd ($version) -> $BIN/$cmd"
  t0=$(date +%s)
  go build -trimpath -ldflags "$ldflags" -o "$new/$cmd" "k8s.io/kubernetes/cmd/$cmd"
  say "  $cmd built in $(( $(date +%s) - t0 ))s"
done
say "go build etcd ($etcd_version, from $images/etcd) -> $BIN/etcd"
t0=$(date +%s)
(cd "$images" && go build -trimpath -ldflags "-s -w" -o "$new/etcd" ./etcd)
say "  etcd built in $(( $(date +%s) - t0 ))s"

# Smoke checks: the static binaries run and report the versions of the go.mod files.
out="$("$new/kube-apiserver" --version 2>&1)" || die "kube-apiserver --version failed: $out"
[ "$out" = "Kubernetes $version" ] || die "kube-apiserver --version printed \"$out\", want \"Kubernetes $version\""
out="$("$new/kubectl" version --client -o json 2>&1)" || die "kubectl version --client failed: $out"
grep -q "\"gitVersion\": \"$version\"" <<<"$out" || die "kubectl version --client does not report $version: $out"
out="$("$new/etcd" --version 2>&1)" || die "etcd --version failed: $out"
grep -q "^etcd Version: ${etcd_version#v}$" <<<"$out" || die "etcd --version does not report $etcd_version: $out"

echo "$hash" >"$new/.inputs"
rm -rf "$CACHE/kube/bin.old"
[ ! -e "$BIN" ] || mv "$BIN" "$CACHE/kube/bin.old"
mv "$new" "$BIN"
rm -rf "$CACHE/kube/bin.old"
say "built kube-apiserver, kubectl ($version) and etcd ($etcd_version) into $BIN in $(( $(date +%s) - start ))s"
