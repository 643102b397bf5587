package addon

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// kubeadmCorefile is the Corefile of a kind v0.33 cluster of Kubernetes
// v1.37 (dnsDomain cluster.local), as `kubectl -n kube-system get cm coredns`
// shows it.
const kubeadmCorefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`

func TestCorefile(t *testing.T) {
	got, err := Corefile("cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if got != kubeadmCorefile {
		t.Errorf("Corefile:\n%s\nwant:\n%s", got, kubeadmCorefile)
	}
	other, err := Corefile("corp.internal")
	if err != nil || !strings.Contains(other, "kubernetes corp.internal in-addr.arpa") || !strings.Contains(other, "disable denial corp.internal") {
		t.Errorf("Corefile(corp.internal) = %q, %v", other, err)
	}
}

func TestCoreDNSAddon(t *testing.T) {
	o, err := CoreDNSAddon("cluster.local", "10.7.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	if o.ConfigMap.Namespace != "kube-system" || o.ConfigMap.Name != "coredns" || o.ConfigMap.Data["Corefile"] != kubeadmCorefile {
		t.Errorf("ConfigMap %s/%s Corefile %q", o.ConfigMap.Namespace, o.ConfigMap.Name, o.ConfigMap.Data["Corefile"])
	}
	d := o.Deployment
	if d.Name != "coredns" || d.Namespace != "kube-system" || d.Spec.Replicas == nil || *d.Spec.Replicas != CoreDNSReplicas ||
		d.Spec.Template.Spec.Containers[0].Image != CoreDNSImage || d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "coredns" {
		t.Errorf("Deployment: %+v", d)
	}
	if len(d.Spec.Template.Spec.Tolerations) != 2 || d.Spec.Template.Spec.Tolerations[1].Key != controlPlaneTaintKey {
		t.Errorf("Deployment tolerations %+v, want CriticalAddonsOnly and the control-plane taint", d.Spec.Template.Spec.Tolerations)
	}
	if o.Service.Spec.ClusterIP != "10.7.0.10" || o.Service.Name != "kube-dns" || o.Service.ResourceVersion != "" {
		t.Errorf("Service %s clusterIP %s resourceVersion %q", o.Service.Name, o.Service.Spec.ClusterIP, o.Service.ResourceVersion)
	}
	if o.ClusterRole.Name != "system:coredns" || o.ClusterRoleBinding.Subjects[0].Name != "coredns" || o.ServiceAccount.Name != "coredns" {
		t.Errorf("RBAC: %s %+v %s", o.ClusterRole.Name, o.ClusterRoleBinding.Subjects, o.ServiceAccount.Name)
	}
	if _, err := CoreDNSAddon("cluster.local", "10.7.0.0/29"); err == nil {
		t.Error("CoreDNSAddon accepted a service subnet without a 10th address")
	}
}

// TestManifestsAreKubeadms compares each manifest with the constant of the
// same name in kubeadm's source, in the k8s.io/kubernetes release
// test/tools builds the API server from (downloaded into the module cache
// from the Go module proxy if it is not there yet).
func TestManifestsAreKubeadms(t *testing.T) {
	src := kubeadmSource(t)
	for name, ours := range map[string]string{
		"CoreDNSService":            CoreDNSService,
		"CoreDNSDeployment":         CoreDNSDeployment,
		"CoreDNSConfigMap":          CoreDNSConfigMap,
		"CoreDNSClusterRole":        CoreDNSClusterRole,
		"CoreDNSClusterRoleBinding": CoreDNSClusterRoleBinding,
		"CoreDNSServiceAccount":     CoreDNSServiceAccount,
	} {
		m := regexp.MustCompile(`(?s)\t` + name + " = `(.*?)`").FindStringSubmatch(src)
		if m == nil {
			t.Errorf("kubeadm's manifests.go has no constant %s any more", name)
			continue
		}
		if m[1] != ours {
			t.Errorf("%s differs from kubeadm's; copy it again from kubeadm's manifests.go:\nkubeadm:\n%s\nours:\n%s", name, m[1], ours)
		}
	}
	if !strings.Contains(kubeadmConstants(t), `CoreDNSVersion = "`+strings.TrimPrefix(CoreDNSImage, "registry.k8s.io/coredns/coredns:")+`"`) {
		t.Errorf("CoreDNSImage %s is not kubeadm's CoreDNSVersion", CoreDNSImage)
	}
}

var kubernetesDir string

// kubernetesModule returns the directory of the k8s.io/kubernetes module
// test/tools requires.
func kubernetesModule(t *testing.T) string {
	t.Helper()
	if kubernetesDir != "" {
		return kubernetesDir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gomod := strings.TrimSpace(goCmd(t, ctx, ".", "env", "GOMOD"))
	tools := filepath.Join(filepath.Dir(gomod), "test", "tools")
	var m struct{ Version, Dir string }
	if err := json.Unmarshal([]byte(goCmd(t, ctx, tools, "list", "-m", "-json", "k8s.io/kubernetes")), &m); err != nil {
		t.Fatalf("go list -m k8s.io/kubernetes in %s: %v", tools, err)
	}
	if m.Dir == "" {
		t.Logf("k8s.io/kubernetes %s is not in the module cache; downloading it from the Go module proxy", m.Version)
		if err := json.Unmarshal([]byte(goCmd(t, ctx, tools, "mod", "download", "-json", "k8s.io/kubernetes@"+m.Version)), &m); err != nil || m.Dir == "" {
			t.Fatalf("go mod download k8s.io/kubernetes@%s: %v", m.Version, err)
		}
	}
	kubernetesDir = m.Dir
	return m.Dir
}

func kubeadmSource(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubernetesModule(t), "cmd", "kubeadm", "app", "phases", "addons", "dns", "manifests.go"))
	if err != nil {
		t.Fatalf("kubeadm's CoreDNS manifests: %v", err)
	}
	return string(b)
}

func kubeadmConstants(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kubernetesModule(t), "cmd", "kubeadm", "app", "constants", "constants.go"))
	if err != nil {
		t.Fatalf("kubeadm's constants: %v", err)
	}
	return string(b)
}

func goCmd(t *testing.T, ctx context.Context, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String()
}
