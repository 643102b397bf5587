// Package e2e holds marina's end-to-end tests: the marina binary, built from
// this checkout, runs `up` on the host driver (a real Docker engine, the
// locally built service images) and `cluster create` / `delete` with the kind
// stand-in of test/standin, whose control planes are real etcd +
// kube-apiserver processes in Docker containers on the lab's network.
//
// What is real: marina itself (every command as a separate process, with its
// locks, slots, kubeconfig merges and plugin processes), the five built-in
// plugins, the lab's Docker network and its DNS containers (etcd at .255.52,
// CoreDNS at .255.53 of the bridge), the API servers, and
// MetalLB's controller and ExternalDNS: their binaries, built from the module
// proxy by test/tools/build.sh, run as the Deployments marina applied
// describe them (args, env, service account token, secret volumes), in
// containers on the lab's network, through the API servers' RBAC.
//
// What is played: kind's nodes (see test/standin: no kubelet, no pod runs; a
// status loop reports workloads ready), the kubelet's part for the two
// controllers above (kubelet_test.go starts their containers and syncs their
// secret volumes), and kube-proxy's part for MetalLB's admission webhook (its
// Service is pointed at the controller's container). Everything else a
// cluster would do — pulling images, scheduling, Service traffic — does not
// happen here.
//
// The test lab has a network, subnet and container names of its own
// (marina-e2e on 172.29.0.0/16, marina-e2e-dns and marina-e2e-dns-etcd,
// cluster names starting with e2e-) and its own HOME, so it runs beside a
// user's lab with marina's defaults (network kind on 172.30.0.0/16,
// marina-dns, marina-dns-etcd): TestEndToEnd brings such a lab up when none
// is (or uses the one `make demo` left) and fails when the tests changed
// anything of it — containers, network, volumes, DNS records, iptables rules,
// ~/.marina, ~/.kube. Nothing else may use 172.29.0.0/16 while they run.
// Run them with `go test ./test/e2e -v` (or `make test`); they take a few
// minutes.
package e2e
