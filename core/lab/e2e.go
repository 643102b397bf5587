package lab

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	"github.com/bcollard/marina/core/kind"
	"github.com/bcollard/marina/core/lifecycle"
	"github.com/bcollard/marina/core/slot"
	"github.com/bcollard/marina/sdk/kube"
)

// The workload `marina cluster e2e` deploys by default: agnhost's netexec,
// Kubernetes' own e2e test server (a small static binary from
// registry.k8s.io, the registry the cluster's own images come from),
// answering 200 on / at port 8080.
const (
	DefaultE2EImage   = "registry.k8s.io/e2e-test-images/agnhost:2.53"
	DefaultE2EPort    = 8080
	DefaultE2EPath    = "/"
	DefaultE2ETimeout = 3 * time.Minute
	// E2EService is the name of the Deployment and the LoadBalancer Service.
	E2EService = "echo"
	// E2ENamespacePrefix starts every e2e namespace's name
	// (marina-e2e-<5 random characters>).
	E2ENamespacePrefix = "marina-e2e-"
	// LabelE2E marks e2e namespaces: kubectl get ns -l marina.dev/e2e finds
	// those a --keep (or an interrupted cleanup) left behind.
	LabelE2E = "marina.dev/e2e"
)

// defaultE2EArgs are the default image's arguments.
var defaultE2EArgs = []string{"netexec", "--http-port=" + defaultE2EPortString}

// defaultE2EPortString is DefaultE2EPort, spelled (a constant: nothing is
// computed at init).
const defaultE2EPortString = "8080"

// E2EOptions tune ClusterE2E. The zero value runs the default workload.
type E2EOptions struct {
	// Image is the workload's image ("" = DefaultE2EImage). It must serve
	// HTTP on Port and answer 2xx on Path.
	Image string
	// Args are the container's arguments; nil means netexec's for the
	// default image and none for another image.
	Args []string
	// Port is the container port the Service targets (0 = 8080).
	Port int
	// Path is what the HTTP checks GET ("" = "/").
	Path string
	// Timeout bounds the checks from the namespace's creation to the last
	// HTTP answer (0 = DefaultE2ETimeout). Cleanup has its own bound.
	Timeout time.Duration
	// Keep leaves the namespace and its workload in place (also on failure).
	Keep bool
	// Renderer receives the progress of the steps (nil discards it).
	Renderer lifecycle.Renderer
}

// E2ECheck is the outcome of one step of the e2e run.
type E2ECheck struct {
	Name string `json:"name"`
	// Status is a lifecycle status: done, failed, cancelled or not-run.
	Status     lifecycle.Status `json:"status"`
	DurationMS int64            `json:"durationMs"`
	Error      string           `json:"error,omitempty"`
}

// E2EResult is what `marina cluster e2e` reports, filled as far as the run
// got (on failure too).
type E2EResult struct {
	Cluster    string `json:"cluster"`
	Slot       int    `json:"slot,omitempty"`
	Namespace  string `json:"namespace"`
	Service    string `json:"service"`
	Image      string `json:"image"`
	Kubeconfig string `json:"kubeconfig"`
	// Pool is the slot's MetalLB pool, as ranges first-last.
	Pool []string `json:"pool,omitempty"`
	// VIP is the Service's LoadBalancer address.
	VIP string `json:"vip,omitempty"`
	// URL is http://VIP<path>; NameURL is http://<DNSName><path>.
	URL     string `json:"url,omitempty"`
	DNSName string `json:"dnsName,omitempty"`
	NameURL string `json:"nameUrl,omitempty"`
	// DNSServer is the lab's DNS server the name was resolved with.
	DNSServer string `json:"dnsServer,omitempty"`
	// DNSSkipped says why the name checks did not run (a disabled plugin).
	DNSSkipped string     `json:"dnsSkipped,omitempty"`
	Checks     []E2ECheck `json:"checks"`
	Passed     bool       `json:"passed"`
	// Kept is true when --keep left the namespace; Reach lists commands
	// that reach the workload, Delete the one that removes it.
	Kept   bool     `json:"kept"`
	Reach  []string `json:"reach,omitempty"`
	Delete string   `json:"delete,omitempty"`
	// Cleanup says what happened to the namespace: deleted, kept, or the
	// error of a failed delete.
	Cleanup    string `json:"cleanup,omitempty"`
	DurationMS int64  `json:"durationMs"`
}

// e2eCleanupTimeout bounds the namespace's deletion, which runs even after
// Ctrl-C.
const e2eCleanupTimeout = time.Minute

// Poll intervals: API objects change within a second; the network checks
// wait for ARP, a first ExternalDNS sync, ...
var (
	e2eAPIInterval = 500 * time.Millisecond
	e2eNetInterval = time.Second
)

// e2eRun carries one run's state from step to step.
type e2eRun struct {
	l        *Lab
	c        *Clusters
	opts     E2EOptions
	res      *E2EResult
	kubePath string
	dyn      dynamic.Interface
	pools    []slot.Range
	vip      netip.Addr
	deadline time.Time
	nsSent   bool // the namespace's create was sent (cleanup must delete it)
}

// ClusterE2E checks a cluster end to end, as a user of it would: in a new
// namespace marina-e2e-<random> it deploys an HTTP workload behind a
// LoadBalancer Service, waits for the Deployment to be available and the
// Service to get an address, checks the address is in the slot's MetalLB
// pool, GETs it from this machine, resolves <svc>.<ns>.<cluster>.<zone>
// through the lab's DNS server (not this machine's resolver) until it
// answers that address, and GETs the name. Then it deletes the namespace,
// unless opts.Keep — also when a check failed or ctx was cancelled (the
// deletion has its own bound).
//
// The result is returned in every case but invalid arguments, filled as far
// as the run got; the error names the failed check, what it expected and
// saw, and the likely fix.
func (l *Lab) ClusterE2E(ctx context.Context, c *Clusters, name string, opts E2EOptions) (*E2EResult, error) {
	if err := kind.ValidateName(name); err != nil {
		return nil, err
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("e2e timeout %v: must be positive, e.g. 3m", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultE2ETimeout
	}
	if opts.Image == "" {
		opts.Image = DefaultE2EImage
		if opts.Args == nil {
			opts.Args = defaultE2EArgs
		}
	}
	if opts.Port == 0 {
		opts.Port = DefaultE2EPort
	}
	if opts.Port < 1 || opts.Port > 65535 {
		return nil, fmt.Errorf("e2e container port %d: must be 1-65535", opts.Port)
	}
	if opts.Path == "" {
		opts.Path = DefaultE2EPath
	}
	if !strings.HasPrefix(opts.Path, "/") {
		return nil, fmt.Errorf("e2e path %q: must start with /", opts.Path)
	}
	ns, err := e2eNamespace()
	if err != nil {
		return nil, err
	}
	run := &e2eRun{
		l: l, c: c, opts: opts, kubePath: slot.KubeconfigPath(c.Home, name),
		res: &E2EResult{Cluster: name, Namespace: ns, Service: E2EService, Image: opts.Image, DNSServer: l.Config.DNS.ServerIP},
	}
	run.res.Kubeconfig = run.kubePath
	run.res.DNSName = strings.Join([]string{E2EService, ns, name, l.Config.DNS.Zone}, ".")
	for _, p := range []string{"localdns", "externaldns"} {
		if !l.pluginEnabled(p) {
			run.res.DNSSkipped = "plugin " + p + " is disabled, so the cluster's Services get no DNS name"
			break
		}
	}
	steps := []lifecycle.Step{
		lifecycle.NewStep("Find cluster "+name, nil, run.find),
		lifecycle.NewStep("Create namespace "+ns, nil, run.createNamespace),
		lifecycle.NewStep("Deploy "+E2EService+" ("+opts.Image+") behind a LoadBalancer Service", nil, run.deploy),
		lifecycle.NewStep("Wait for deployment "+E2EService+" to be available", nil, run.waitAvailable),
		lifecycle.NewStep("Wait for a LoadBalancer IP", nil, run.waitVIP),
		lifecycle.NewStep("Check the IP is in the slot's MetalLB pool", nil, run.checkPool),
		lifecycle.NewStep("GET the IP from this machine", nil, run.getVIP),
	}
	if run.res.DNSSkipped == "" {
		steps = append(steps,
			lifecycle.NewStep("Resolve "+run.res.DNSName+" via "+l.Config.DNS.ServerIP, nil, run.resolve),
			lifecycle.NewStep("GET the name from this machine", nil, run.getName),
		)
	}

	start := time.Now()
	rep, runErr := lifecycle.Run(ctx, "cluster e2e", steps, lifecycle.Options{Renderer: opts.Renderer})
	if rep != nil {
		for _, s := range rep.Steps {
			ch := E2ECheck{Name: s.Name, Status: s.Status, DurationMS: s.Duration.Milliseconds()}
			if s.Err != nil {
				ch.Error = s.Err.Error()
			}
			run.res.Checks = append(run.res.Checks, ch)
		}
	}
	run.res.Passed = runErr == nil
	cleanupErr := run.cleanup(ctx)
	run.res.DurationMS = time.Since(start).Milliseconds()
	if runErr != nil && cleanupErr != nil {
		return run.res, errors.Join(runErr, cleanupErr)
	}
	if runErr != nil {
		return run.res, runErr
	}
	return run.res, cleanupErr
}

// e2eNamespace returns marina-e2e-<5 random lower-case letters and digits>.
func e2eNamespace() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("e2e namespace name: %w", err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return E2ENamespacePrefix + string(b), nil
}

// kubectl returns a kubectl command line against the cluster's kubeconfig.
func (r *e2eRun) kubectl(args ...string) string {
	return "kubectl --kubeconfig " + r.kubePath + " " + strings.Join(args, " ")
}

// waitCtx bounds a wait by the run's deadline (--timeout).
func (r *e2eRun) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, r.deadline)
}

// timedOut reports whether a wait ended because the run's deadline passed
// (and not because the caller cancelled).
func timedOut(parent, wctx context.Context) bool {
	return parent.Err() == nil && errors.Is(wctx.Err(), context.DeadlineExceeded)
}

// find reads the cluster's slot and kubeconfig.
func (r *e2eRun) find(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	name := r.res.Cluster
	slots, err := r.c.Slots(ctx)
	if err != nil {
		return fmt.Errorf("listing clusters: %w", err)
	}
	n, ok := slots[name]
	if !ok {
		return fmt.Errorf("no cluster named %s (see marina cluster list; create it with marina cluster create %s)", name, name)
	}
	bridge, err := netip.ParsePrefix(r.l.Config.Network.BridgeCIDR)
	if err != nil {
		return fmt.Errorf("network.bridgeCIDR %q: %w", r.l.Config.Network.BridgeCIDR, err)
	}
	res, err := slot.Derive(n, bridge)
	if err != nil {
		return err
	}
	r.res.Slot, r.pools = n, res.Pools
	for _, p := range res.Pools {
		r.res.Pool = append(r.res.Pool, p.String())
	}
	b, err := os.ReadFile(r.kubePath)
	if err != nil {
		return fmt.Errorf("cluster %s has no readable kubeconfig: %w (marina writes it at cluster create; re-create the cluster, or write it with kind get kubeconfig --name %s)", name, err, name)
	}
	dyn, err := clientFor(b)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", r.kubePath, err)
	}
	r.dyn = dyn
	rep.Progress(fmt.Sprintf("slot %d, MetalLB pool %s", n, strings.Join(r.res.Pool, ", ")))
	return nil
}

func (r *e2eRun) labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "marina", LabelE2E: "true"}
}

// createNamespace creates the run's namespace; the checks' deadline starts
// here.
func (r *e2eRun) createNamespace(ctx context.Context, _ lifecycle.Reporter, _ []lifecycle.Change) error {
	r.deadline = time.Now().Add(r.opts.Timeout)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.res.Namespace, Labels: r.labels()}}
	r.nsSent = true
	if _, err := kube.NewTyped[corev1.Namespace](r.dyn, kube.Namespaces, "").Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Random names do not collide; do not adopt (and later delete)
			// what another run made.
			r.nsSent = false
		}
		return fmt.Errorf("creating namespace %s in cluster %s: %w (is the cluster's API server up? %s)", r.res.Namespace, r.res.Cluster, err, r.kubectl("get", "nodes"))
	}
	return nil
}

// deploy creates the Deployment and the LoadBalancer Service.
func (r *e2eRun) deploy(ctx context.Context, _ lifecycle.Reporter, _ []lifecycle.Change) error {
	ns := r.res.Namespace
	d, svc := e2eObjects(ns, r.opts, r.labels())
	if _, err := kube.NewTyped[appsv1.Deployment](r.dyn, kube.Deployments, ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s/%s: %w", ns, d.Name, err)
	}
	if _, err := kube.NewTyped[corev1.Service](r.dyn, kube.Services, ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating service %s/%s: %w", ns, svc.Name, err)
	}
	return nil
}

// e2eObjects are the workload: one replica of the image, ready when Path
// answers, behind a LoadBalancer Service on port 80.
func e2eObjects(ns string, opts E2EOptions, labels map[string]string) (*appsv1.Deployment, *corev1.Service) {
	sel := map[string]string{"app.kubernetes.io/name": E2EService, LabelE2E: "true"}
	podLabels := map[string]string{}
	for k, v := range labels {
		podLabels[k] = v
	}
	for k, v := range sel {
		podLabels[k] = v
	}
	replicas := int32(1)
	meta := metav1.ObjectMeta{Name: E2EService, Namespace: ns, Labels: podLabels}
	d := &appsv1.Deployment{
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{
						Name:  E2EService,
						Image: opts.Image,
						Args:  opts.Args,
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(opts.Port), Protocol: corev1.ProtocolTCP}},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: opts.Path, Port: intstr.FromInt32(int32(opts.Port)),
							}},
							PeriodSeconds: 2,
						},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("10m"),
							corev1.ResourceMemory: resource.MustParse("16Mi"),
						}},
					}},
				},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: sel,
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP,
				TargetPort: intstr.FromInt32(int32(opts.Port)),
			}},
		},
	}
	return d, svc
}

// waitAvailable waits for the Deployment's Available condition; on timeout
// it says what its pods are waiting for (an image that cannot be pulled,
// a crash, a failing readiness probe).
func (r *e2eRun) waitAvailable(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	ns := r.res.Namespace
	check := kube.DeploymentAvailable(r.dyn, ns, E2EService)
	var last error
	err := kube.WaitFor(wctx, "deployment "+ns+"/"+E2EService+" to be available", e2eAPIInterval, func(ctx context.Context) (bool, error) {
		done, err := check(ctx)
		if err != nil && !done {
			last = err
		}
		return done, err
	})
	if err == nil || !timedOut(ctx, wctx) {
		return err
	}
	qctx, qcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer qcancel()
	pods := podProblems(qctx, r.dyn, ns)
	msg := fmt.Sprintf("deployment %s/%s not available within --timeout %v", ns, E2EService, r.opts.Timeout)
	if last != nil {
		msg += ": " + last.Error()
	}
	if len(pods) > 0 {
		msg += "; " + strings.Join(pods, "; ")
	}
	fix := "see " + r.kubectl("-n", ns, "describe", "pods")
	for _, p := range pods {
		if strings.Contains(p, "ImagePull") || strings.Contains(p, "ErrImage") {
			fix = "the image cannot be pulled: check --image " + r.opts.Image + " and the registry mirrors (marina registry list); " + fix
			break
		}
	}
	switch {
	case last != nil && strings.Contains(last.Error(), "not yet observed"):
		fix = "the deployment controller has not seen it: is kube-controller-manager running? " + r.kubectl("-n", "kube-system", "get", "pods")
	case len(pods) == 0:
		fix = "no pod was created or scheduled: " + r.kubectl("-n", ns, "get", "events") + " and " + r.kubectl("get", "nodes")
	}
	return fmt.Errorf("%s; %s", msg, fix)
}

// podProblems describes why the e2e pods are not ready, one entry a pod.
func podProblems(ctx context.Context, dyn dynamic.Interface, ns string) []string {
	pods, err := kube.NewTyped[corev1.Pod](dyn, kube.Pods, ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + E2EService})
	if err != nil {
		return []string{"listing pods: " + err.Error()}
	}
	var out []string
	for _, p := range pods {
		var why []string
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				why = append(why, "not scheduled: "+c.Reason+" "+c.Message)
			}
		}
		for _, st := range p.Status.ContainerStatuses {
			switch {
			case st.State.Waiting != nil:
				why = append(why, "waiting: "+st.State.Waiting.Reason+" "+st.State.Waiting.Message)
			case st.State.Terminated != nil:
				why = append(why, fmt.Sprintf("terminated: %s (exit %d)", st.State.Terminated.Reason, st.State.Terminated.ExitCode))
			case !st.Ready:
				why = append(why, "running but not ready (the readiness probe fails)")
			}
		}
		if len(why) == 0 {
			why = append(why, "phase "+string(p.Status.Phase))
		}
		out = append(out, "pod "+p.Name+" "+strings.TrimSpace(strings.Join(why, ", ")))
	}
	return out
}

// waitVIP waits for the Service's status.loadBalancer.ingress.
func (r *e2eRun) waitVIP(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	ns := r.res.Namespace
	var last error
	err := kube.WaitFor(wctx, "service "+ns+"/"+E2EService+" to get a LoadBalancer IP", e2eAPIInterval, func(ctx context.Context) (bool, error) {
		svc, err := kube.NewTyped[corev1.Service](r.dyn, kube.Services, ns).Get(ctx, E2EService, metav1.GetOptions{})
		if err != nil {
			last = err
			return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err), err
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if a, err := netip.ParseAddr(in.IP); err == nil {
				r.vip = a
				return true, nil
			}
		}
		last = nil
		return false, nil
	})
	if err == nil {
		r.res.VIP = r.vip.String()
		r.res.URL = "http://" + r.res.VIP + r.opts.Path
		rep.Progress("IP " + r.res.VIP)
		return nil
	}
	if !timedOut(ctx, wctx) {
		return err
	}
	msg := fmt.Sprintf("no VIP within --timeout %v: service %s/%s has no status.loadBalancer.ingress", r.opts.Timeout, ns, E2EService)
	if last != nil {
		msg += " (last error: " + last.Error() + ")"
	}
	return fmt.Errorf("%s; is MetalLB's controller running? %s; and does the slot's pool exist? %s", msg,
		r.kubectl("-n", "metallb-system", "get", "pods"), r.kubectl("-n", "metallb-system", "get", "ipaddresspools"))
}

// checkPool checks the VIP is one of the slot's MetalLB addresses.
func (r *e2eRun) checkPool(_ context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	for _, p := range r.pools {
		if p.Contains(r.vip) {
			rep.Progress(fmt.Sprintf("%s is in %s (slot %d)", r.vip, p, r.res.Slot))
			return nil
		}
	}
	return fmt.Errorf("VIP %s of service %s/%s is outside cluster %s's MetalLB pool %s (slot %d): another IPAddressPool handed it out, so it may clash with another cluster's; list them with %s and keep only marina-slot-%d (marina cluster create re-applies it)",
		r.vip, r.res.Namespace, E2EService, r.res.Cluster, strings.Join(r.res.Pool, ", "), r.res.Slot,
		r.kubectl("get", "ipaddresspools", "-A"), r.res.Slot)
}

// e2eHTTPClient never uses a proxy ($HTTP_PROXY must not capture lab
// addresses); dial, when set, replaces name resolution.
func e2eHTTPClient(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Client {
	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: 5 * time.Second}
	if dial != nil {
		tr.DialContext = dial
	} else {
		tr.DialContext = (&net.Dialer{Timeout: 3 * time.Second}).DialContext
	}
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// getUntil2xx GETs u until it answers 2xx or the deadline passes; it
// returns the number of tries and the last failure.
func getUntil2xx(ctx context.Context, client *http.Client, u string) (tries int, last error, err error) {
	err = kube.WaitFor(ctx, "GET "+u, e2eNetInterval, func(ctx context.Context) (bool, error) {
		tries++
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return true, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		if resp.StatusCode/100 != 2 {
			last = fmt.Errorf("answered %s: %q", resp.Status, strings.TrimSpace(string(body)))
			return false, last
		}
		return true, nil
	})
	return tries, last, err
}

// getVIP GETs http://VIP<path> from this machine.
func (r *e2eRun) getVIP(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	tries, last, err := getUntil2xx(wctx, e2eHTTPClient(nil), r.res.URL)
	if err == nil {
		rep.Progress(fmt.Sprintf("GET %s answered 2xx (try %d)", r.res.URL, tries))
		return nil
	}
	if !timedOut(ctx, wctx) {
		return err
	}
	return fmt.Errorf("GET %s from this machine: no 2xx answer within --timeout %v (%d tries; last: %v); the Service has its IP but this machine does not reach it: check the route to the bridge (marina doctor), that MetalLB's speaker runs (%s) and the pods answer on port %d path %s (%s)",
		r.res.URL, r.opts.Timeout, tries, last, r.kubectl("-n", "metallb-system", "get", "pods", "-l", "component=speaker"),
		r.opts.Port, r.opts.Path, r.kubectl("-n", r.res.Namespace, "logs", "deploy/"+E2EService))
}

// resolve asks the lab's DNS server for the Service's name until it
// answers the VIP.
func (r *e2eRun) resolve(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	server, name, want := r.l.Config.DNS.ServerIP, r.res.DNSName, r.vip.String()
	var seen []string
	var last error
	err := kube.WaitFor(wctx, name+" to resolve to "+want, e2eNetInterval, func(ctx context.Context) (bool, error) {
		addrs, err := LookupVia(ctx, server, name, 3*time.Second)
		seen, last = addrs, err
		if err != nil {
			return false, err
		}
		if slices.Contains(addrs, want) {
			return true, nil
		}
		return false, fmt.Errorf("answered %s", strings.Join(addrs, ", "))
	})
	if err == nil {
		rep.Progress(name + " -> " + strings.Join(seen, ", "))
		return nil
	}
	if !timedOut(ctx, wctx) {
		return err
	}
	var dnsErr *net.DNSError
	externalDNS := r.kubectl("-n", "external-dns", "logs", "deploy/external-dns")
	switch {
	case last == nil:
		return fmt.Errorf("%s resolves (via %s) to %s, not the VIP %s, after --timeout %v: a stale record of an earlier Service? ExternalDNS should replace it: %s",
			name, server, strings.Join(seen, ", "), want, r.opts.Timeout, externalDNS)
	case errors.As(last, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("%s does not exist in the lab's DNS (server %s) after --timeout %v, want %s: ExternalDNS has not published it; is it running and writing to the lab's etcd? %s",
			name, server, r.opts.Timeout, want, externalDNS)
	default:
		return fmt.Errorf("the lab's DNS server %s did not answer for %s within --timeout %v (want %s): %v; is the lab's DNS running? marina doctor (then marina up)",
			server, name, r.opts.Timeout, want, last)
	}
}

// getName GETs http://<name><path>, resolving the name through the lab's
// DNS server (this machine's resolver may not be set up for the zone: that
// is marina doctor's business, not the cluster's).
func (r *e2eRun) getName(ctx context.Context, rep lifecycle.Reporter, _ []lifecycle.Change) error {
	wctx, cancel := r.waitCtx(ctx)
	defer cancel()
	server := r.l.Config.DNS.ServerIP
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		addrs, err := LookupVia(ctx, server, host, 3*time.Second)
		if err != nil {
			return nil, fmt.Errorf("resolving %s via %s: %w", host, server, err)
		}
		d := net.Dialer{Timeout: 3 * time.Second}
		var errs []error
		for _, a := range addrs {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(a, port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
	r.res.NameURL = "http://" + r.res.DNSName + r.opts.Path
	tries, last, err := getUntil2xx(wctx, e2eHTTPClient(dial), r.res.NameURL)
	if err == nil {
		rep.Progress(fmt.Sprintf("GET %s answered 2xx (try %d)", r.res.NameURL, tries))
		return nil
	}
	if !timedOut(ctx, wctx) {
		return err
	}
	return fmt.Errorf("GET %s (resolved via %s) from this machine: no 2xx answer within --timeout %v (%d tries; last: %v), though the IP answered: the name must resolve to %s only; check it with marina dns lookup %s",
		r.res.NameURL, server, r.opts.Timeout, tries, last, r.res.VIP, r.res.DNSName)
}

// cleanup deletes the namespace (bounded, even after ctx was cancelled),
// or, with Keep, says how to reach and delete what was left.
func (r *e2eRun) cleanup(ctx context.Context) error {
	ns := r.res.Namespace
	if !r.nsSent || r.dyn == nil {
		return nil
	}
	r.res.Delete = r.kubectl("delete", "namespace", ns)
	if r.opts.Keep {
		r.res.Kept, r.res.Cleanup = true, "kept"
		if r.res.URL != "" {
			r.res.Reach = append(r.res.Reach, "curl "+r.res.URL)
			if r.res.DNSSkipped == "" {
				r.res.Reach = append(r.res.Reach, "curl "+"http://"+r.res.DNSName+r.opts.Path+"   (needs this machine's resolver for "+r.l.Config.DNS.Zone+": marina doctor)")
			}
		}
		r.res.Reach = append(r.res.Reach, r.kubectl("-n", ns, "get", "all"))
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e2eCleanupTimeout)
	defer cancel()
	step := lifecycle.NewStep("Delete namespace "+ns, nil, func(ctx context.Context, _ lifecycle.Reporter, _ []lifecycle.Change) error {
		err := kube.NewTyped[corev1.Namespace](r.dyn, kube.Namespaces, "").Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s of cluster %s: %w; delete it by hand: %s", ns, r.res.Cluster, err, r.res.Delete)
		}
		return nil
	})
	if _, err := lifecycle.Run(cctx, "cluster e2e cleanup", []lifecycle.Step{step}, lifecycle.Options{Renderer: r.opts.Renderer}); err != nil {
		r.res.Cleanup = err.Error()
		return err
	}
	r.res.Cleanup = "deleted"
	return nil
}
