package externaldns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Bounds of the conversation with the cluster's API server.
const (
	kubeRequestTimeout = 15 * time.Second
	pollInterval       = 2 * time.Second
	// stopTimeout bounds PreClusterDelete's wait for ExternalDNS's pods to go.
	stopTimeout = 60 * time.Second
)

// newClientset builds a clientset from an admin kubeconfig.
func newClientset(cluster string, kubeconfig []byte) (kubernetes.Interface, error) {
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("cluster %s: the host passed no kubeconfig (the plugin declares the %q capability)", cluster, "kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: reading its kubeconfig: %w", cluster, err)
	}
	cfg.Timeout = kubeRequestTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: building a client: %w", cluster, err)
	}
	return cs, nil
}

// applyAll server-side applies the objects in order, as FieldManager, taking
// over fields another manager set (marina owns these objects).
func applyAll(ctx context.Context, cs kubernetes.Interface, o *objects) error {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	steps := []struct {
		what  string
		apply func() error
	}{
		{"Namespace " + Namespace, func() error { _, err := cs.CoreV1().Namespaces().Apply(ctx, o.Namespace, opts); return err }},
		{"ServiceAccount " + Namespace + "/" + AppName, func() error {
			_, err := cs.CoreV1().ServiceAccounts(Namespace).Apply(ctx, o.ServiceAccount, opts)
			return err
		}},
		{"ClusterRole " + AppName, func() error { _, err := cs.RbacV1().ClusterRoles().Apply(ctx, o.ClusterRole, opts); return err }},
		{"ClusterRoleBinding " + AppName, func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Apply(ctx, o.ClusterRoleBinding, opts)
			return err
		}},
		{"Deployment " + Namespace + "/" + AppName, func() error {
			_, err := cs.AppsV1().Deployments(Namespace).Apply(ctx, o.Deployment, opts)
			return err
		}},
	}
	for _, s := range steps {
		if err := s.apply(); err != nil {
			return fmt.Errorf("applying %s: %w", s.what, err)
		}
	}
	return nil
}

// waitAvailable polls the Deployment until its current generation is rolled
// out and Available, for at most timeout (and while ctx lasts). On failure
// the error says what its pods are waiting for.
func waitAvailable(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	// End before the hook's own deadline, so the error explains itself.
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, (time.Until(dl) * 9 / 10).Round(time.Second))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last string
	for {
		d, err := cs.AppsV1().Deployments(Namespace).Get(ctx, AppName, metav1.GetOptions{})
		switch {
		case err == nil:
			ok, why := available(d)
			if ok {
				return nil
			}
			last = why
		case ctx.Err() == nil:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			pods := describePods(context.WithoutCancel(ctx), cs)
			return fmt.Errorf("deployment %s/%s is not Available after %s: %s%s", Namespace, AppName, timeout, last, pods)
		case <-tick.C:
		}
	}
}

// available reports whether d's current spec is rolled out and Available,
// and otherwise why not.
func available(d *appsv1.Deployment) (bool, string) {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration < d.Generation {
		return false, "the deployment controller has not seen the latest spec yet"
	}
	if d.Status.UpdatedReplicas < want {
		return false, fmt.Sprintf("%d of %d replicas updated", d.Status.UpdatedReplicas, want)
	}
	if d.Status.AvailableReplicas < want {
		return false, fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			if c.Status == corev1.ConditionTrue {
				return true, ""
			}
			return false, fmt.Sprintf("condition Available is %s (%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	return false, "no Available condition yet"
}

// describePods summarises why ExternalDNS's pods are not ready, for errors.
func describePods(ctx context.Context, cs kubernetes.Interface) string {
	ctx, cancel := context.WithTimeout(ctx, kubeRequestTimeout)
	defer cancel()
	pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(podLabels).String()})
	if err != nil || len(pods.Items) == 0 {
		return "; no ExternalDNS pod exists"
	}
	var parts []string
	for _, p := range pods.Items {
		var why []string
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				why = append(why, fmt.Sprintf("not scheduled (%s: %s)", c.Reason, c.Message))
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			switch {
			case s.State.Waiting != nil:
				why = append(why, fmt.Sprintf("container %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message))
			case s.State.Terminated != nil:
				why = append(why, fmt.Sprintf("container %s terminated: %s (exit %d)", s.Name, s.State.Terminated.Reason, s.State.Terminated.ExitCode))
			case !s.Ready:
				why = append(why, fmt.Sprintf("container %s running but not ready (restarts: %d)", s.Name, s.RestartCount))
			}
		}
		if len(why) == 0 {
			why = append(why, "phase "+string(p.Status.Phase))
		}
		parts = append(parts, "pod "+p.Name+": "+strings.Join(why, "; "))
	}
	return "; " + strings.Join(parts, "; ")
}

// stopExternalDNS deletes the ExternalDNS Deployment and waits (bounded)
// until its pods are gone, so it cannot write records again after the
// cleanup. A Deployment that does not exist is fine.
func stopExternalDNS(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fg := metav1.DeletePropagationForeground
	err := cs.AppsV1().Deployments(Namespace).Delete(ctx, AppName, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting deployment %s/%s: %w", Namespace, AppName, err)
	}
	selector := labels.SelectorFromSet(podLabels).String()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		pods, err := cs.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d pod(s) still exist", len(pods.Items))
			}
			return errors.Join(fmt.Errorf("ExternalDNS pods in %s did not go away within %s", Namespace, timeout), err)
		case <-tick.C:
		}
	}
}
