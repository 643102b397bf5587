#!/usr/bin/env bash
# build.sh — build marina's tier-2 test images from Go modules, no registry needed.
#
#   test/images/build.sh [registry|etcd|coredns ...]     (default: all of them)
#
# For each image: compile its main package(s) statically (CGO_ENABLED=0) into a
# build context under the cache dir (outside the checkout), then `docker build` a
# FROM scratch image tagged marina-test/<name>:<upstream version from go.mod>.
# An image whose tag exists and whose label marina.test.inputs matches the hash of
# its inputs (go.mod, go.sum, this script, the image's directory, the Go version)
# is left alone, so a second run takes seconds.
#
# Environment:
#   MARINA_TEST_CACHE  cache dir (default $HOME/.cache/marina-test); build contexts
#                      go to $MARINA_TEST_CACHE/images/<name>. Go's own module and
#                      build caches stay where `go env GOMODCACHE GOCACHE` say.
#   FORCE=1            rebuild even when the image is up to date.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

CACHE="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}"
ALL=(registry etcd coredns)
export CGO_ENABLED=0 GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# The Debian daemon (20.10) has no BuildKit front end in the CLI here; the classic
# builder is enough for COPY into scratch.
export DOCKER_BUILDKIT=0

say() { echo "build.sh: $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# module <name>: the upstream module whose version names the image.
module() {
  case "$1" in
    registry) echo github.com/distribution/distribution/v3 ;;
    etcd) echo go.etcd.io/etcd/server/v3 ;;
    coredns) echo github.com/coredns/coredns ;;
    *) die "unknown image \"$1\" (known: ${ALL[*]})" ;;
  esac
}

# binaries <name>: "package=output" pairs to compile into the build context.
binaries() {
  case "$1" in
    registry) echo "./registry=registry" ;;
    etcd) echo "./etcd=etcd ./etcd/etcdctl=etcdctl" ;;
    coredns) echo "./coredns=coredns" ;;
  esac
}

# ldflags <name> <version>: version stamping where upstream does it by -X.
ldflags() {
  local f="-s -w"
  case "$1" in
    registry) f="$f -X github.com/distribution/distribution/v3/version.version=$2" ;;
  esac
  echo "$f"
}

# inputs <name>: hash of everything that determines the image.
inputs() {
  {
    go version
    go env GOOS GOARCH
    sha256sum go.mod go.sum build.sh
    find "$1" -type f | LC_ALL=C sort | xargs sha256sum
  } | sha256sum | cut -d' ' -f1
}

command -v docker >/dev/null || die "docker CLI not found; run test/ci/docker.sh"
timeout 15 docker info >/dev/null 2>&1 || die "docker engine not answering; run test/ci/docker.sh"

images=("$@")
[ ${#images[@]} -gt 0 ] || images=("${ALL[@]}")

mkdir -p "$CACHE/images"
# One build at a time per cache dir (CI and a developer shell may overlap).
exec 9>"$CACHE/images/.lock"
flock -w 1800 9 || die "another build.sh holds $CACHE/images/.lock"

for name in "${images[@]}"; do
  mod="$(module "$name")"
  version="$(go list -m -f '{{.Version}}' "$mod")" || die "cannot read the version of $mod from go.mod"
  tag="marina-test/$name:$version"
  hash="$(inputs "$name")"
  have="$(docker image inspect -f '{{index .Config.Labels "marina.test.inputs"}}' "$tag" 2>/dev/null || true)"
  if [ "$have" = "$hash" ] && [ "${FORCE:-}" != 1 ]; then
    say "$tag is up to date"
    continue
  fi

  start=$(date +%s)
  ctx="$CACHE/images/$name"
  rm -rf "$ctx"
  mkdir -p "$ctx"
  for pair in $(binaries "$name"); do
    pkg="${pair%%=*}" out="${pair#*=}"
    say "go build $pkg -> $ctx/$out"
    go build -trimpath -ldflags "$(ldflags "$name" "$version")" -o "$ctx/$out" "$pkg"
  done
  # Everything in the image's directory but Go sources goes into the context.
  find "$name" -maxdepth 1 -type f ! -name '*.go' -exec cp {} "$ctx/" \;
  built=$(date +%s)

  say "docker build $tag"
  # The classic builder warns that it is deprecated on stderr; show its output only
  # when the build fails.
  docker build -q \
    --label "marina.test.image=$name" \
    --label "marina.test.inputs=$hash" \
    -t "$tag" "$ctx" >"$ctx.log" 2>&1 || { cat "$ctx.log" >&2; die "docker build $tag failed"; }
  # Drop the previous build of this image, now untagged.
  docker image prune -f --filter "label=marina.test.image=$name" >/dev/null

  # Smoke check: the static binary runs in the empty image.
  case "$name" in
    registry) docker run --rm "$tag" --version >/dev/null ;;
    etcd) docker run --rm "$tag" --version >/dev/null
          docker run --rm --entrypoint /usr/local/bin/etcdctl "$tag" version >/dev/null ;;
    coredns) docker run --rm "$tag" -version >/dev/null ;;
  esac || die "$tag was built but its binary does not run"
  say "$tag built (go build $((built - start))s, image $(( $(date +%s) - built ))s)"
done
