package kubetest

import (
	"context"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MarkDeploymentsAvailable plays the part of the deployment controller and
// the kubelets, which this cluster does not run: until the test ends, every
// Deployment (in any namespace) whose current generation has not been
// observed gets a status with all its replicas ready and available and the
// condition Available=True, about 100 ms after it is created or changed.
// Use it to test a hook that waits for its Deployments (e.g. with
// kube.DeploymentAvailable): no Pod runs, so it tests what the plugin
// applies and how it waits, not the workload.
func (c *Cluster) MarkDeploymentsAvailable(t testing.TB) {
	t.Helper()
	cs := c.Clientset(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	t.Cleanup(func() { cancel(); wg.Wait() })
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			list, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
			if err != nil {
				continue // the next tick tries again; the test's own wait reports
			}
			for i := range list.Items {
				d := &list.Items[i]
				if d.Status.ObservedGeneration == d.Generation && len(d.Status.Conditions) > 0 {
					continue
				}
				replicas := int32(1)
				if d.Spec.Replicas != nil {
					replicas = *d.Spec.Replicas
				}
				now := metav1.Now()
				d.Status = appsv1.DeploymentStatus{
					ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas,
					ReadyReplicas: replicas, AvailableReplicas: replicas,
					Conditions: []appsv1.DeploymentCondition{{
						Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
						Message: "marked available by kubetest (no kubelet runs)", LastUpdateTime: now, LastTransitionTime: now,
					}},
				}
				_, err := cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{FieldManager: "kubetest-deployment-controller"})
				if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					t.Logf("kubetest: marking deployment %s/%s available: %v", d.Namespace, d.Name, err)
				}
			}
		}
	}()
}
