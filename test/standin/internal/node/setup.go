package node

import (
	"context"
	"fmt"
	"log"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/bcollard/marina/test/standin/internal/addon"
	"github.com/bcollard/marina/test/standin/internal/pki"
	"github.com/bcollard/marina/test/standin/internal/spec"
)

// resolveTimeout bounds the lookup of one node's address on the Docker
// network.
const resolveTimeout = 30 * time.Second

// setup creates what kubeadm init (and join, and kind) would have created
// that marina relies on. Every step tolerates objects that exist already
// (the node restarted), and retries transient errors until ctx ends.
func setup(ctx context.Context, cs kubernetes.Interface, s *spec.Spec, logger *log.Logger) error {
	// kubeadm's admin.conf user is in group kubeadm:cluster-admins, which
	// kubeadm binds to cluster-admin (kubeadm v1.29 and later).
	if err := ensure(ctx, "ClusterRoleBinding "+pki.AdminGroup, func(ctx context.Context) error {
		_, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, pki.AdminGroup, metav1.GetOptions{})
		return err
	}, func(ctx context.Context) error {
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: pki.AdminGroup},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: pki.AdminGroup}},
		}, metav1.CreateOptions{})
		return err
	}); err != nil {
		return err
	}

	dns, err := addon.CoreDNSAddon(s.DNSDomain, s.ServiceSubnet)
	if err != nil {
		return err
	}
	const ns = metav1.NamespaceSystem
	for _, step := range []struct {
		what        string
		get, create func(context.Context) error
	}{
		{"ServiceAccount kube-system/coredns", func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, dns.ServiceAccount.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, dns.ServiceAccount, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRole system:coredns", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoles().Get(ctx, dns.ClusterRole.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoles().Create(ctx, dns.ClusterRole, metav1.CreateOptions{})
			return err
		}},
		{"ClusterRoleBinding system:coredns", func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, dns.ClusterRoleBinding.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, dns.ClusterRoleBinding, metav1.CreateOptions{})
			return err
		}},
		{"ConfigMap kube-system/coredns", func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, dns.ConfigMap.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, dns.ConfigMap, metav1.CreateOptions{})
			return err
		}},
		{"Deployment kube-system/coredns", func(ctx context.Context) error {
			_, err := cs.AppsV1().Deployments(ns).Get(ctx, dns.Deployment.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.AppsV1().Deployments(ns).Create(ctx, dns.Deployment, metav1.CreateOptions{})
			return err
		}},
		{"Service kube-system/kube-dns", func(ctx context.Context) error {
			_, err := cs.CoreV1().Services(ns).Get(ctx, dns.Service.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := cs.CoreV1().Services(ns).Create(ctx, dns.Service, metav1.CreateOptions{})
			return err
		}},
	} {
		if err := ensure(ctx, step.what, step.get, step.create); err != nil {
			return err
		}
	}
	logger.Printf("[addons] Applied essential addon: CoreDNS (its pods never run)")

	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("API server version: %w", err)
	}
	for _, n := range s.Nodes {
		node := nodeObject(n, v.GitVersion, lookupAddress(ctx, n.Name, logger), time.Now())
		if err := ensure(ctx, "Node "+n.Name, func(ctx context.Context) error {
			_, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return err
		}, func(ctx context.Context) error {
			created, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if len(created.Status.Conditions) == 0 {
				created.Status = node.Status
				_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
			}
			return err
		}); err != nil {
			return err
		}
		if err := untaintReady(ctx, cs, n.Name); err != nil {
			return err
		}
	}
	logger.Printf("%d Node objects exist (kubelet version %s)", len(s.Nodes), v.GitVersion)
	return nil
}

// ensure creates an object unless get finds it (kubeadm's create-or-keep:
// a restarted node finds its objects in etcd), retrying other errors every
// 250 ms until ctx ends; an invalid object fails at once.
func ensure(ctx context.Context, what string, get, create func(context.Context) error) error {
	for {
		err := get(ctx)
		if err == nil {
			return nil
		}
		if apierrors.IsNotFound(err) {
			err = create(ctx)
			switch {
			case err == nil, apierrors.IsAlreadyExists(err):
				return nil
			case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
				return fmt.Errorf("create %s: %w", what, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create %s: %w (last error: %v)", what, context.Cause(ctx), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lookupAddress resolves a node's name on the Docker network (Docker's
// embedded DNS); "" when it does not resolve in time.
func lookupAddress(ctx context.Context, name string, logger *log.Logger) string {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	var last error
	for {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, name)
		for _, a := range addrs {
			if a.IP.To4() != nil {
				return a.IP.String()
			}
		}
		if err == nil {
			err = fmt.Errorf("no IPv4 address")
		}
		last = err
		select {
		case <-ctx.Done():
			logger.Printf("node %s: no address (%v); its Node has none", name, last)
			return ""
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// nodeObject is the Node a kubelet registers, as kubeadm and kind leave
// it: labels and taints from the spec, Ready, the API server's version as
// the kubelet's.
func nodeObject(n spec.Node, version, address string, now time.Time) *corev1.Node {
	t := metav1.NewTime(now)
	cond := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: msg, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:  *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourcePods: *resource.NewQuantity(110, resource.DecimalSI),
	}
	if mem := memTotal(); mem > 0 {
		capacity[corev1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels},
		Spec:       corev1.NodeSpec{Taints: n.Taints, ProviderID: n.ProviderID},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "marina stand-in: reported ready, but no kubelet runs here and pods never start"),
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion:          version,
				OperatingSystem:         "linux",
				Architecture:            runtime.GOARCH,
				OSImage:                 "marina kind stand-in (no kubelet, no container runtime)",
				ContainerRuntimeVersion: "none://marina-standin",
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: n.Name}},
		},
	}
	if address != "" {
		node.Status.Addresses = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: address}}, node.Status.Addresses...)
	}
	return node
}

// memTotal is the machine's memory in bytes (0 when unknown).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// untaintReady removes the node.kubernetes.io/not-ready taint the API
// server's admission puts on a new Node, as the node lifecycle controller
// does once the Node reports Ready.
func untaintReady(ctx context.Context, cs kubernetes.Interface, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(n.Spec.Taints), func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeNotReady })
		if len(kept) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = kept
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove the %s taint of Node %s: %w", corev1.TaintNodeNotReady, name, err)
	}
	return nil
}
