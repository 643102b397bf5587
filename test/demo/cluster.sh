#!/usr/bin/env bash
# cluster.sh — a cluster in the demo lab on real kind nodes, so that the tests
# run beside a user's lab that has clusters (.ci/run runs it after `make demo`
# and `make test-setup`, and checks after `make test` that it still answers).
#
#   test/demo/cluster.sh create   cluster "demo" from the tests' kind node image
#                                 (test/node/build.sh), the echo server behind a
#                                 LoadBalancer Service, until its name answers
#   test/demo/cluster.sh check    GET by name answers, from the same pod
#
# As the real-node tests do, it runs marina with the tests' docker shim first on
# PATH (test/node/dockershim: this machine's Docker refuses --privileged; see
# test/README.md, "Real nodes"). The demo lab's config is $MARINA_DEMO_CONFIG
# (default ~/.marina/demo.yaml), as in demo.sh; the lab must be up.
set -euo pipefail
cd "$(dirname "$0")/../.."
export GOTOOLCHAIN=local

CONFIG="${MARINA_DEMO_CONFIG:-$HOME/.marina/demo.yaml}"
export MARINA_CONFIG="$CONFIG"
CACHE="${MARINA_TEST_CACHE:-$HOME/.cache/marina-test}"
MARINA="$PWD/bin/marina"
KUBECTL="$CACHE/kube/bin/kubectl"
K8S_VERSION="$(cd test/tools && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
IMAGE="marina-test/kind-node:$K8S_VERSION"
CLUSTER=demo
NAME="echo.default.$CLUSTER.demo.internal"
KUBECONFIG_FILE="$HOME/.kube/marina/$CLUSTER.kubeconfig"
STATE="$CACHE/demo-cluster.answer"

say() { printf '\n== %s\n' "$*"; }
die() { echo "cluster.sh: ERROR: $*" >&2; exit 1; }

[ -x "$MARINA" ] || die "no $MARINA: run make demo first"
[ -x "$KUBECTL" ] || die "no $KUBECTL: run make test-setup first"
docker image inspect "$IMAGE" >/dev/null 2>&1 || die "no node image $IMAGE: run make test-setup first"

# answer: GET http://NAME/ through the lab's DNS server; prints the echo server's pod.
answer() {
  local addr
  addr="$("$MARINA" dns lookup "$NAME" | head -n 1)" || return 1
  [ -n "$addr" ] || return 1
  curl -fsS --max-time 3 --noproxy '*' --resolve "$NAME:80:$addr" "http://$NAME/" | sed -n 's/.*"pod":"\([^"]*\)".*/\1/p'
}

# wait_answer: up to 3 minutes for a pod's answer by name.
wait_answer() {
  local i pod
  for i in $(seq 1 180); do
    if pod="$(answer 2>/dev/null)" && [ -n "$pod" ]; then
      echo "$pod"
      return 0
    fi
    sleep 1
  done
  return 1
}

case "${1:-}" in
  create)
    say "the docker shim (test/node/dockershim)"
    go -C test/node build -o "$CACHE/node/shim/docker" ./dockershim
    say "marina cluster create $CLUSTER --node-image $IMAGE"
    PATH="$CACHE/node/shim:$PATH" "$MARINA" cluster create "$CLUSTER" --node-image "$IMAGE" --progress plain
    say "the echo server behind a LoadBalancer Service"
    "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" apply -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo, namespace: default, labels: {app: echo}}
spec:
  replicas: 1
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
      - name: echo
        image: marina-test/echo:v1
        imagePullPolicy: IfNotPresent
        ports: [{containerPort: 8080}]
        env:
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: echo}
  ports: [{name: http, port: 80, targetPort: 8080}]
YAML
    "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" rollout status deployment/echo --timeout 3m
    say "http://$NAME/ from this machine"
    pod="$(wait_answer)" || die "http://$NAME/ did not answer within 3 minutes"
    echo "$pod" >"$STATE"
    echo "answered by pod $pod"
    "$MARINA" cluster list
    ;;
  check)
    want="$(cat "$STATE" 2>/dev/null)" || die "no $STATE: run $0 create first"
    pod="$(wait_answer)" || die "http://$NAME/ no longer answers"
    [ "$pod" = "$want" ] || die "http://$NAME/ is answered by pod $pod, not $want: the cluster was changed"
    echo "http://$NAME/ still answered by pod $pod"
    ;;
  *)
    echo "usage: $0 create|check" >&2
    exit 2
    ;;
esac
