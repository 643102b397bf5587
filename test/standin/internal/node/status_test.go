package node

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bcollard/marina/test/standin/internal/spec"
)

func ptr[T any](v T) *T { return &v }

// TestDeploymentStatus checks the rules `kubectl rollout status` (and
// marina's coredns plugin) apply to the status the loop writes.
func TestDeploymentStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 3}, Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(3))}}
	st, changed := deploymentStatus(d, now)
	if !changed {
		t.Fatal("a new Deployment's status is not changed")
	}
	if st.ObservedGeneration != 3 || st.Replicas != 3 || st.UpdatedReplicas != 3 || st.ReadyReplicas != 3 || st.AvailableReplicas != 3 || st.UnavailableReplicas != 0 {
		t.Errorf("status %+v, want 3 of everything at generation 3", st)
	}
	avail := deploymentCondition(st.Conditions, appsv1.DeploymentAvailable)
	prog := deploymentCondition(st.Conditions, appsv1.DeploymentProgressing)
	if avail == nil || avail.Status != corev1.ConditionTrue || prog == nil || prog.Reason != "NewReplicaSetAvailable" {
		t.Errorf("conditions %+v, want Available=True and Progressing=True/NewReplicaSetAvailable", st.Conditions)
	}

	// Converged: nothing to write.
	d.Status = st
	if _, changed := deploymentStatus(d, metav1.NewTime(now.Add(time.Minute))); changed {
		t.Error("a converged Deployment's status changed")
	}

	// A restart (new generation) and a scale to the default of 1 are
	// observed; the Available transition time stays.
	d.Generation, d.Spec.Replicas = 4, nil
	later := metav1.NewTime(now.Add(time.Hour))
	st2, changed := deploymentStatus(d, later)
	if !changed || st2.ObservedGeneration != 4 || st2.AvailableReplicas != 1 {
		t.Errorf("after restart and scale: changed %v status %+v", changed, st2)
	}
	if c := deploymentCondition(st2.Conditions, appsv1.DeploymentAvailable); !c.LastTransitionTime.Equal(&now) || !c.LastUpdateTime.Equal(&later) {
		t.Errorf("Available times %v/%v, want transition %v and update %v", c.LastTransitionTime, c.LastUpdateTime, now, later)
	}
}

func TestStatefulSetStatus(t *testing.T) {
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Generation: 2}, Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(2))}}
	st, changed := statefulSetStatus(s)
	if !changed || st.ReadyReplicas != 2 || st.ObservedGeneration != 2 || st.CurrentRevision == "" || st.CurrentRevision != st.UpdateRevision {
		t.Fatalf("status %+v changed %v", st, changed)
	}
	s.Status = st
	if _, changed := statefulSetStatus(s); changed {
		t.Error("a converged StatefulSet's status changed")
	}
	s.Spec.Template.Labels = map[string]string{"v": "2"}
	if st2, changed := statefulSetStatus(s); !changed || st2.UpdateRevision == st.UpdateRevision {
		t.Errorf("a new template kept revision %s (changed %v)", st2.UpdateRevision, changed)
	}
}

// TestDaemonSetStatus checks which nodes a DaemonSet counts: those its
// nodeSelector matches and whose NoSchedule/NoExecute taints it tolerates.
func TestDaemonSetStatus(t *testing.T) {
	cp := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{"kubernetes.io/os": "linux"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}}}
	w1 := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1", Labels: map[string]string{"kubernetes.io/os": "linux", "tier": "web"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}}}
	w2 := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w2", Labels: map[string]string{"kubernetes.io/os": "linux"}}}
	// Daemon pods tolerate a cordoned node (the controller adds that).
	w3 := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w3"},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}}}
	nodes := []corev1.Node{cp, w1, w2, w3}
	tests := []struct {
		name string
		spec corev1.PodSpec
		want int32
	}{
		{"plain", corev1.PodSpec{}, 3},
		{"tolerates the control plane", corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}}, 4},
		{"tolerates everything", corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}, 4},
		{"nodeSelector", corev1.PodSpec{NodeSelector: map[string]string{"tier": "web"}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Generation: 5}}
			ds.Spec.Template.Spec = tt.spec
			st, changed := daemonSetStatus(ds, nodes)
			if !changed || st.DesiredNumberScheduled != tt.want || st.NumberAvailable != tt.want || st.UpdatedNumberScheduled != tt.want || st.ObservedGeneration != 5 {
				t.Fatalf("status %+v changed %v, want %d everywhere", st, changed, tt.want)
			}
			ds.Status = st
			if _, changed := daemonSetStatus(ds, nodes); changed {
				t.Error("a converged DaemonSet's status changed")
			}
		})
	}
}

func TestNodeObject(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := nodeObject(spec.Node{Name: "dev-worker", Role: spec.RoleWorker, Labels: map[string]string{"a": "b"}, ProviderID: "kind://docker/dev/dev-worker"}, "v1.37.2", "172.18.0.3", now)
	if n.Name != "dev-worker" || n.Labels["a"] != "b" || n.Spec.ProviderID != "kind://docker/dev/dev-worker" {
		t.Errorf("meta/spec: %+v", n)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready || n.Status.NodeInfo.KubeletVersion != "v1.37.2" {
		t.Errorf("status: ready %v, kubelet %q", ready, n.Status.NodeInfo.KubeletVersion)
	}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.18.0.3"}) {
		t.Errorf("addresses %+v", n.Status.Addresses)
	}
	if none := nodeObject(spec.Node{Name: "x"}, "v1", "", now); len(none.Status.Addresses) != 1 {
		t.Errorf("without an address: %+v", none.Status.Addresses)
	}
}
