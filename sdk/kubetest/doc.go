// Package kubetest runs tests against a real Kubernetes control plane: an
// etcd and a kube-apiserver started as child processes on 127.0.0.1 for one
// test, ready in about 3–5 s, stopped and checked gone when the test ends.
// marina's tier-3 tests use it, and so can a plugin's: hand the cluster's
// kubeconfig to the harness with plugintest.WithKubeconfig(c.Kubeconfig).
//
//	c := kubetest.Start(t)                    // etcd + kube-apiserver, ready
//	cs := c.Clientset(t)                      // client-go, admin (system:masters)
//	_ = c.Dynamic(t)                          // dynamic client, same credentials
//	_ = c.Kubeconfig                          // admin kubeconfig bytes (also at c.KubeconfigPath)
//	out := c.Kubectl(t, "get", "ns", "-o", "name")
//	c2 := kubetest.StartWithOptions(t, kubetest.Options{SecurePort: 7001}) // a chosen API port
//	_ = kubetest.MetalLBControllerPath(t)     // MetalLB's controller, to run against c
//	_ = kubetest.ExternalDNSPath(t)           // ExternalDNS, likewise
//
// Only the API server runs: no controller-manager, scheduler or kubelet. Objects are
// stored and validated, admission and RBAC apply, server-side apply works; but no
// Pod is scheduled, no ServiceAccount or token is created in a new namespace, and a
// deleted namespace stays Terminating (no namespace controller). Tests that need a
// controller run it as a process against the cluster.
//
// # Binaries
//
// kube-apiserver, kubectl, etcd, metallb-controller and external-dns are not
// downloaded: test/tools/build.sh builds them from Go modules (k8s.io/kubernetes in
// the separate module test/tools, etcd from test/images, MetalLB and ExternalDNS in
// test/tools/metallb and test/tools/externaldns) into the cache. A cold build takes
// minutes (test/tools/README.md has the figures); an up-to-date one, a second:
//
//	bash test/tools/build.sh
//
// Environment:
//
//	MARINA_KUBE_ASSETS  a directory holding kube-apiserver, etcd and kubectl (and,
//	                    for the tests that run them, metallb-controller and
//	                    external-dns); overrides the cache (controller-runtime's
//	                    KUBEBUILDER_ASSETS layout, so the same directory serves both).
//	KUBEBUILDER_ASSETS  controller-runtime envtest's variable for that directory,
//	                    read when MARINA_KUBE_ASSETS is not set: outside marina's
//	                    repository, `go run sigs.k8s.io/controller-runtime/tools/setup-envtest@latest
//	                    use -p path` downloads the binaries and prints the directory.
//	MARINA_TEST_CACHE   cache dir (default $HOME/.cache/marina-test); the binaries
//	                    are looked up in $MARINA_TEST_CACHE/kube/bin.
//	MARINA_SKIP_KUBE=1  turns missing binaries into a skip instead of a failure, for
//	                    developers who have not built them. Ignored when CI is set:
//	                    in CI a missing binary fails the test with the command above.
//
// # Processes
//
// Each process runs in its own process group. On Linux it also gets SIGKILL when
// the test process dies (Pdeathsig), so a test binary killed by a timeout leaves
// nothing behind. Cleanup sends SIGTERM to the group, then SIGKILL after
// StopTimeout, and fails the test if a process of either group remains. Logs of
// both processes are written to the test's temporary directory and their tails are
// logged when the test fails.
package kubetest
