// Package coredns is marina's built-in plugin that makes every cluster's
// CoreDNS forward the local zone (demo.internal -> 172.30.255.53) and the
// configured custom domains to their resolvers.
//
// It edits the cluster's own Corefile (ConfigMap kube-system/coredns)
// instead of replacing it: package corefile adds, replaces or removes only
// the server blocks marina wrote, each marked by a comment, and keeps every
// other byte. CoreDNS is restarted (the `kubectl rollout restart` way) only
// when marina's edit has not been rolled out yet, so a re-run with nothing
// to change changes nothing.
package coredns

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/bcollard/marina/plugins/coredns/corefile"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/kube"
)

// Version is the plugin's version.
const Version = "0.1.0"

// The objects the plugin edits: kubeadm's (and so kind's) CoreDNS.
const (
	Namespace  = "kube-system"
	ConfigMap  = "coredns"
	Deployment = "coredns"
	// CorefileKey is the ConfigMap key holding the Corefile.
	CorefileKey = "Corefile"
)

// Annotations the plugin writes.
const (
	// RestartedAtAnnotation is what `kubectl rollout restart` sets on the
	// pod template to roll the pods.
	RestartedAtAnnotation = "kubectl.kubernetes.io/restartedAt"
	// CorefileHashAnnotation is set on the ConfigMap to the sha256 of the
	// Corefile marina wrote, and on the Deployment's pod template to the
	// hash the pods were restarted for. CoreDNS is restarted while they
	// differ, so a restart that failed after the ConfigMap was written is
	// redone by the next run, and a run with nothing new restarts nothing.
	CorefileHashAnnotation = "marina.dev/corefile-sha256"
	// FieldManager names marina in the objects' managed fields.
	FieldManager = "marina-coredns"
)

// Config is the plugin's config (plugins.coredns.config).
type Config struct {
	Cache          int           `json:"cache" doc:"Seconds CoreDNS caches answers of the forwarded zones (the cache directive of marina's server blocks); 0 writes no cache directive."`
	RolloutTimeout time.Duration `json:"rolloutTimeout" doc:"How long PostCluster waits for the restarted CoreDNS pods to be ready; 0 does not wait."`
}

// DefaultConfig is the config used where the user sets nothing.
func DefaultConfig() Config {
	return Config{Cache: 30, RolloutTimeout: 2 * time.Minute}
}

// Validate checks what JSON types cannot.
func (c *Config) Validate() []sdk.Diagnostic {
	var ds []sdk.Diagnostic
	if c.Cache < 0 || c.Cache > 86400 {
		ds = append(ds, sdk.Errorf("cache", "must be between 0 (no cache) and 86400 seconds, got %d", c.Cache))
	}
	if c.RolloutTimeout < 0 {
		ds = append(ds, sdk.Errorf("rolloutTimeout", "must be 0 (do not wait) or more, got %s", c.RolloutTimeout))
	}
	return ds
}

// Plugin is the coredns plugin.
type Plugin struct {
	// newClient connects to a cluster from its kubeconfig; tests replace it.
	newClient func(kubeconfig []byte) (dynamic.Interface, error)
	// now stamps restarts; tests replace it.
	now func() time.Time
	// pollInterval is how often the rollout is checked.
	pollInterval time.Duration
}

// New returns the coredns plugin.
func New() sdk.Plugin {
	return &Plugin{newClient: clientFor, now: time.Now, pollInterval: time.Second}
}

// Info describes the plugin.
func (p *Plugin) Info() sdk.Info {
	cfg := DefaultConfig()
	return sdk.Info{
		Name:        "coredns",
		Version:     Version,
		Description: "Makes each cluster's CoreDNS forward the local zone and custom domains, editing only marina's blocks of the Corefile",
		Maintainer:  "marina",
		// localdns publishes nothing this plugin needs (the zone and its
		// server are in Env), but when it is enabled its server should
		// exist before clusters forward to it.
		Dependencies: []sdk.Dependency{{Name: "localdns", Optional: true}},
		Capabilities: []string{sdk.CapKubeconfig},
		Timeouts:     map[sdk.Hook]time.Duration{sdk.PostCluster: 4 * time.Minute},
		Config:       &cfg,
	}
}

// PostCluster makes the cluster's Corefile forward the zones and restarts
// CoreDNS if that edit is not rolled out yet.
func (p *Plugin) PostCluster(ctx context.Context, req *sdk.Request) (*sdk.Result, error) {
	var cfg Config
	if err := req.Config(&cfg); err != nil {
		return nil, err
	}
	forwards, err := Forwards(req.Env)
	if err != nil {
		return nil, err
	}
	if req.Cluster == nil || len(req.Cluster.Kubeconfig) == 0 {
		return nil, errors.New("no kubeconfig for the cluster: PostCluster needs the cluster's admin kubeconfig (the host passes it in Request.Cluster.Kubeconfig)")
	}
	dyn, err := p.newClient(req.Cluster.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", req.Cluster.Name, err)
	}

	req.Progress("forwarding %s in CoreDNS of %s", zoneList(forwards), req.Cluster.Name)
	hash, changed, err := EnsureCorefile(ctx, dyn, forwards, corefile.Options{CacheSeconds: cfg.Cache})
	if err != nil {
		return nil, err
	}
	if changed {
		req.Logger().Info("updated the Corefile", "configmap", Namespace+"/"+ConfigMap, "zones", zoneList(forwards))
	}
	restarted, err := EnsureRolledOut(ctx, dyn, hash, p.now())
	if err != nil {
		return nil, err
	}
	if !restarted {
		req.Progress("CoreDNS of %s is up to date", req.Cluster.Name)
		return &sdk.Result{}, nil
	}
	req.Logger().Info("restarted CoreDNS", "deployment", Namespace+"/"+Deployment)
	if cfg.RolloutTimeout > 0 {
		req.Progress("waiting up to %s for CoreDNS to restart", cfg.RolloutTimeout)
		if err := WaitRollout(ctx, dyn, cfg.RolloutTimeout, p.pollInterval); err != nil {
			return nil, err
		}
	}
	return &sdk.Result{}, nil
}

// Forwards returns the zones CoreDNS must forward: the local zone to its
// DNS server, then each custom domain to its resolvers.
func Forwards(env sdk.Env) ([]corefile.Forward, error) {
	var out []corefile.Forward
	if env.DNSZone != "" {
		if env.DNSServerIP == "" {
			return nil, fmt.Errorf("the local zone %s has no DNS server address (Env.DNSServerIP is empty); set dns.serverIP in marina's config", env.DNSZone)
		}
		out = append(out, corefile.Forward{Zone: env.DNSZone, Resolvers: []string{env.DNSServerIP}})
	}
	for i, r := range env.CustomDNSResolvers {
		if strings.EqualFold(strings.TrimSuffix(r.Domain, "."), strings.TrimSuffix(env.DNSZone, ".")) {
			return nil, fmt.Errorf("kind.customDNSResolvers[%d]: %s is the local zone, which marina already forwards; remove the entry", i, r.Domain)
		}
		out = append(out, corefile.Forward{Zone: r.Domain, Resolvers: r.Resolvers})
	}
	return out, nil
}

// EnsureCorefile edits the Corefile in ConfigMap kube-system/coredns to
// forward exactly forwards in marina's blocks and writes it back only if
// it changed, with optimistic concurrency (a write that lost a race is
// redone on the fresh object, a few times at most). It returns the
// CoreDNS-restart hash marina's last write recorded on the ConfigMap ("" if
// marina never wrote it) and whether it wrote now.
func EnsureCorefile(ctx context.Context, dyn dynamic.Interface, forwards []corefile.Forward, opt corefile.Options) (hash string, changed bool, err error) {
	cms := kube.NewTyped[corev1.ConfigMap](dyn, kube.ConfigMaps, Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		cm, err := cms.Get(ctx, ConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap %s/%s not found: the cluster has no kubeadm CoreDNS to configure; install CoreDNS (kind does by default) or disable the coredns plugin", Namespace, ConfigMap)
		}
		if err != nil {
			return fmt.Errorf("reading ConfigMap %s/%s: %w", Namespace, ConfigMap, err)
		}
		hash = cm.Annotations[CorefileHashAnnotation]
		current, ok := cm.Data[CorefileKey]
		if !ok {
			return fmt.Errorf("ConfigMap %s/%s has no %q key, so marina cannot tell which Corefile CoreDNS runs; restore it (kubeadm writes it) or disable the coredns plugin", Namespace, ConfigMap, CorefileKey)
		}
		edited, err := corefile.Edit([]byte(current), forwards, opt)
		if err != nil {
			return fmt.Errorf("ConfigMap %s/%s key %s: %w", Namespace, ConfigMap, CorefileKey, err)
		}
		if string(edited) == current {
			return nil
		}
		cm = cm.DeepCopy()
		cm.Data[CorefileKey] = string(edited)
		hash = corefileHash(edited)
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations[CorefileHashAnnotation] = hash
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			if apierrors.IsConflict(err) {
				return err // retried on the fresh object
			}
			return fmt.Errorf("updating ConfigMap %s/%s: %w", Namespace, ConfigMap, err)
		}
		changed = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return "", false, fmt.Errorf("updating ConfigMap %s/%s: it kept changing while marina edited it (%w); run the command again", Namespace, ConfigMap, err)
	}
	return hash, changed, err
}

// EnsureRolledOut restarts the CoreDNS Deployment (pod template annotation
// kubectl.kubernetes.io/restartedAt, as `kubectl rollout restart` does)
// unless its pods already run the Corefile marina last wrote (hash, ""
// when marina never wrote one). It reports whether it restarted.
func EnsureRolledOut(ctx context.Context, dyn dynamic.Interface, hash string, now time.Time) (restarted bool, err error) {
	if hash == "" {
		return false, nil
	}
	deployments := kube.NewTyped[appsv1.Deployment](dyn, kube.Deployments, Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := deployments.Get(ctx, Deployment, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("the CoreDNS Deployment %s/%s was not found, so the new Corefile cannot be rolled out; if CoreDNS runs under another name, restart it yourself, or disable the coredns plugin", Namespace, Deployment)
		}
		if err != nil {
			return fmt.Errorf("reading Deployment %s/%s: %w", Namespace, Deployment, err)
		}
		if d.Spec.Template.Annotations[CorefileHashAnnotation] == hash {
			return nil
		}
		d = d.DeepCopy()
		if d.Spec.Template.Annotations == nil {
			d.Spec.Template.Annotations = map[string]string{}
		}
		d.Spec.Template.Annotations[RestartedAtAnnotation] = now.UTC().Format(time.RFC3339)
		d.Spec.Template.Annotations[CorefileHashAnnotation] = hash
		if _, err := deployments.Update(ctx, d, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
			if apierrors.IsConflict(err) {
				return err
			}
			return fmt.Errorf("restarting Deployment %s/%s: %w", Namespace, Deployment, err)
		}
		restarted = true
		return nil
	})
	if apierrors.IsConflict(err) {
		return false, fmt.Errorf("restarting Deployment %s/%s: it kept changing while marina updated it (%w); run the command again", Namespace, Deployment, err)
	}
	return restarted, err
}

// WaitRollout waits until the CoreDNS Deployment's rollout is complete, by
// the rules of `kubectl rollout status`, for at most timeout (and no longer
// than ctx allows), checking every interval.
func WaitRollout(ctx context.Context, dyn dynamic.Interface, timeout, interval time.Duration) error {
	deployments := kube.NewTyped[appsv1.Deployment](dyn, kube.Deployments, Namespace)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	status := "not read yet"
	for {
		d, err := deployments.Get(ctx, Deployment, metav1.GetOptions{})
		switch {
		case err == nil:
			var done bool
			done, status, err = rolloutDone(d)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
		case ctx.Err() == nil && beforeDeadline(ctx):
			// At the deadline client-go's rate limiter refuses the call
			// before ctx is done; keep the last real status then.
			status = err.Error()
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("CoreDNS (Deployment %s/%s) did not finish restarting within %s: %s; see kubectl -n %s rollout status deployment/%s and kubectl -n %s logs deployment/%s",
					Namespace, Deployment, timeout, status, Namespace, Deployment, Namespace, Deployment)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// rolloutDone applies kubectl's rollout status rules for a Deployment.
func rolloutDone(d *appsv1.Deployment) (bool, string, error) {
	if d.Generation > d.Status.ObservedGeneration {
		return false, "the Deployment controller has not seen the restart yet", nil
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return false, "", fmt.Errorf("CoreDNS (Deployment %s/%s) exceeded its progress deadline: %s; see kubectl -n %s logs deployment/%s", Namespace, Deployment, c.Message, Namespace, Deployment)
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	switch {
	case s.UpdatedReplicas < want:
		return false, fmt.Sprintf("%d of %d pods updated", s.UpdatedReplicas, want), nil
	case s.Replicas > s.UpdatedReplicas:
		return false, fmt.Sprintf("%d old pods still terminating", s.Replicas-s.UpdatedReplicas), nil
	case s.AvailableReplicas < s.UpdatedReplicas:
		return false, fmt.Sprintf("%d of %d updated pods available", s.AvailableReplicas, s.UpdatedReplicas), nil
	}
	return true, "", nil
}

// clientFor connects to the cluster described by an admin kubeconfig.
func clientFor(kubeconfig []byte) (dynamic.Interface, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster's kubeconfig: %w", err)
	}
	cfg.UserAgent = "marina-coredns/" + Version
	return dynamic.NewForConfig(cfg)
}

func corefileHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func zoneList(fs []corefile.Forward) string {
	if len(fs) == 0 {
		return "no zones"
	}
	zones := make([]string, len(fs))
	for i, f := range fs {
		zones[i] = f.Zone
	}
	return strings.Join(zones, ", ")
}

// beforeDeadline reports whether ctx's deadline (if any) is still ahead.
func beforeDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return !ok || time.Now().Before(d)
}
