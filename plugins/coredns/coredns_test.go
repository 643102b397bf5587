package coredns

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/bcollard/marina/plugins/coredns/corefile"
	"github.com/bcollard/marina/sdk"
	"github.com/bcollard/marina/sdk/plugintest"
)

// TestDescribe checks what marina learns from the plugin over the real
// protocol (in-process gRPC): identity, hook, dependency, capability, config.
func TestDescribe(t *testing.T) {
	h := plugintest.New(t, New())
	d := h.Describe()
	if d.Name != "coredns" || d.Version != Version {
		t.Errorf("name/version = %s %s", d.Name, d.Version)
	}
	if !d.Has(sdk.PostCluster) || len(d.Hooks) != 1 {
		t.Errorf("hooks = %v, want [PostCluster]", d.Hooks)
	}
	if want := []sdk.Dependency{{Name: "localdns", Optional: true}}; !slices.Equal(d.Dependencies, want) {
		t.Errorf("dependencies = %+v, want %+v", d.Dependencies, want)
	}
	if !slices.Equal(d.Capabilities, []string{sdk.CapKubeconfig}) {
		t.Errorf("capabilities = %v", d.Capabilities)
	}
	if got := string(d.ConfigDefaults); got != `{"cache":30,"rolloutTimeout":"2m0s"}` {
		t.Errorf("config defaults = %s", got)
	}
}

func TestConfigValidation(t *testing.T) {
	h := plugintest.New(t, New())
	cases := []struct {
		config string
		path   string
		want   string
	}{
		{`{"cache": -1}`, "cache", "between 0"},
		{`{"cache": 100000}`, "cache", "between 0"},
		{`{"rolloutTimeout": "-5s"}`, "rolloutTimeout", "0 (do not wait)"},
		{`{"rolloutTimeout": "soon"}`, "rolloutTimeout", "duration"},
		{`{"cahce": 10}`, "cahce", `did you mean "cache"`},
	}
	for _, tc := range cases {
		ds := h.ValidateConfig(tc.config)
		if len(ds) != 1 || ds[0].Path != tc.path || !strings.Contains(ds[0].Summary, tc.want) {
			t.Errorf("ValidateConfig(%s) = %+v, want one error at %s containing %q", tc.config, ds, tc.path, tc.want)
		}
	}
	if ds := h.ValidateConfig(`{"cache": 0, "rolloutTimeout": "30s"}`); len(ds) != 0 {
		t.Errorf("valid config refused: %+v", ds)
	}
}

func TestForwards(t *testing.T) {
	base := plugintest.DefaultEnv("")
	cases := []struct {
		name string
		edit func(*sdk.Env)
		want []corefile.Forward
		err  string
	}{
		{"local zone only", func(*sdk.Env) {}, []corefile.Forward{{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}}}, ""},
		{"zone then custom domains in order", func(e *sdk.Env) {
			e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "b.example", Resolvers: []string{"1.1.1.1"}}, {Domain: "a.example", Resolvers: []string{"8.8.8.8", "8.8.4.4"}}}
		}, []corefile.Forward{
			{Zone: "demo.internal", Resolvers: []string{"172.30.255.53"}},
			{Zone: "b.example", Resolvers: []string{"1.1.1.1"}},
			{Zone: "a.example", Resolvers: []string{"8.8.8.8", "8.8.4.4"}},
		}, ""},
		{"no local zone", func(e *sdk.Env) { e.DNSZone, e.DNSServerIP = "", "" }, nil, ""},
		{"zone without server", func(e *sdk.Env) { e.DNSServerIP = "" }, nil, "dns.serverIP"},
		{"custom domain is the zone", func(e *sdk.Env) {
			e.CustomDNSResolvers = []sdk.DomainResolvers{{Domain: "Demo.Internal.", Resolvers: []string{"1.1.1.1"}}}
		}, nil, "kind.customDNSResolvers[0]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := base
			tc.edit(&env)
			got, err := Forwards(env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("forwards = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i].Zone != tc.want[i].Zone || !slices.Equal(got[i].Resolvers, tc.want[i].Resolvers) {
					t.Fatalf("forwards = %+v, want %+v", got, tc.want)
				}
			}
		})
	}
}

// rolloutCases are Deployment states as its controller reports them, with
// what `kubectl rollout status` makes of them. TestRolloutDone checks the
// rules on them; TestPostClusterAPIServer/WaitRollout stores each in a real
// API server and waits on it.
var rolloutCases = []struct {
	name   string
	gen    int64 // metadata.generation
	status appsv1.DeploymentStatus
	done   bool
	msg    string // the status WaitRollout reports while not done
}{
	{"controller has not seen it", 2, appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}, false, "has not seen"},
	{"pods not updated", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 2, AvailableReplicas: 2}, false, "1 of 2 pods updated"},
	{"old pods terminating", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}, false, "1 old pods"},
	{"not available", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}, false, "1 of 2 updated pods available"},
	{"done", 2, appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}, true, ""},
}

// TestRolloutDone checks kubectl's rollout rules on Deployment states
// (tier 0; WaitRollout against an API server is in TestPostClusterAPIServer).
func TestRolloutDone(t *testing.T) {
	for _, tc := range rolloutCases {
		t.Run(tc.name, func(t *testing.T) {
			d := kubeadmDeployment()
			d.Generation, d.Status = tc.gen, tc.status
			done, msg, err := rolloutDone(d)
			if err != nil || done != tc.done || !strings.Contains(msg, tc.msg) {
				t.Fatalf("rolloutDone = %v %q %v, want %v %q", done, msg, err, tc.done, tc.msg)
			}
		})
	}
	t.Run("progress deadline exceeded", func(t *testing.T) {
		d := kubeadmDeployment()
		d.Generation = 1
		d.Status = progressDeadlineExceeded()
		_, _, err := rolloutDone(d)
		if err == nil || !strings.Contains(err.Error(), "progress deadline") || !strings.Contains(err.Error(), "timed out progressing") {
			t.Fatalf("err = %v", err)
		}
	})
}

// progressDeadlineExceeded is the status the Deployment controller reports
// when a rollout stalls past spec.progressDeadlineSeconds.
func progressDeadlineExceeded() appsv1.DeploymentStatus {
	return appsv1.DeploymentStatus{
		ObservedGeneration: 1,
		Conditions: []appsv1.DeploymentCondition{{
			Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
			Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet coredns-abc has timed out progressing.",
		}},
	}
}
