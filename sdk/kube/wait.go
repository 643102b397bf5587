package kube

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// DefaultTimeout bounds WaitFor when its context has no deadline. Hooks
// always have one (marina gives each a deadline), so this only guards code
// that forgot to set one.
const DefaultTimeout = 5 * time.Minute

// Check is one look at whether something is ready.
//
//   - (true, nil): ready; waiting is over.
//   - (false, err): not ready yet; err (may be nil) says why and is kept for
//     the timeout message. Transient API errors belong here.
//   - (true, err): it failed for good (e.g. forbidden, invalid): WaitFor
//     returns err at once instead of retrying.
type Check func(ctx context.Context) (done bool, err error)

// maxBackoff is how far WaitFor's delay grows, as a multiple of interval.
const maxBackoff = 4

// WaitFor runs check until it reports done, then returns nil (or the
// error it was done with). The first check runs at once; later ones follow
// after a delay that starts at interval and grows by half each time, up to
// four times interval (a short backoff: readiness is usually reached within
// a few checks, and polling a cluster harder helps no one).
//
// It is bounded by ctx, and by DefaultTimeout when ctx has no deadline.
// When ctx ends first, the error names what (e.g. "deployment
// kube-system/coredns to be available"), wraps ctx.Err() (errors.Is works
// with context.DeadlineExceeded and context.Canceled) and carries the last
// reason check gave, so the message says what was still missing.
func WaitFor(ctx context.Context, what string, interval time.Duration, check Check) error {
	if interval <= 0 {
		return fmt.Errorf("waiting for %s: the interval must be positive, got %v", what, interval)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	start := time.Now()
	delay := interval
	var last error
	attempts := 0
	for {
		attempts++
		done, err := check(ctx)
		if done {
			if err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
			return nil
		}
		if err != nil {
			last = err
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return waitError(ctx, what, time.Since(start), attempts, last)
		case <-timer.C:
		}
		delay = min(delay+delay/2, maxBackoff*interval)
	}
}

func waitError(ctx context.Context, what string, took time.Duration, attempts int, last error) error {
	verb := "timed out"
	if errors.Is(ctx.Err(), context.Canceled) {
		verb = "cancelled"
	}
	took = took.Round(100 * time.Millisecond)
	if last == nil {
		return fmt.Errorf("%s after %v waiting for %s (%d checks, the last found it not ready): %w", verb, took, what, attempts, ctx.Err())
	}
	return fmt.Errorf("%s after %v waiting for %s (%d checks): %w; last error: %w", verb, took, what, attempts, ctx.Err(), last)
}

// transient reports whether a failed API call is worth retrying while
// waiting: everything but errors that will not change by themselves.
func transient(err error) bool {
	return !(apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) || apierrors.IsUnsupportedMediaType(err))
}

// DeploymentAvailable checks that a Deployment exists, that its controller
// has observed its latest spec, and that its Available condition is True
// (at least spec.replicas - maxUnavailable pods are ready). A missing
// Deployment is not ready yet, not an error: the check can run right after
// the apply that creates it.
func DeploymentAvailable(dyn dynamic.Interface, namespace, name string) Check {
	deployments := NewTyped[appsv1.Deployment](dyn, Deployments, namespace)
	return func(ctx context.Context) (bool, error) {
		d, err := deployments.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deployment %s/%s does not exist yet", namespace, name)
			}
			return !transient(err), fmt.Errorf("reading deployment %s/%s: %w", namespace, name, err)
		}
		if err := deploymentNotAvailable(d); err != nil {
			return false, err
		}
		return true, nil
	}
}

// deploymentNotAvailable says why d is not available, or returns nil.
func deploymentNotAvailable(d *appsv1.Deployment) error {
	id := d.Namespace + "/" + d.Name
	if d.Status.ObservedGeneration < d.Generation {
		return fmt.Errorf("deployment %s: generation %d not yet observed by the deployment controller (observed %d)", id, d.Generation, d.Status.ObservedGeneration)
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	for _, c := range d.Status.Conditions {
		if c.Type != appsv1.DeploymentAvailable {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return nil
		}
		return fmt.Errorf("deployment %s: %d of %d replicas available (Available=%s: %s %s)", id, d.Status.AvailableReplicas, want, c.Status, c.Reason, c.Message)
	}
	return fmt.Errorf("deployment %s: %d of %d replicas available (no Available condition yet)", id, d.Status.AvailableReplicas, want)
}

// crdGVR is the resource of CustomResourceDefinitions (read through the
// dynamic client: marina does not depend on the apiextensions module).
var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDEstablished checks that the CustomResourceDefinition name (e.g.
// "ipaddresspools.metallb.io") is Established, i.e. its kinds are served.
// A CRD whose names were not accepted (NamesAccepted=False, a conflict with
// another CRD) fails for good.
func CRDEstablished(dyn dynamic.Interface, name string) Check {
	return func(ctx context.Context) (bool, error) {
		o, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("CustomResourceDefinition %s does not exist yet", name)
			}
			return !transient(err), fmt.Errorf("reading CustomResourceDefinition %s: %w", name, err)
		}
		return crdState(o)
	}
}

func crdState(o *unstructured.Unstructured) (bool, error) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	established := false
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["type"].(string)
		status, _ := m["status"].(string)
		switch {
		case typ == "NamesAccepted" && status == "False":
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return true, fmt.Errorf("CustomResourceDefinition %s: its names were not accepted (%s: %s): rename it or remove the conflicting CRD", o.GetName(), reason, msg)
		case typ == "Established" && status == "True":
			established = true
		}
	}
	if !established {
		return false, fmt.Errorf("CustomResourceDefinition %s is not Established yet", o.GetName())
	}
	return true, nil
}

// IsWebhookUnavailable reports whether err is the API server refusing a
// request because it could not call an admission or conversion webhook:
// the webhook's pods are not running or ready yet, its Service has no
// endpoints, its certificate is not injected yet, or it timed out. Right
// after an addon is installed that is expected and worth retrying (with
// WaitFor); a webhook that answered and denied the request is not reported
// here (the request itself is wrong).
func IsWebhookUnavailable(err error) bool {
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return false
	}
	s := st.Status()
	if s.Code < 500 {
		return false
	}
	msg := s.Message
	return strings.Contains(msg, "failed calling webhook") || strings.Contains(msg, "conversion webhook for")
}
