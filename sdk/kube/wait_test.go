package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestWaitFor(t *testing.T) {
	errNotYet := errors.New("2 of 3 replicas ready")
	errBroken := errors.New("forbidden")
	tests := []struct {
		name       string
		timeout    time.Duration
		results    []error // per check: nil = done, errNotYet = not yet, errBroken = done with error
		wantChecks int
		wantIs     []error
		wantMsg    []string
	}{
		{name: "ready at once", timeout: time.Second, results: []error{nil}, wantChecks: 1},
		{name: "ready on the third check", timeout: 5 * time.Second, results: []error{errNotYet, errNotYet, nil}, wantChecks: 3},
		{
			name: "failure for good stops at once", timeout: 5 * time.Second,
			results: []error{errNotYet, errBroken}, wantChecks: 2,
			wantIs: []error{errBroken}, wantMsg: []string{"waiting for the thing: forbidden"},
		},
		{
			name: "timeout carries the last reason", timeout: 300 * time.Millisecond,
			results: []error{errNotYet}, wantIs: []error{context.DeadlineExceeded, errNotYet},
			wantMsg: []string{"timed out after", "waiting for the thing", "last error: 2 of 3 replicas ready"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tt.timeout)
			defer cancel()
			checks := 0
			err := WaitFor(ctx, "the thing", 20*time.Millisecond, func(context.Context) (bool, error) {
				r := tt.results[min(checks, len(tt.results)-1)]
				checks++
				switch r {
				case nil:
					return true, nil
				case errBroken:
					return true, r
				default:
					return false, r
				}
			})
			if tt.wantChecks > 0 && checks != tt.wantChecks {
				t.Errorf("checks = %d, want %d", checks, tt.wantChecks)
			}
			if len(tt.wantIs) == 0 && len(tt.wantMsg) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(%v, %v) = false", err, target)
				}
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestWaitForBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var at []time.Time
	err := WaitFor(ctx, "x", 40*time.Millisecond, func(context.Context) (bool, error) {
		at = append(at, time.Now())
		return len(at) == 7, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Delays: 40, 60, 90, 135, 160 (capped at 4x), 160 ms.
	want := []time.Duration{40, 60, 90, 135, 160, 160}
	for i, w := range want {
		got := at[i+1].Sub(at[i])
		if w *= time.Millisecond; got < w || got > w+150*time.Millisecond {
			t.Errorf("delay %d = %v, want about %v", i+1, got, w)
		}
	}
}

func TestWaitForCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	checks := 0
	err := WaitFor(ctx, "the thing", 10*time.Millisecond, func(context.Context) (bool, error) {
		checks++
		if checks == 2 {
			cancel()
		}
		return false, nil
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "cancelled after") || !strings.Contains(err.Error(), "the last found it not ready") {
		t.Errorf("err = %v", err)
	}
}

func TestWaitForBoundsContextWithoutDeadline(t *testing.T) {
	var deadline time.Time
	err := WaitFor(context.Background(), "x", time.Millisecond, func(ctx context.Context) (bool, error) {
		var ok bool
		deadline, ok = ctx.Deadline()
		return true, map[bool]error{false: errors.New("no deadline")}[ok]
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(deadline); left < DefaultTimeout-time.Minute || left > DefaultTimeout {
		t.Errorf("deadline in %v, want about %v", left, DefaultTimeout)
	}
	if err := WaitFor(context.Background(), "x", 0, nil); err == nil || !strings.Contains(err.Error(), "interval must be positive") {
		t.Errorf("zero interval: %v", err)
	}
}

func TestDeploymentNotAvailable(t *testing.T) {
	cond := func(s corev1.ConditionStatus) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue},
			{Type: appsv1.DeploymentAvailable, Status: s, Reason: "MinimumReplicasUnavailable", Message: "Deployment does not have minimum availability."},
		}
	}
	tests := []struct {
		name    string
		gen     int64
		status  appsv1.DeploymentStatus
		wantErr string // "" = available
	}{
		{name: "available", gen: 2, status: appsv1.DeploymentStatus{ObservedGeneration: 2, AvailableReplicas: 1, Conditions: cond(corev1.ConditionTrue)}},
		{name: "new spec not observed", gen: 3, status: appsv1.DeploymentStatus{ObservedGeneration: 2, Conditions: cond(corev1.ConditionTrue)}, wantErr: "generation 3 not yet observed"},
		{name: "unavailable", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: cond(corev1.ConditionFalse)}, wantErr: "0 of 2 replicas available (Available=False: MinimumReplicasUnavailable"},
		{name: "no condition yet", gen: 1, status: appsv1.DeploymentStatus{ObservedGeneration: 1}, wantErr: "no Available condition yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: tt.gen},
				Spec:       appsv1.DeploymentSpec{Replicas: ptr(int32(2))},
				Status:     tt.status,
			}
			err := deploymentNotAvailable(d)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("err = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// DeploymentAvailable's reading of the API: a missing Deployment is
// "not yet", a forbidden read is final. (The Available logic is
// TestDeploymentNotAvailable; tier 3 runs it against a real API server.)
func TestDeploymentAvailableAPIErrors(t *testing.T) {
	cs := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	done, err := DeploymentAvailable(cs, "ns", "web")(context.Background())
	if done || err == nil || !strings.Contains(err.Error(), "deployment ns/web does not exist yet") {
		t.Errorf("missing: done=%v err=%v", done, err)
	}
	cs.PrependReactor("get", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("RBAC"))
	})
	done, err = DeploymentAvailable(cs, "ns", "web")(context.Background())
	if !done || !apierrors.IsForbidden(err) {
		t.Errorf("forbidden: done=%v err=%v", done, err)
	}
}

func TestCRDState(t *testing.T) {
	crd := func(conds ...map[string]any) *unstructured.Unstructured {
		var cs []any
		for _, c := range conds {
			cs = append(cs, c)
		}
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": "pools.example.com"},
			"status":   map[string]any{"conditions": cs},
		}}
	}
	tests := []struct {
		name     string
		obj      *unstructured.Unstructured
		wantDone bool
		wantErr  string
	}{
		{name: "established", obj: crd(map[string]any{"type": "NamesAccepted", "status": "True"}, map[string]any{"type": "Established", "status": "True"}), wantDone: true},
		{name: "no status yet", obj: crd(), wantErr: "is not Established yet"},
		{name: "names conflict", obj: crd(map[string]any{"type": "NamesAccepted", "status": "False", "reason": "ListKindConflict", "message": "PoolList is already in use"}), wantDone: true, wantErr: "names were not accepted (ListKindConflict: PoolList is already in use)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, err := crdState(tt.obj)
			if done != tt.wantDone {
				t.Errorf("done = %v", done)
			}
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestIsWebhookUnavailable(t *testing.T) {
	calling := apierrors.NewInternalError(errors.New(`failed calling webhook "ipaddresspoolvalidationwebhook.metallb.io": failed to call webhook: Post "https://metallb-webhook-service.metallb-system.svc:443/validate?timeout=10s": dial tcp 10.96.0.12:443: connect: connection refused`))
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{name: "nil", err: nil},
		{name: "plain error", err: errors.New("failed calling webhook")},
		{name: "webhook unreachable", err: calling, want: true},
		{name: "wrapped", err: fmt.Errorf("kube: applying IPAddressPool x/y: %w", calling), want: true},
		{name: "no endpoints", err: apierrors.NewInternalError(errors.New(`failed calling webhook "w": failed to call webhook: service "metallb-webhook-service" not found`)), want: true},
		{name: "conversion webhook", err: &apierrors.StatusError{ErrStatus: metav1.Status{Code: 500, Message: `conversion webhook for metallb.io/v1beta2, Kind=BGPPeer failed: Post "https://...": EOF`}}, want: true},
		{name: "denied by the webhook", err: apierrors.NewForbidden(schema.GroupResource{Group: "metallb.io", Resource: "ipaddresspools"}, "p", errors.New(`admission webhook "ipaddresspoolvalidationwebhook.metallb.io" denied the request: overlapping CIDRs`))},
		{name: "bad webhook config (400)", err: apierrors.NewBadRequest(`failed calling webhook "w": Webhook SideEffects is nil`)},
		{name: "unrelated 503", err: apierrors.NewServiceUnavailable("etcd is down")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsWebhookUnavailable(tt.err); got != tt.want {
				t.Errorf("IsWebhookUnavailable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestConnectErrors(t *testing.T) {
	tests := []struct {
		name, kubeconfig, want string
	}{
		{name: "empty", kubeconfig: "", want: "the kubeconfig is empty"},
		{name: "not a kubeconfig", kubeconfig: "clusters: 3\n", want: "reading the kubeconfig"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Connect([]byte(tt.kubeconfig))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
	c, err := Connect([]byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.Host != "https://127.0.0.1:1" || c.Config.QPS != defaultQPS || c.Config.Burst != defaultBurst || c.Mapper == nil {
		t.Errorf("client = %+v", c.Config)
	}
}
