package coredns

import (
	"os"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bcollard/marina/sdk"
)

// customDomains is one custom domain, as kind.customDNSResolvers gives it;
// with the default local zone it is what corefile's golden files forward.
var customDomains = []sdk.DomainResolvers{{Domain: "example.dev", Resolvers: []string{"10.0.0.2", "10.0.0.3:5353"}}}

func withCustomDomains(env *sdk.Env) { env.CustomDNSResolvers = customDomains }

// testdata reads a Corefile of package corefile's test data
// (in/<name> or golden/<name>).
func testdata(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("corefile", "testdata", filepath.FromSlash(path)+".Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kubeadmConfigMap is the ConfigMap kubeadm (so kind) creates for CoreDNS.
func kubeadmConfigMap(corefileText string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: ConfigMap, Namespace: Namespace},
		Data:       map[string]string{CorefileKey: corefileText},
	}
}

// kubeadmDeployment is the CoreDNS Deployment as kubeadm creates it
// (trimmed of what the API server does not need to accept it).
func kubeadmDeployment() *appsv1.Deployment {
	labels := map[string]string{"k8s-app": "kube-dns"}
	replicas := int32(2)
	maxUnavailable := intstr.FromInt32(1)
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: Deployment, Namespace: Namespace, Labels: labels,
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type:          appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &maxUnavailable},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: "coredns",
					NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           "registry.k8s.io/coredns/coredns:v1.12.1",
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Ports: []corev1.ContainerPort{
							{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP},
							{Name: "dns-tcp", ContainerPort: 53, Protocol: corev1.ProtocolTCP},
							{Name: "metrics", ContainerPort: 9153, Protocol: corev1.ProtocolTCP},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
					}},
					DNSPolicy: corev1.DNSDefault,
					Volumes: []corev1.Volume{{
						Name: "config-volume",
						VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMap},
							Items:                []corev1.KeyToPath{{Key: CorefileKey, Path: CorefileKey}},
						}},
					}},
				},
			},
		},
	}
}
