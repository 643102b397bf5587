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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/bcollard/marina/sdk/kube"
)

// Bounds of the conversation with the cluster's API server.
const (
	kubeRequestTimeout = 15 * time.Second
	pollInterval       = 2 * time.Second
	// stopTimeout bounds PreClusterDelete's wait for ExternalDNS's pods to go.
	stopTimeout = 60 * time.Second
)

// newClient builds a client from an admin kubeconfig: client-go's dynamic
// client, with k8s.io/api's types through kube.NewTyped (the typed
// clientset's scheme would cost every marina command its init).
func newClient(cluster string, kubeconfig []byte) (dynamic.Interface, error) {
	if len(kubeconfig) == 0 {
		return nil, fmt.Errorf("cluster %s: the host passed no kubeconfig (the plugin declares the %q capability)", cluster, "kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: reading its kubeconfig: %w", cluster, err)
	}
	cfg.Timeout = kubeRequestTimeout
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: building a client: %w", cluster, err)
	}
	return dyn, nil
}

// applyAll server-side applies the objects in order, as FieldManager, taking
// over fields another manager set (marina owns these objects).
func applyAll(ctx context.Context, dyn dynamic.Interface, o *objects) error {
	opts := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	for _, n := range o.list() {
		u, err := n.applyObject()
		if err != nil {
			return err
		}
		what := n.Kind + " " + u.GetName()
		var ri dynamic.ResourceInterface = dyn.Resource(n.Resource)
		if ns := u.GetNamespace(); ns != "" {
			what = n.Kind + " " + ns + "/" + u.GetName()
			ri = dyn.Resource(n.Resource).Namespace(ns)
		}
		if _, err := ri.Apply(ctx, u.GetName(), u, opts); err != nil {
			return fmt.Errorf("applying %s: %w", what, err)
		}
	}
	return nil
}

// waitAvailable polls the Deployment until its current generation is rolled
// out and Available, for at most timeout (and while ctx lasts). On failure
// the error says what its pods are waiting for.
func waitAvailable(ctx context.Context, dyn dynamic.Interface, timeout time.Duration) error {
	deployments := kube.NewTyped[appsv1.Deployment](dyn, kube.Deployments, Namespace)
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
		d, err := deployments.Get(ctx, AppName, metav1.GetOptions{})
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
			pods := describePods(context.WithoutCancel(ctx), dyn)
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
func describePods(ctx context.Context, dyn dynamic.Interface) string {
	ctx, cancel := context.WithTimeout(ctx, kubeRequestTimeout)
	defer cancel()
	pods, err := kube.NewTyped[corev1.Pod](dyn, kube.Pods, Namespace).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(podLabels).String()})
	if err != nil || len(pods) == 0 {
		return "; no ExternalDNS pod exists"
	}
	var parts []string
	for _, p := range pods {
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
func stopExternalDNS(ctx context.Context, dyn dynamic.Interface, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods := kube.NewTyped[corev1.Pod](dyn, kube.Pods, Namespace)
	fg := metav1.DeletePropagationForeground
	err := kube.NewTyped[appsv1.Deployment](dyn, kube.Deployments, Namespace).Delete(ctx, AppName, metav1.DeleteOptions{PropagationPolicy: &fg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting deployment %s/%s: %w", Namespace, AppName, err)
	}
	selector := labels.SelectorFromSet(podLabels).String()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		left, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d pod(s) still exist", len(left))
			}
			return errors.Join(fmt.Errorf("ExternalDNS pods in %s did not go away within %s", Namespace, timeout), err)
		case <-tick.C:
		}
	}
}
