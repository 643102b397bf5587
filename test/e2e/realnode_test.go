package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/labca"
	"github.com/bcollard/marina/plugins/certmanager"
	"github.com/bcollard/marina/plugins/externaldns"
	"github.com/bcollard/marina/plugins/metallb"
	"github.com/bcollard/marina/plugins/registries"
	"github.com/bcollard/marina/sdk/dockertest"
)

// nodeImage is the tests' kind node image, built by test/node/build.sh
// (make test-setup) for the Kubernetes version of test/tools.
const nodeImage = "marina-test/kind-node:v1.37.2"

// echoImage is the workload the node image preloads (test/node/agents/cmd/echo).
const echoImage = "marina-test/echo:v1"

// The real-node lab's registry mirror, of the tests' own upstream registry
// (a container on the lab's network, started by TestRealNodes after up):
// the only registry the lab's nodes know. Names are machine-wide: none is a
// user's.
const (
	upstreamName = "marina-e2e-upstream"
	mirrorName   = "marina-e2e-mirror"
	mirrorPort   = 5099
	realMirrors  = `[{name: ` + mirrorName + `, port: 5099, remoteURL: "http://` + upstreamName + `:5000"}]`
)

// The company's registry (issue 25): a name reached only through the
// company's proxy, which intercepts its TLS with the CA of the lab's
// trust.extraCAs and forwards to the test's upstream; the lab's second
// mirror is its (added with the proxy, startRealLabBehindProxy).
const (
	corpRegistry   = "registry.corp.example"
	corpMirrorName = "marina-e2e-corpmirror"
	corpMirrorPort = 5098
	corpMirror     = `{name: ` + corpMirrorName + `, port: 5098, remoteURL: "https://` + corpRegistry + `"}`
)

// Bounds of what the real-node checks wait for.
const (
	podsTimeout = 4 * time.Minute
	httpTimeout = 90 * time.Second
)

// realNodes is what a lab with real nodes needs besides a stand-in lab's.
type realNodes struct {
	image   string
	shimDir string // holds the docker shim, first on marina's PATH
	shimLog string
}

// env is the environment marina runs with: the shim first on PATH (kind's
// library, in marina's kind helper, runs the docker CLI it finds there).
func (n realNodes) env() []string {
	return []string{
		"PATH=" + n.shimDir + string(os.PathListSeparator) + os.Getenv("PATH"),
		"MARINA_TEST_DOCKER_SHIM_LOG=" + n.shimLog,
	}
}

var (
	shimOnce sync.Once
	shimDir  string
	shimErr  error
)

// requireRealNodes checks that the node image exists and builds the docker
// shim (test/node/dockershim) once per test process.
func requireRealNodes(t testing.TB) realNodes {
	t.Helper()
	dockertest.Require(t)
	if _, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", nodeImage).Output(); err != nil {
		t.Fatalf("the kind node image %s is missing: build it with `bash test/node/build.sh` (make test-setup)", nodeImage)
	}
	shimOnce.Do(func() {
		shimDir, shimErr = os.MkdirTemp("", "marina-e2e-shim-")
		if shimErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(shimDir, "docker"), "./dockershim")
		cmd.Dir = "../node"
		if out, err := cmd.CombinedOutput(); err != nil {
			shimErr = fmt.Errorf("go build ./dockershim (test/node): %v\n%s", err, out)
		}
	})
	if shimErr != nil {
		t.Fatal(shimErr)
	}
	return realNodes{image: nodeImage, shimDir: shimDir, shimLog: filepath.Join(t.TempDir(), "docker-shim.log")}
}

// hostSysctls are the host's kernel settings a kind node would change if
// it could write /proc/sys (kubelet: the first four and the keyring
// limits; systemd-sysctl in the node: fs.protected_*; containerd and the
// kubelet's inotify use: fs.inotify.*).
var hostSysctls = []string{
	"kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "vm.panic_on_oom",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
	"fs.inotify.max_user_watches", "fs.inotify.max_user_instances",
	"fs.protected_hardlinks", "fs.protected_symlinks", "fs.protected_fifos", "fs.protected_regular",
}

func readSysctls(t testing.TB) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range hostSysctls {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		m[k] = strings.TrimSpace(string(b))
	}
	return m
}

// hostUnchanged records the host's kernel settings now and fails t at its
// end if any changed.
func hostUnchanged(t *testing.T) {
	before := readSysctls(t)
	t.Logf("host kernel settings before: %v", before)
	t.Cleanup(func() {
		after := readSysctls(t)
		for _, k := range hostSysctls {
			if before[k] != after[k] {
				t.Errorf("the host's %s changed from %s to %s while real nodes ran", k, before[k], after[k])
			}
		}
	})
}

// TestRealNodes is the end-to-end checks with real kind nodes — systemd,
// containerd and the kubelet in node containers made by kind's own library
// from the tests' node image — on one lab beside the user's, in order: every
// built-in runs for real; a LoadBalancer Service answers this machine by its
// VIP and by its name; a pod's image comes through marina's mirror; a pod of
// a second cluster reaches the first's Service by name; the Service answers
// again after a node restart; a deleted cluster leaves nothing. The host's
// kernel settings must not change (hostUnchanged).
func TestRealNodes(t *testing.T) {
	besideUserLab(t)
	hostUnchanged(t)
	l, proxy, up := startRealLabBehindProxy(t)
	// The company registry's mirror: the one container that may use the
	// proxy (its address may change when step 7 recreates it).
	corpIPs := []netip.Addr{corpMirrorIP(t)}
	const dev = "e2e-dev"
	// HTTPS by name (issue 25): the opt-in built-in, enabled as a user does.
	l.run(t, time.Minute, "plugin", "enable", certmanager.Name)

	var nodeVolumes []string
	t.Run("1 cluster create with every built-in: node Ready, MetalLB, CoreDNS, ExternalDNS, cert-manager running", func(t *testing.T) {
		l.createCluster(t, dev)
		checkCreated(t, l, dev, l.slots[0])
		checkRunning(t, l.clientset(t, dev))
		nodeVolumes = volumesOf(t, dev)
	})
	if t.Failed() {
		return
	}

	t.Run("1b the company's CA (trust.extraCAs) is in every node, and containerd reads it; the proxy reaches the nodes", func(t *testing.T) {
		node := dev + "-control-plane"
		if got := dockertest.Docker(t, "exec", node, "cat", "/etc/marina/ca/extra-cas.pem"); strings.TrimSpace(got) != strings.TrimSpace(l.extraCA) {
			t.Errorf("the node's /etc/marina/ca/extra-cas.pem is not the lab's extra CA:\n%s", got)
		}
		env := dockertest.Docker(t, "exec", node, "systemctl", "show", "containerd", "--property=Environment")
		if !strings.Contains(env, "SSL_CERT_DIR=/etc/ssl/certs:/etc/marina/ca") {
			t.Errorf("containerd runs without the extra CAs' directory: %s", env)
		}
		// kind hands the helper's proxy variables to the node (its
		// environment, which containerd inherits), NO_PROXY with the lab.
		nodeEnv := dockertest.Docker(t, "inspect", "--format", "{{range .Config.Env}}{{println .}}{{end}}", node)
		if !strings.Contains(nodeEnv, "HTTPS_PROXY=http://"+proxy.addr) || !strings.Contains(nodeEnv, bridgeCIDR) {
			t.Errorf("the node's environment lacks the lab's proxy or its NO_PROXY:\n%s", nodeEnv)
		}
	})

	fqdn := "echo.default." + dev + "." + zone
	var vip netip.Addr
	t.Run("2 echo behind a LoadBalancer Service answers this machine by VIP and by name", func(t *testing.T) {
		cs := l.clientset(t, dev)
		deployEcho(t, cs, "default", "echo")
		created := time.Now()
		vip = exposeAndResolve(t, l, dev, l.slots[0], "echo", "default")
		byVIP := waitHTTP(t, netip.AddrPortFrom(vip, 80), "")
		byName := waitHTTP(t, netip.AddrPortFrom(resolve(t, fqdn)[0], 80), fqdn)
		t.Logf("Service created -> first 200 by name %s: %s", fqdn, time.Since(created).Round(time.Millisecond))
		pods := echoPods(t, cs, "default", "echo")
		for _, a := range []echoAnswer{byVIP, byName} {
			if !slices.Contains(pods, a.Pod) {
				t.Errorf("the answer came from pod %q, not one of the Deployment's %v: %+v", a.Pod, pods, a)
			}
		}
		if byName.Host != fqdn {
			t.Errorf("by name, the pod saw Host %q; want %q", byName.Host, fqdn)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("2b HTTPS by name: issuer marina (the lab CA) signs the Service's name, the pod serves it, this machine verifies it against the lab CA", func(t *testing.T) {
		const svc = "secure"
		name := svc + ".default." + dev + "." + zone
		issued := time.Now()
		requestCertificate(t, l, dev, "default", svc+"-tls", name)
		t.Logf("Certificate for %s Ready (issued by ClusterIssuer %s) in %s", name, certmanager.IssuerName, time.Since(issued).Round(time.Millisecond))
		cs := l.clientset(t, dev)
		deployEcho(t, cs, "default", svc, func(p *corev1.PodSpec) {
			p.Volumes = append(p.Volumes, corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: svc + "-tls"}}})
			c := &p.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "tls", MountPath: "/tls", ReadOnly: true})
			c.Env = append(c.Env, corev1.EnvVar{Name: "TLS_CERT_FILE", Value: "/tls/tls.crt"}, corev1.EnvVar{Name: "TLS_KEY_FILE", Value: "/tls/tls.key"})
			c.Ports = append(c.Ports, corev1.ContainerPort{Name: "https", ContainerPort: 8443})
		})
		created := time.Now()
		secureVIP := exposePort(t, cs, svc, "default", 443, 8443)
		waitName(t, name, []netip.Addr{secureVIP})
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(readFile(t, filepath.Join(l.home, ".marina", "ca", "ca.crt"))) {
			t.Fatal("the lab's CA certificate is not PEM")
		}
		var a echoAnswer
		dockertest.WaitFor(t, httpTimeout, 200*time.Millisecond, "a 200 from https://"+name+"/ verified against the lab CA", func() error {
			var err error
			a, err = httpsGet(netip.AddrPortFrom(resolve(t, name)[0], 443), name, roots)
			return err
		})
		t.Logf("Service %s created -> first verified HTTPS 200 by name: %s", svc, time.Since(created).Round(time.Millisecond))
		if pods := echoPods(t, cs, "default", svc); !slices.Contains(pods, a.Pod) || a.Host != name {
			t.Errorf("https://%s/ was answered by pod %q (Host %q); want one of %v", name, a.Pod, a.Host, pods)
		}
		// The verification is real: without the lab CA the same GET fails.
		if _, err := httpsGet(netip.AddrPortFrom(secureVIP, 443), name, x509.NewCertPool()); err == nil || !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Errorf("a GET trusting no CA = %v; want an unknown-authority error", err)
		}
	})
	if t.Failed() {
		return
	}

	// The proxy (issue 25): marina's NO_PROXY kept everything of the lab
	// away from it — node pulls through the mirror, the API servers, the
	// VIPs and names — checked once every step has run.
	defer t.Run("9 behind the company proxy, nothing of the lab reached it but the company registry's mirror (every step above)", func(t *testing.T) {
		// Only the company registry's mirror went through it, to the
		// company registry's name; nothing else of the lab did.
		corpIPs = append(corpIPs, corpMirrorIP(t))
		seen := proxy.requests()
		for _, r := range seen {
			if !slices.Contains(corpIPs, r.From) || r.Request != "CONNECT "+corpRegistry+":443" {
				t.Errorf("the proxy got %q from %s: lab traffic (only %s's CONNECTs to %s:443, from %v, belong there)", r.Request, r.From, corpMirrorName, corpRegistry, corpIPs)
			}
		}
		t.Logf("the proxy got %d connections, all CONNECTs of %s (%v) to %s:443, %d requests intercepted", len(seen), corpMirrorName, corpIPs, corpRegistry, proxy.intercepted.Load())
	})
	t.Run("3 a pod's image comes through marina's mirror: cached there, the upstream never asked by a node", func(t *testing.T) {
		ref, blobs := up.pushUnique(t)
		// The image is the echo server with one layer of its own: the node
		// has every other blob preloaded, so it fetches that layer, the
		// image's config and its manifest.
		runPod(t, l.clientset(t, dev), "default", "mirrored", ref, "get", "http://"+fqdn+"/", "60s")
		up.checkOnlyMirror(t, dev)
		cache := mirrorCache(t)
		for _, d := range blobs {
			blob := filepath.Join(cache, "docker", "registry", "v2", "blobs", "sha256", d[7:9], d[7:], "data")
			if _, err := os.Stat(blob); err != nil {
				t.Errorf("the mirror's cache has no blob %s (%v)", d, err)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("3b the company network: a pod's image from the company registry, through its mirror and the TLS-intercepting proxy whose CA is in trust.extraCAs", func(t *testing.T) {
		ref, _ := up.pushUnique(t)
		corpRef := corpRegistry + "/" + strings.TrimPrefix(ref, upstreamName+":5000/")
		before := proxy.intercepted.Load()
		pulled := time.Now()
		runPod(t, l.clientset(t, dev), "default", "corp-pulled", corpRef, "get", "http://"+fqdn+"/", "60s")
		n := proxy.intercepted.Load() - before
		if n == 0 {
			t.Errorf("the pod ran %s without a request through the intercepting proxy", corpRef)
		}
		t.Logf("pod with %s ran (image through %s and the intercepting proxy, %d requests intercepted): %s", corpRef, corpMirrorName, n, time.Since(pulled).Round(time.Millisecond))
	})
	if t.Failed() {
		return
	}

	const staging = "e2e-staging"
	stagingFQDN := "echo.default." + staging + "." + zone
	t.Run("4 a pod in staging reaches dev's echo by name, through its cluster DNS and the lab's, and its HTTPS Service trusting the lab's CA bundle", func(t *testing.T) {
		l.createCluster(t, staging)
		checkCreated(t, l, staging, l.slots[1])
		checkRunning(t, l.clientset(t, staging))
		cs := l.clientset(t, staging)
		deployEcho(t, cs, "default", "echo")
		stagingVIP := exposeAndResolve(t, l, staging, l.slots[1], "echo", "default")
		if stagingVIP == vip {
			t.Fatalf("staging's Service got dev's address %s", vip)
		}
		for _, a := range pools(t, l.slots[0]) {
			for _, b := range pools(t, l.slots[1]) {
				if a.Overlaps(b) {
					t.Fatalf("slot %d's pool %s overlaps slot %d's %s", l.slots[0], a, l.slots[1], b)
				}
			}
		}
		out := runPod(t, cs, "default", "reach-dev", echoImage, "get", "http://"+fqdn+"/", "90s")
		var a echoAnswer
		var line string
		for _, l := range strings.Split(out, "\n") { // the log has the client's stderr too
			if strings.HasPrefix(l, "{") {
				line = l
			}
		}
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("the pod in %s printed no echo answer: %v\n%s", staging, err, out)
		}
		if pods := echoPods(t, l.clientset(t, dev), "default", "echo"); !slices.Contains(pods, a.Pod) || a.Host != fqdn {
			t.Fatalf("from %s, %s was answered by pod %q (Host %q); want one of dev's %v", staging, fqdn, a.Pod, a.Host, pods)
		}
		// HTTPS by name from a workload: the pod trusts the lab's CA bundle
		// (ConfigMap marina-ca-bundle, the registries plugin's) and nothing
		// else, and reaches dev's HTTPS Service of step 2b by its name.
		secure := "https://secure.default." + dev + "." + zone + "/"
		out = runPodWith(t, cs, "default", "reach-dev-tls", echoImage, func(p *corev1.PodSpec) {
			p.Volumes = []corev1.Volume{{Name: "cas", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: registries.BundleConfigMap}}}}}
			p.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cas", MountPath: "/cas", ReadOnly: true}}
			p.Containers[0].Env = []corev1.EnvVar{{Name: "SSL_CERT_FILE", Value: "/cas/" + registries.BundleKey}, {Name: "SSL_CERT_DIR", Value: "/nonexistent"}}
		}, "get", secure, "90s")
		if !strings.Contains(out, `"pod":"secure-`) {
			t.Errorf("from %s, %s answered no pod of dev's secure Deployment:\n%s", staging, secure, out)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("5 dev's node restarts (a VM reboot or sleep): the Service answers again by VIP and by name", func(t *testing.T) {
		nodes := strings.Fields(dockertest.Docker(t, "ps", "-q", "--filter", "label="+kind.ClusterLabel+"="+dev))
		restarted := time.Now()
		dockertest.Docker(t, append([]string{"restart", "--time", "30"}, nodes...)...)
		checkRunning(t, l.clientset(t, dev))
		waitHTTP(t, netip.AddrPortFrom(vip, 80), "")
		waitHTTP(t, netip.AddrPortFrom(resolve(t, fqdn)[0], 80), fqdn)
		t.Logf("docker restart of %s's nodes -> the Service answers by VIP and by name: %s", dev, time.Since(restarted).Round(time.Millisecond))
	})
	if t.Failed() {
		return
	}

	t.Run("6 cluster delete dev: its name is gone, its VIP silent, no node, volume or kubeconfig entry left; staging still answers", func(t *testing.T) {
		l.run(t, deleteTimeout, "cluster", "delete", dev, "--progress", "plain")
		waitName(t, fqdn, nil)
		checkGone(t, l, dev, l.slots[0])
		if err := httpOnce(netip.AddrPortFrom(vip, 80), ""); err == nil {
			t.Errorf("%s still answers after the cluster was deleted", vip)
		}
		for _, v := range nodeVolumes {
			if out, _ := exec.Command("docker", "volume", "ls", "-q", "--filter", "name=^"+v+"$").Output(); strings.TrimSpace(string(out)) != "" {
				t.Errorf("the node's volume %s is left", v)
			}
		}
		waitHTTP(t, netip.AddrPortFrom(resolve(t, stagingFQDN)[0], 80), stagingFQDN)
	})
	if t.Failed() {
		return
	}

	t.Run("7 trust.extraCAs changes: up names the cluster whose nodes carry the old list, with the fix", func(t *testing.T) {
		corpIPs = append(corpIPs, corpMirrorIP(t))
		newCA, err := labca.Create(filepath.Join(l.home, "corp-ca-2"), labca.Scope{Lab: "corp2", Zone: "corp.example", Bridge: netip.MustParsePrefix("10.0.0.0/8")}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cfgPath := filepath.Join(l.home, ".marina", "config.yaml")
		cfg := string(readFile(t, cfgPath))
		old := fmt.Sprintf("extraCAs: [%q]", filepath.Join(l.home, "corp-ca", labca.CertFile))
		if !strings.Contains(cfg, old) {
			t.Fatalf("the lab's config has no %s:\n%s", old, cfg)
		}
		cfg = strings.Replace(cfg, old, fmt.Sprintf("extraCAs: [%q, %q]", filepath.Join(l.home, "corp-ca", labca.CertFile), newCA.CertPath()), 1)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		r := l.exec(upTimeout, "up", "--progress", "plain")
		if r.err != nil {
			t.Fatalf("%s", r)
		}
		out := r.out + r.stderr
		if !strings.Contains(out, "cluster(s) "+staging+" trust other company CAs than trust.extraCAs lists now") {
			t.Errorf("up after trust.extraCAs changed does not name %s's nodes:\n%s", staging, out)
		}
		if !strings.Contains(out, "marina cluster delete NAME && marina cluster create NAME") {
			t.Errorf("up does not say how to fix it:\n%s", out)
		}
	})
}

// corpMirrorIP is the company registry mirror's address on the lab's network.
func corpMirrorIP(t testing.TB) netip.Addr {
	t.Helper()
	out := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", `{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, corpMirrorName))
	ip, err := netip.ParseAddr(out)
	if err != nil {
		t.Fatalf("%s's address on %s: %q", corpMirrorName, network, out)
	}
	return ip
}

// runPod runs image (the echo server's, or one built on it) as a pod with
// /echo args to completion and returns its log; it fails t unless the pod
// succeeds.
func runPod(t testing.TB, cs kubernetes.Interface, ns, name, image string, args ...string) string {
	t.Helper()
	return runPodWith(t, cs, ns, name, image, nil, args...)
}

// runPodWith is runPod with the pod's spec changed by edit (nil: none).
func runPodWith(t testing.TB, cs kubernetes.Interface, ns, name, image string, edit func(*corev1.PodSpec), args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), podsTimeout)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "client", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: append([]string{"/echo"}, args...),
			}},
		},
	}
	if edit != nil {
		edit(&pod.Spec)
	}
	_, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var phase corev1.PodPhase
	dockertest.WaitFor(t, podsTimeout, time.Second, "pod "+ns+"/"+name+" to finish", func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			return nil
		}
		return fmt.Errorf("phase %s", phase)
	})
	b, err := cs.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{Container: "client"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of pod %s/%s: %v", ns, name, err)
	}
	if phase != corev1.PodSucceeded {
		t.Fatalf("pod %s/%s (echo %s) %s:\n%s", ns, name, strings.Join(args, " "), phase, b)
	}
	return string(b)
}

// checkRunning checks the cluster's node is Ready and that what marina's
// built-ins applied runs, from the images the node image preloads:
// MetalLB's controller and speaker, CoreDNS and ExternalDNS.
func checkRunning(t testing.TB, cs kubernetes.Interface) {
	t.Helper()
	dockertest.WaitFor(t, podsTimeout, time.Second, "the node Ready and MetalLB, CoreDNS, ExternalDNS, cert-manager available", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if !nodeReady(n) {
				return fmt.Errorf("node %s not Ready", n.Name)
			}
		}
		for _, d := range [][2]string{{metallb.Namespace, "controller"}, {"kube-system", "coredns"}, {externaldns.Namespace, externaldns.AppName}, {certmanager.Namespace, certmanager.Deployment}} {
			dep, err := cs.AppsV1().Deployments(d[0]).Get(ctx, d[1], metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !deploymentAvailable(dep) {
				return fmt.Errorf("Deployment %s/%s: %d of %d replicas available", d[0], d[1], dep.Status.AvailableReplicas, dep.Status.Replicas)
			}
		}
		ds, err := cs.AppsV1().DaemonSets(metallb.Namespace).Get(ctx, "speaker", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ds.Status.DesiredNumberScheduled == 0 || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled {
			return fmt.Errorf("DaemonSet %s/speaker: %d of %d ready", metallb.Namespace, ds.Status.NumberReady, ds.Status.DesiredNumberScheduled)
		}
		return nil
	})
}

func nodeReady(n corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas >= want && d.Status.UpdatedReplicas >= want
}

// deployEcho creates a Deployment name of the echo server (label app=name,
// port 8080), changed by edits, and waits for it to be available.
func deployEcho(t testing.TB, cs kubernetes.Interface, ns, name string, edits ...func(*corev1.PodSpec)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	replicas := int32(1)
	labels := map[string]string{"app": name}
	env := []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:            "echo",
					Image:           echoImage,
					ImagePullPolicy: corev1.PullIfNotPresent,
					Env:             env,
					Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 1},
				}}},
			},
		},
	}
	for _, edit := range edits {
		edit(&d.Spec.Template.Spec)
	}
	_, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dockertest.WaitFor(t, podsTimeout, 500*time.Millisecond, "Deployment "+ns+"/"+name+" available", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !deploymentAvailable(d) {
			return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, replicas)
		}
		return nil
	})
}

// echoPods names the Deployment's pods.
func echoPods(t testing.TB, cs kubernetes.Interface, ns, app string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	return names
}

// echoAnswer is the echo server's JSON answer.
type echoAnswer struct {
	Hostname string `json:"hostname"`
	Pod      string `json:"pod"`
	Host     string `json:"host"`
	Path     string `json:"path"`
	Remote   string `json:"remote"`
}

// httpGet sends GET / to addr (loopback or a container network of this
// machine only), with Host host when not empty, and decodes the echo
// server's answer.
func httpGet(addr netip.AddrPort, host string) (echoAnswer, error) {
	return httpGetWithin(addr, host, 2*time.Second)
}

// httpGetWithin is httpGet with the connection's dial bound by dial.
func httpGetWithin(addr netip.AddrPort, host string, dial time.Duration) (echoAnswer, error) {
	var a echoAnswer
	if err := dockertest.CheckLocal(addr.Addr()); err != nil {
		return a, err
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+addr.String()+"/", nil)
	if err != nil {
		return a, err
	}
	if host != "" {
		req.Host = host
	}
	client := &http.Client{Timeout: dial + time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: dial}).DialContext}}
	return echoAnswerOf(client.Do(req))
}

// echoAnswerOf decodes the echo server's answer to a GET (a 200 with its
// JSON), closing the body.
func echoAnswerOf(resp *http.Response, err error) (echoAnswer, error) {
	var a echoAnswer
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return a, err
	}
	what := "GET " + resp.Request.URL.String()
	if h := resp.Request.Host; h != "" && h != resp.Request.URL.Host {
		what += " (Host " + h + ")"
	}
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("%s: %s: %s", what, resp.Status, body)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("%s: not the echo server's answer: %v: %s", what, err, body)
	}
	return a, nil
}

func httpOnce(addr netip.AddrPort, host string) error {
	_, err := httpGet(addr, host)
	return err
}

// waitHTTP waits for a 200 from the echo server at addr and returns it.
func waitHTTP(t testing.TB, addr netip.AddrPort, host string) echoAnswer {
	t.Helper()
	var a echoAnswer
	what := "a 200 from http://" + addr.String() + "/"
	if host != "" {
		what += " (Host " + host + ")"
	}
	dockertest.WaitFor(t, httpTimeout, 200*time.Millisecond, what, func() error {
		var err error
		a, err = httpGet(addr, host)
		return err
	})
	return a
}

// volumesOf names the Docker volumes of cluster name's node containers.
func volumesOf(t testing.TB, name string) []string {
	t.Helper()
	ids := strings.Fields(dockertest.Docker(t, "ps", "-aq", "--filter", "label="+kind.ClusterLabel+"="+name))
	if len(ids) == 0 {
		t.Fatalf("no node container of %s", name)
	}
	var vols []string
	for _, id := range ids {
		out := dockertest.Docker(t, "inspect", "--format", `{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`, id)
		vols = append(vols, strings.Fields(out)...)
	}
	if len(vols) == 0 {
		t.Fatalf("the nodes of %s have no volume (kind gives each one for /var)", name)
	}
	return vols
}

// upstream is the tests' own registry, the upstream of the lab's mirror.
type upstream struct {
	id       string
	hostport string // published on 127.0.0.1
}

// startUpstream runs the upstream registry on the lab's network and waits
// for it and for marina's mirror of it (which exits while its upstream
// does not answer; its restart policy brings it back).
func startUpstream(t testing.TB) *upstream {
	t.Helper()
	id := dockertest.Run(t, "--name", upstreamName, "--network", network, "-p", "127.0.0.1::5000", dockertest.Image(t, "registry"))
	u := &upstream{id: id, hostport: dockertest.HostPort(t, id, "5000/tcp").String()}
	dockertest.WaitRegistry(t, "the upstream registry", u.hostport, 30*time.Second)
	dockertest.WaitRegistry(t, "marina's mirror "+mirrorName, fmt.Sprintf("127.0.0.1:%d", mirrorPort), 3*time.Minute)
	return u
}

// pushUnique pushes the echo image with one layer of its own to the
// upstream and returns its reference as the nodes name it and the digests
// of the blobs a node that has the echo image must fetch (that layer and
// the image's config).
func (u *upstream) pushUnique(t testing.TB) (string, []string) {
	t.Helper()
	nonce := fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nonce"), []byte(nonce), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+echoImage+"\nCOPY nonce /nonce\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tag := "mirrored-" + strings.ReplaceAll(nonce, "-", "")
	local := u.hostport + "/e2e/echo:" + tag
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{append([]string{"build", "-q"}, append(dockertest.LabelArgs(t), "-t", local, dir)...), {"push", local}, {"rmi", local}} {
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+u.hostport+"/v2/e2e/echo/manifests/"+tag, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != http.StatusOK || len(m.Layers) == 0 {
		t.Fatalf("the upstream's manifest of %s: %s, %v, %+v", local, resp.Status, err, m)
	}
	return upstreamName + ":5000/e2e/echo:" + tag, []string{m.Layers[len(m.Layers)-1].Digest, m.Config.Digest}
}

// remoteAddr is the client address distribution logs for every request.
var remoteAddr = regexp.MustCompile(`http\.request\.remoteaddr="?\[?([0-9a-f.:]+?)\]?:[0-9]+"?`)

// checkOnlyMirror checks, from the upstream's request log, that the mirror
// asked it for something and that no node of cluster did.
func (u *upstream) checkOnlyMirror(t testing.TB, cluster string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs, err := exec.CommandContext(ctx, "docker", "logs", u.id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker logs %s: %v", upstreamName, err)
	}
	ipOf := func(container string) string {
		return strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", `{{(index .NetworkSettings.Networks "`+network+`").IPAddress}}`, container))
	}
	mirror := ipOf(mirrorName)
	nodes := map[string]string{}
	for _, n := range strings.Fields(dockertest.Docker(t, "ps", "-q", "--filter", "label="+kind.ClusterLabel+"="+cluster)) {
		nodes[ipOf(n)] = n
	}
	fromMirror := 0
	for _, m := range remoteAddr.FindAllStringSubmatch(string(logs), -1) {
		if n, ok := nodes[m[1]]; ok {
			t.Errorf("node %s (%s) asked the upstream directly", n, m[1])
		}
		if m[1] == mirror {
			fromMirror++
		}
	}
	if fromMirror == 0 {
		t.Errorf("the mirror (%s) never asked the upstream; its log:\n%s", mirror, logs)
	}
	t.Logf("the upstream served %d requests of the mirror %s, none of a node of %s", fromMirror, mirror, cluster)
}

// mirrorCache is the mirror's storage directory on this machine.
func mirrorCache(t testing.TB) string {
	t.Helper()
	dir := strings.TrimSpace(dockertest.Docker(t, "inspect", "--format", `{{range .Mounts}}{{if eq .Destination "/var/lib/registry"}}{{.Source}}{{end}}{{end}}`, mirrorName))
	if dir == "" {
		t.Fatalf("the mirror %s mounts no cache at /var/lib/registry", mirrorName)
	}
	return dir
}

// requestCertificate creates a Certificate for dnsName from ClusterIssuer
// marina in cluster name and waits until it is Ready (its Secret secret
// written).
func requestCertificate(t testing.TB, l *lab, name, ns, secret, dnsName string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", l.kubeconfigPath(name))
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = dyn.Resource(gvr).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
		"metadata": map[string]any{"name": secret, "namespace": ns},
		"spec": map[string]any{
			"secretName": secret, "dnsNames": []any{dnsName},
			"issuerRef": map[string]any{"kind": "ClusterIssuer", "name": certmanager.IssuerName, "group": "cert-manager.io"},
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dockertest.WaitFor(t, time.Minute, 200*time.Millisecond, "Certificate "+ns+"/"+secret+" Ready", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, secret, metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
				if m["status"] == "True" {
					return nil
				}
				return fmt.Errorf("Ready %v: %v", m["status"], m["message"])
			}
		}
		return errors.New("no Ready condition yet")
	})
}

// exposePort creates a LoadBalancer Service svc for app=svc, port to
// targetPort, and returns its VIP.
func exposePort(t testing.TB, cs kubernetes.Interface, svc, ns string, port, targetPort int32) netip.Addr {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": svc},
			Ports:    []corev1.ServicePort{{Name: "https", Port: port, TargetPort: intstr.FromInt32(targetPort)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return waitVIP(t, cs, svc, ns)
}

// httpsGet sends GET https://host/ to addr (a container network of this
// machine only), verifying the server's certificate for host against
// roots alone, and decodes the echo server's answer.
func httpsGet(addr netip.AddrPort, host string, roots *x509.CertPool) (echoAnswer, error) {
	var a echoAnswer
	if err := dockertest.CheckLocal(addr.Addr()); err != nil {
		return a, err
	}
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr.String())
		}}
	return echoAnswerOf((&http.Client{Timeout: 5 * time.Second, Transport: tr}).Get("https://" + host + "/"))
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
