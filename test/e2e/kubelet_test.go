package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/bcollard/marina/plugins/externaldns"
	"github.com/bcollard/marina/sdk/dockertest"
	"github.com/bcollard/marina/sdk/kubetest"
)

// podSpec names a Deployment marina applies whose pod the tests run, and
// the locally built binary that stands for its image.
type podSpec struct {
	namespace, deployment string
	binary                string
	// entrypoint is where the binary sits in the image (the image's
	// entrypoint: the Deployment gives only args).
	entrypoint string
}

// kubelet plays the kubelet for a few Deployments of the lab's clusters: it
// runs their pod as a container on the lab's network, as the Deployment
// describes it — args, env (values, field and secret references), the
// service account's token, secret and config map volumes kept in sync — and
// removes it when the Deployment goes. It also plays kube-proxy for
// admission webhooks served by such a pod: their Service becomes an
// ExternalName of the container's address (the API server resolves
// webhook Services itself) and the webhook configuration's port the
// container's.
type kubelet struct {
	network string
	specs   []podSpec

	ctx    context.Context // the lab's lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	images map[string]string // binary -> image
}

// syncInterval is how often a pod's Deployment and secrets are re-read.
const syncInterval = 300 * time.Millisecond

func newKubelet(t testing.TB, network string) *kubelet {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{
		network: network,
		ctx:     ctx,
		cancel:  cancel,
		images:  map[string]string{},
		specs: []podSpec{
			{namespace: "metallb-system", deployment: "controller", binary: kubetest.MetalLBControllerPath(t), entrypoint: "/controller"},
			{namespace: externaldns.Namespace, deployment: externaldns.AppName, binary: kubetest.ExternalDNSPath(t), entrypoint: "/external-dns"},
		},
	}
	t.Cleanup(func() { cancel(); k.wg.Wait() })
	return k
}

// serve waits (until ctx ends) for cluster's kubeconfig at kubeconfigPath
// and for each of the kubelet's Deployments in the cluster, and starts
// their pods. The channel yields one value: the first error, or nil once
// every pod started or ctx ended. The pods outlive ctx: they run until their
// Deployment is deleted or the lab ends.
func (k *kubelet) serve(ctx context.Context, t testing.TB, cluster, kubeconfigPath string) <-chan error {
	out := make(chan error, 1)
	go func() {
		cfg, err := waitKubeconfig(ctx, kubeconfigPath)
		if err != nil || cfg == nil {
			out <- err
			return
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			out <- err
			return
		}
		errs := make(chan error, len(k.specs))
		for _, s := range k.specs {
			go func() { errs <- k.startWhenApplied(ctx, t, cluster, cs, cfg, s) }()
		}
		var all []error
		for range k.specs {
			all = append(all, <-errs)
		}
		out <- errors.Join(all...)
	}()
	return out
}

// waitKubeconfig polls for the kubeconfig file until ctx ends (nil, nil).
func waitKubeconfig(ctx context.Context, p string) (*rest.Config, error) {
	for {
		if _, err := os.Stat(p); err == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", p)
			if err != nil {
				return nil, fmt.Errorf("kubeconfig %s: %w", p, err)
			}
			cfg.Timeout = 30 * time.Second
			return cfg, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (k *kubelet) startWhenApplied(ctx context.Context, t testing.TB, cluster string, cs kubernetes.Interface, cfg *rest.Config, s podSpec) error {
	for {
		d, err := cs.AppsV1().Deployments(s.namespace).Get(ctx, s.deployment, metav1.GetOptions{})
		switch {
		case err == nil:
			if err := k.start(t, cluster, cs, cfg, s, d.Spec.Template); err != nil {
				return fmt.Errorf("pod of Deployment %s/%s in %s: %w", s.namespace, s.deployment, cluster, err)
			}
			return nil
		case ctx.Err() != nil:
			return nil
		case !apierrors.IsNotFound(err) && !isTransient(err):
			return fmt.Errorf("read Deployment %s/%s in %s: %w", s.namespace, s.deployment, cluster, err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(syncInterval):
		}
	}
}

// isTransient is an error a cluster that is still coming up may give.
func isTransient(err error) bool {
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTooManyRequests(err) || strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "EOF")
}

// start runs the pod template's first container.
func (k *kubelet) start(t testing.TB, cluster string, cs kubernetes.Interface, cfg *rest.Config, s podSpec, tmpl corev1.PodTemplateSpec) error {
	ctx, cancel := context.WithTimeout(k.ctx, 2*time.Minute)
	defer cancel()
	spec := tmpl.Spec
	if len(spec.Containers) == 0 {
		return errors.New("the pod template has no container")
	}
	c := spec.Containers[0]
	podName := s.deployment + "-" + cluster
	nodeName := cluster + "-control-plane"

	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts(s.namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("token of service account %s/%s: %w", s.namespace, sa, err)
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return err
		}
	}
	files := map[string][]byte{
		"/var/run/secrets/kubernetes.io/serviceaccount/token":     []byte(tok.Status.Token),
		"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt":    ca,
		"/var/run/secrets/kubernetes.io/serviceaccount/namespace": []byte(s.namespace),
	}
	secretMounts := map[string]string{} // secret -> mount path
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			switch {
			case v.Secret != nil:
				sec, err := cs.CoreV1().Secrets(s.namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("secret volume %s: %w", v.Name, err)
				}
				secretMounts[v.Secret.SecretName] = m.MountPath
				for key, val := range sec.Data {
					files[path.Join(m.MountPath, key)] = val
				}
			case v.ConfigMap != nil:
				cm, err := cs.CoreV1().ConfigMaps(s.namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("config map volume %s: %w", v.Name, err)
				}
				for key, val := range cm.Data {
					files[path.Join(m.MountPath, key)] = []byte(val)
				}
			}
		}
	}

	env := []string{"KUBERNETES_SERVICE_HOST=" + nodeName, "KUBERNETES_SERVICE_PORT=6443"}
	for _, e := range c.Env {
		val := e.Value
		if f := e.ValueFrom; f != nil {
			switch {
			case f.FieldRef != nil:
				switch f.FieldRef.FieldPath {
				case "metadata.name":
					val = podName
				case "metadata.namespace":
					val = s.namespace
				case "spec.nodeName":
					val = nodeName
				default:
					continue // status.podIP and the like: unknown before start
				}
			case f.SecretKeyRef != nil:
				sec, err := cs.CoreV1().Secrets(s.namespace).Get(ctx, f.SecretKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("env %s: %w", e.Name, err)
				}
				val = string(sec.Data[f.SecretKeyRef.Key])
			case f.ConfigMapKeyRef != nil:
				cm, err := cs.CoreV1().ConfigMaps(s.namespace).Get(ctx, f.ConfigMapKeyRef.Name, metav1.GetOptions{})
				if err != nil {
					return fmt.Errorf("env %s: %w", e.Name, err)
				}
				val = cm.Data[f.ConfigMapKeyRef.Key]
			}
		}
		env = append(env, e.Name+"="+val)
	}

	// The Pod object the ReplicaSet controller would create and the
	// kubelet report on (MetalLB's controller reads its own Pod).
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: s.namespace, Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec:       *spec.DeepCopy(),
	}
	pod.Spec.NodeName = nodeName
	if _, err := cs.CoreV1().Pods(s.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the Pod object %s/%s: %w", s.namespace, podName, err)
	}

	image, err := k.image(ctx, s.binary, s.entrypoint)
	if err != nil {
		return err
	}
	args := []string{"create", "--name", "e2e-" + podName, "--hostname", podName, "--network", k.network,
		"--label", dockertest.LabelTest + "=1", "--label", dockertest.LabelPID + "=" + strconv.Itoa(os.Getpid()),
		"--label", dockertest.LabelName + "=" + t.Name(), "--entrypoint", s.entrypoint}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(append(args, image), c.Args...)
	id, err := docker(ctx, args...)
	if err != nil {
		return err
	}
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		<-k.ctx.Done()
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if logs, err := dockerCombined(rctx, "logs", "--tail", "40", id); err == nil && t.Failed() {
			t.Logf("last log lines of %s's pod %s:\n%s", cluster, podName, logs)
		}
		docker(rctx, "rm", "-f", "-v", id)
	}()
	if err := copyFiles(ctx, id, files); err != nil {
		return err
	}
	if _, err := docker(ctx, "start", id); err != nil {
		return err
	}
	ip, err := docker(ctx, "inspect", "--format", "{{(index .NetworkSettings.Networks \""+k.network+"\").IPAddress}}", id)
	if err != nil {
		return err
	}
	if err := podRunning(ctx, cs, s.namespace, podName, ip); err != nil {
		return err
	}
	if err := routeWebhooks(ctx, cs, s.namespace, tmpl, c, ip); err != nil {
		return err
	}
	t.Logf("kubelet stand-in: %s/%s of %s runs in container %.12s at %s", s.namespace, podName, cluster, id, ip)
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		k.sync(t, cs, s, podName, id, secretMounts)
	}()
	return nil
}

// sync keeps a pod's secret volumes current and removes the pod when its
// Deployment is deleted (or its cluster's API server is gone for good).
func (k *kubelet) sync(t testing.TB, cs kubernetes.Interface, s podSpec, podName, id string, secretMounts map[string]string) {
	versions := map[string]string{}
	failures := 0
	for {
		select {
		case <-k.ctx.Done():
			return
		case <-time.After(syncInterval):
		}
		ctx, cancel := context.WithTimeout(k.ctx, 10*time.Second)
		d, err := cs.AppsV1().Deployments(s.namespace).Get(ctx, s.deployment, metav1.GetOptions{})
		gone := apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil)
		if err == nil && !gone {
			// The Pod itself deleted (kubectl delete pod): the kubelet stops it.
			_, perr := cs.CoreV1().Pods(s.namespace).Get(ctx, podName, metav1.GetOptions{})
			gone = apierrors.IsNotFound(perr)
		}
		if err != nil && !gone {
			failures++
			gone = failures > 20 // the API server went away with its cluster
		} else {
			failures = 0
		}
		if gone {
			// The kubelet stops the container; the garbage collector
			// deletes the Pod and, for a foreground deletion (which waits
			// for the Pods), then the Deployment.
			rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
			docker(rctx, "rm", "-f", "-v", id)
			rcancel()
			if err == nil {
				zero := int64(0)
				cs.CoreV1().Pods(s.namespace).Delete(ctx, podName, metav1.DeleteOptions{GracePeriodSeconds: &zero})
				if d != nil && d.DeletionTimestamp != nil && len(d.Finalizers) > 0 {
					cs.AppsV1().Deployments(s.namespace).Patch(ctx, s.deployment, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				}
			}
			cancel()
			return
		}
		for name, mount := range secretMounts {
			sec, err := cs.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil || sec.ResourceVersion == versions[name] {
				continue
			}
			files := map[string][]byte{}
			for key, val := range sec.Data {
				files[path.Join(mount, key)] = val
			}
			if err := copyFiles(ctx, id, files); err != nil {
				t.Logf("kubelet stand-in: syncing secret %s/%s: %v", s.namespace, name, err)
				continue
			}
			versions[name] = sec.ResourceVersion
		}
		cancel()
	}
}

// podRunning reports the Pod running and ready at ip, as the kubelet would.
func podRunning(ctx context.Context, cs kubernetes.Interface, ns, name, ip string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		pod.Status.Phase = corev1.PodRunning
		pod.Status.PodIP = ip
		pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		pod.Status.StartTime = &now
		pod.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
		_, err = cs.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		return err
	})
}

// routeWebhooks plays kube-proxy for the admission webhooks served by the
// pod: every webhook whose Service selects the pod gets that Service turned
// into an ExternalName of ip and its port set to the container's.
func routeWebhooks(ctx context.Context, cs kubernetes.Interface, ns string, tmpl corev1.PodTemplateSpec, c corev1.Container, ip string) error {
	vwcs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, vwc := range vwcs.Items {
		var svcName string
		var port int32
		for _, w := range vwc.Webhooks {
			ref := w.ClientConfig.Service
			if ref == nil || ref.Namespace != ns {
				continue
			}
			svc, err := cs.CoreV1().Services(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("webhook %s: %w", w.Name, err)
			}
			if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tmpl.Labels)) {
				continue
			}
			want := int32(443)
			if ref.Port != nil {
				want = *ref.Port
			}
			for _, p := range svc.Spec.Ports {
				if p.Port == want {
					port = targetPort(p.TargetPort, c)
				}
			}
			svcName = ref.Name
		}
		if svcName == "" || port == 0 {
			continue
		}
		patch := []byte(fmt.Sprintf(`{"spec":{"type":"ExternalName","externalName":%q}}`, ip))
		if _, err := cs.CoreV1().Services(ns).Patch(ctx, svcName, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "e2e-kube-proxy"}); err != nil {
			return fmt.Errorf("route Service %s/%s to %s: %w", ns, svcName, ip, err)
		}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, vwc.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range cur.Webhooks {
				if ref := cur.Webhooks[i].ClientConfig.Service; ref != nil && ref.Namespace == ns && ref.Name == svcName {
					ref.Port = &port
				}
			}
			_, err = cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, cur, metav1.UpdateOptions{FieldManager: "e2e-kube-proxy"})
			return err
		})
		if err != nil {
			return fmt.Errorf("point webhook configuration %s at port %d: %w", vwc.Name, port, err)
		}
	}
	return nil
}

// targetPort resolves a Service's target port against the container's
// named ports.
func targetPort(tp intstr.IntOrString, c corev1.Container) int32 {
	if tp.Type == intstr.Int {
		return tp.IntVal
	}
	for _, p := range c.Ports {
		if p.Name == tp.StrVal {
			return p.ContainerPort
		}
	}
	return 0
}

// image builds (once per binary content) an image FROM scratch holding
// binary at entrypoint, with a /tmp.
func (k *kubelet) image(ctx context.Context, binary, entrypoint string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if img, ok := k.images[binary]; ok {
		return img, nil
	}
	f, err := os.Open(binary)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	f.Close()
	if err != nil {
		return "", err
	}
	img := "marina-test/e2e-" + filepath.Base(binary) + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	if _, err := docker(ctx, "image", "inspect", img); err != nil {
		dir, err := os.MkdirTemp("", "marina-e2e-image-")
		if err != nil {
			return "", err
		}
		defer os.RemoveAll(dir)
		if err := os.Link(binary, filepath.Join(dir, "bin")); err != nil {
			b, rerr := os.ReadFile(binary)
			if rerr != nil {
				return "", rerr
			}
			if err := os.WriteFile(filepath.Join(dir, "bin"), b, 0o755); err != nil {
				return "", err
			}
		}
		dockerfile := "FROM scratch\nCOPY bin " + entrypoint + "\nWORKDIR /tmp\n"
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			return "", err
		}
		if _, err := docker(ctx, "build", "-q", "-t", img, dir); err != nil {
			return "", err
		}
	}
	k.images[binary] = img
	return img, nil
}

// copyFiles copies files (absolute paths in the container) into container
// id, running or not.
func copyFiles(ctx context.Context, id string, files map[string][]byte) error {
	dir, err := os.MkdirTemp("", "marina-e2e-files-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			return err
		}
	}
	_, err = docker(ctx, "cp", dir+"/.", id+":/")
	return err
}

// docker runs the docker CLI and returns its trimmed standard output.
func docker(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// dockerCombined is docker with standard error in the output.
func dockerCombined(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}
