// Command nodenet is a minimal kindnetd replacement for marina's offline test
// node image. Run as a hostNetwork DaemonSet on every node, it periodically
// reads the cluster's Nodes and
//
//   - writes <CNI_CONF_DIR>/10-nodenet.conflist (ptp + host-local + portmap)
//     from its own node's pod CIDRs, and
//   - routes every other node's pod CIDRs through that node's InternalIP.
//
// Environment:
//
//	NODE_NAME               this node's name (required; downward API spec.nodeName)
//	CONTROL_PLANE_ENDPOINT  optional "host:port" of the API server, used
//	                        instead of the kubernetes Service (added by kind)
//	CNI_CONF_DIR            default /etc/cni/net.d
//	RESYNC                  resync period, a Go duration; default 5s
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

type config struct {
	nodeName             string
	controlPlaneEndpoint string
	cniConfDir           string
	resync               time.Duration
}

func configFromEnv(getenv func(string) string) (config, error) {
	c := config{
		nodeName:             getenv("NODE_NAME"),
		controlPlaneEndpoint: getenv("CONTROL_PLANE_ENDPOINT"),
		cniConfDir:           getenv("CNI_CONF_DIR"),
		resync:               5 * time.Second,
	}
	if c.nodeName == "" {
		return c, fmt.Errorf("NODE_NAME is not set")
	}
	if c.cniConfDir == "" {
		c.cniConfDir = "/etc/cni/net.d"
	}
	if s := getenv("RESYNC"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("RESYNC=%q: want a positive duration such as 5s", s)
		}
		c.resync = d
	}
	return c, nil
}

// serviceAccountDir holds the pod's service account token and CA bundle.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// restConfig builds the API client configuration from inCluster (normally
// rest.InClusterConfig), pointing it at controlPlaneEndpoint when set. With
// an endpoint, the service account files suffice even if the kubernetes
// Service env vars are missing.
func restConfig(inCluster func() (*rest.Config, error), controlPlaneEndpoint string) (*rest.Config, error) {
	cfg, err := inCluster()
	if errors.Is(err, rest.ErrNotInCluster) && controlPlaneEndpoint != "" {
		cfg, err = &rest.Config{
			BearerTokenFile: filepath.Join(serviceAccountDir, "token"),
			TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(serviceAccountDir, "ca.crt")},
		}, nil
	}
	if err != nil {
		return nil, err
	}
	if controlPlaneEndpoint != "" {
		// Reach the API server directly: the kubernetes Service needs
		// kube-proxy, which needs a working pod network first.
		cfg.Host = "https://" + controlPlaneEndpoint
	}
	cfg.UserAgent = "nodenet"
	cfg.Timeout = 15 * time.Second
	return cfg, nil
}

func main() {
	log.SetFlags(log.LstdFlags | log.LUTC)
	log.SetPrefix("nodenet: ")

	cfg, err := configFromEnv(os.Getenv)
	if err != nil {
		log.Fatal(err)
	}
	rc, err := restConfig(rest.InClusterConfig, cfg.controlPlaneEndpoint)
	if err != nil {
		log.Fatalf("building API client config: %v", err)
	}
	client, err := corev1client.NewForConfig(rc)
	if err != nil {
		log.Fatalf("building API client: %v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	a := &agent{
		cfg:    cfg,
		nodes:  client.Nodes(),
		routes: newRouteManager(netlinkRoutes{}, log.Printf),
	}
	log.Printf("starting on node %s (API server %s, CNI config dir %s, resync %s)",
		cfg.nodeName, rc.Host, cfg.cniConfDir, cfg.resync)
	if err := a.routes.Adopt(); err != nil {
		log.Printf("listing routes left by a previous run: %v", err)
	}
	a.run(ctx)
	log.Printf("stopping")
}

// nodeLister is the part of the Nodes client the agent uses.
type nodeLister interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
}

type agent struct {
	cfg    config
	nodes  nodeLister
	routes *routeManager

	waitingLogged bool // "no podCIDR yet" already logged
	notFound      bool // "own node not found" already logged
}

// run resyncs immediately, then every cfg.resync, until ctx is done.
func (a *agent) run(ctx context.Context) {
	t := time.NewTicker(a.cfg.resync)
	defer t.Stop()
	for {
		a.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync performs one reconciliation. Every error is logged and left for the
// next resync to retry.
func (a *agent) sync(ctx context.Context) {
	list, err := a.nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		if ctx.Err() == nil {
			log.Printf("listing nodes: %v", err)
		}
		return
	}

	i := slices.IndexFunc(list.Items, func(n corev1.Node) bool { return n.Name == a.cfg.nodeName })
	if i < 0 {
		if !a.notFound {
			log.Printf("node %s not found; CNI config not written yet", a.cfg.nodeName)
			a.notFound = true
		}
	} else {
		a.notFound = false
		a.syncConflist(&list.Items[i])
	}

	if err := a.routes.Sync(DesiredRoutes(list.Items, a.cfg.nodeName)); err != nil {
		log.Printf("syncing routes: %v", err)
	}
}

func (a *agent) syncConflist(self *corev1.Node) {
	cidrs := PodCIDRs(self)
	if len(cidrs) == 0 {
		if !a.waitingLogged {
			log.Printf("node %s has no podCIDR yet; waiting", self.Name)
			a.waitingLogged = true
		}
		return
	}
	a.waitingLogged = false
	data, err := RenderConflist(cidrs)
	if err != nil {
		log.Printf("rendering CNI config for podCIDRs %v: %v", cidrs, err)
		return
	}
	path := filepath.Join(a.cfg.cniConfDir, conflistName)
	written, err := writeFileIfChanged(path, data)
	if err != nil {
		log.Printf("writing %s: %v", path, err)
		return
	}
	if written {
		log.Printf("wrote %s for podCIDRs %v", path, cidrs)
	}
}
