package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// statusLoop converges workload status every statusInterval until ctx
// ends. Errors are logged when they change, never fatal: the API server may
// be busy, and the next round retries.
func statusLoop(ctx context.Context, cs kubernetes.Interface, logger *log.Logger) {
	tick := time.NewTicker(statusInterval)
	defer tick.Stop()
	last := ""
	for {
		err := converge(ctx, cs, time.Now())
		if ctx.Err() != nil {
			return
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if msg != last && msg != "" {
			logger.Printf("status loop: %v", err)
		}
		last = msg
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// converge does one round of the status loop.
func converge(ctx context.Context, cs kubernetes.Interface, now time.Time) error {
	var errs []error
	t := metav1.NewTime(now)

	deps, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("list Deployments: %w", err))
	} else {
		for i := range deps.Items {
			d := &deps.Items[i]
			if st, changed := deploymentStatus(d, t); changed {
				d.Status = st
				if _, err := cs.AppsV1().Deployments(d.Namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{}); ignoreRace(err) != nil {
					errs = append(errs, fmt.Errorf("status of Deployment %s/%s: %w", d.Namespace, d.Name, err))
				}
			}
		}
	}

	sets, err := cs.AppsV1().StatefulSets("").List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("list StatefulSets: %w", err))
	} else {
		for i := range sets.Items {
			s := &sets.Items[i]
			if st, changed := statefulSetStatus(s); changed {
				s.Status = st
				if _, err := cs.AppsV1().StatefulSets(s.Namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{}); ignoreRace(err) != nil {
					errs = append(errs, fmt.Errorf("status of StatefulSet %s/%s: %w", s.Namespace, s.Name, err))
				}
			}
		}
	}

	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		errs = append(errs, fmt.Errorf("list Nodes: %w", err))
	} else {
		dss, err := cs.AppsV1().DaemonSets("").List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("list DaemonSets: %w", err))
			dss = &appsv1.DaemonSetList{}
		}
		for i := range dss.Items {
			ds := &dss.Items[i]
			if st, changed := daemonSetStatus(ds, nodes.Items); changed {
				ds.Status = st
				if _, err := cs.AppsV1().DaemonSets(ds.Namespace).UpdateStatus(ctx, ds, metav1.UpdateOptions{}); ignoreRace(err) != nil {
					errs = append(errs, fmt.Errorf("status of DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err))
				}
			}
		}
	}

	if err := ensureDefaultServiceAccounts(ctx, cs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ignoreRace drops the errors of an object that changed or went away
// between the list and the update: the next round sees the new one.
func ignoreRace(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// replicas is spec.replicas, defaulting to 1 as the API server does.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// deploymentStatus is the status the Deployment controller would report
// once all of d's pods run its current template: every desired replica
// updated, ready and available, Available and Progressing true. changed is
// false when d already says so.
func deploymentStatus(d *appsv1.Deployment, now metav1.Time) (appsv1.DeploymentStatus, bool) {
	want := replicas(d.Spec.Replicas)
	s := *d.Status.DeepCopy()
	available := deploymentCondition(s.Conditions, appsv1.DeploymentAvailable)
	progressing := deploymentCondition(s.Conditions, appsv1.DeploymentProgressing)
	if s.ObservedGeneration == d.Generation && s.Replicas == want && s.UpdatedReplicas == want &&
		s.ReadyReplicas == want && s.AvailableReplicas == want && s.UnavailableReplicas == 0 &&
		available != nil && available.Status == corev1.ConditionTrue &&
		progressing != nil && progressing.Status == corev1.ConditionTrue && progressing.Reason == "NewReplicaSetAvailable" {
		return s, false
	}
	s.ObservedGeneration = d.Generation
	s.Replicas, s.UpdatedReplicas, s.ReadyReplicas, s.AvailableReplicas = want, want, want, want
	s.UnavailableReplicas = 0
	s.TerminatingReplicas = nil
	s.Conditions = setDeploymentCondition(s.Conditions, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
		Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.",
	}, now)
	s.Conditions = setDeploymentCondition(s.Conditions, appsv1.DeploymentCondition{
		Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue,
		Reason:  "NewReplicaSetAvailable",
		Message: fmt.Sprintf("marina stand-in: reported as rolled out; no ReplicaSet or Pod of %q exists", d.Name),
	}, now)
	return s, true
}

func deploymentCondition(cs []appsv1.DeploymentCondition, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// setDeploymentCondition sets c in cs, keeping the transition time when the
// status does not change (as the controller does).
func setDeploymentCondition(cs []appsv1.DeploymentCondition, c appsv1.DeploymentCondition, now metav1.Time) []appsv1.DeploymentCondition {
	c.LastUpdateTime, c.LastTransitionTime = now, now
	if old := deploymentCondition(cs, c.Type); old != nil {
		if old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		}
		*old = c
		return cs
	}
	return append(cs, c)
}

// statefulSetStatus is the status the StatefulSet controller would report
// once all of s's pods run its current template.
func statefulSetStatus(s *appsv1.StatefulSet) (appsv1.StatefulSetStatus, bool) {
	want := replicas(s.Spec.Replicas)
	rev := s.Name + "-" + templateHash(s.Spec.Template)
	st := *s.Status.DeepCopy()
	if st.ObservedGeneration == s.Generation && st.Replicas == want && st.ReadyReplicas == want &&
		st.CurrentReplicas == want && st.UpdatedReplicas == want && st.AvailableReplicas == want &&
		st.CurrentRevision == rev && st.UpdateRevision == rev {
		return st, false
	}
	st.ObservedGeneration = s.Generation
	st.Replicas, st.ReadyReplicas, st.CurrentReplicas, st.UpdatedReplicas, st.AvailableReplicas = want, want, want, want, want
	st.CurrentRevision, st.UpdateRevision = rev, rev
	return st, true
}

// daemonSetStatus is the status the DaemonSet controller would report once
// a pod of ds runs on every node it schedules to (nodes matching its
// nodeSelector whose NoSchedule and NoExecute taints it tolerates).
func daemonSetStatus(ds *appsv1.DaemonSet, nodes []corev1.Node) (appsv1.DaemonSetStatus, bool) {
	var want int32
	for i := range nodes {
		if schedules(&ds.Spec.Template.Spec, &nodes[i]) {
			want++
		}
	}
	st := *ds.Status.DeepCopy()
	if st.ObservedGeneration == ds.Generation && st.DesiredNumberScheduled == want && st.CurrentNumberScheduled == want &&
		st.NumberReady == want && st.UpdatedNumberScheduled == want && st.NumberAvailable == want &&
		st.NumberMisscheduled == 0 && st.NumberUnavailable == 0 {
		return st, false
	}
	st.ObservedGeneration = ds.Generation
	st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.UpdatedNumberScheduled, st.NumberAvailable = want, want, want, want, want
	st.NumberMisscheduled, st.NumberUnavailable = 0, 0
	return st, true
}

// daemonTolerations are the tolerations the DaemonSet controller adds to
// every daemon pod (k8s.io/kubernetes pkg/controller/daemon/util
// AddOrUpdateDaemonPodTolerations).
var daemonTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// schedules reports whether a DaemonSet pod with spec p would run on n.
func schedules(p *corev1.PodSpec, n *corev1.Node) bool {
	for k, v := range p.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	tolerations := append(slices.Clone(p.Tolerations), daemonTolerations...)
	if p.HostNetwork {
		tolerations = append(tolerations, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	for i := range n.Spec.Taints {
		taint := &n.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// templateHash names a pod template's revision.
func templateHash(t corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5])
}

// ensureDefaultServiceAccounts creates the "default" ServiceAccount of every
// namespace that has none and is not being deleted (the controller-manager's
// serviceaccount controller).
func ensureDefaultServiceAccounts(ctx context.Context, cs kubernetes.Interface) error {
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Namespaces: %w", err)
	}
	sas, err := cs.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=default"})
	if err != nil {
		return fmt.Errorf("list ServiceAccounts: %w", err)
	}
	have := map[string]bool{}
	for _, sa := range sas.Items {
		have[sa.Namespace] = true
	}
	var errs []error
	for _, ns := range nss.Items {
		if have[ns.Name] || ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating {
			continue
		}
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
			errs = append(errs, fmt.Errorf("ServiceAccount %s/default: %w", ns.Name, err))
		}
	}
	return errors.Join(errs...)
}
