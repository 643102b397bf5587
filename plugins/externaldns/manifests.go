package externaldns

import (
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// Names of the objects the plugin applies.
const (
	// Namespace holds ExternalDNS's ServiceAccount and Deployment.
	Namespace = "external-dns"
	// AppName names the ServiceAccount, Deployment, ClusterRole and binding.
	AppName = "external-dns"
	// FieldManager is the server-side apply field manager of every object.
	FieldManager = "marina-externaldns"
	// DefaultImage is the pinned ExternalDNS image, used when the host
	// passes no "externalDNS" entry in Env.Images.
	DefaultImage = "registry.k8s.io/external-dns/external-dns:v0.23.0"
	// ImageKey is the Env.Images key that overrides DefaultImage.
	ImageKey = "externalDNS"
	// EtcdPrefix is where the coredns provider keeps records (its
	// --coredns-prefix default, pkg/apis/externaldns/types.go) and the
	// path marina's CoreDNS serves the zone from.
	EtcdPrefix = "/skydns/"
	// HostnameAnnotation is ExternalDNS's standard annotation naming the DNS
	// names of a Service or Ingress (source/annotations/annotations.go).
	HostnameAnnotation = "external-dns.alpha.kubernetes.io/hostname"
	// metricsPort serves /healthz (controller/execute.go) and metrics.
	metricsPort = 7979
	// nonRootID is the distroless "nonroot" user the upstream chart runs as.
	nonRootID = 65532
)

// podLabels select ExternalDNS's pods.
var podLabels = map[string]string{"app.kubernetes.io/name": AppName}

// params is everything the rendered objects depend on.
type params struct {
	Cluster      string
	Zone         string
	EtcdEndpoint string
	Image        string
	Config       Config
}

// objects are the objects PostCluster applies, in apply order, as
// k8s.io/api's types. What is applied is each object's JSON without the
// empty values those types carry where a field is not set (applyObject):
// server-side apply then owns only the fields set here, as with client-go's
// apply configurations (which are not used: their package imports
// client-go's discovery, and with it the scheme of every API group, whose
// init every marina command would pay).
type objects struct {
	Namespace          *corev1.Namespace
	ServiceAccount     *corev1.ServiceAccount
	ClusterRole        *rbacv1.ClusterRole
	ClusterRoleBinding *rbacv1.ClusterRoleBinding
	Deployment         *appsv1.Deployment
}

// list returns the objects in apply order, named by kind (for golden files
// and messages), with where they are applied.
func (o *objects) list() []namedObject {
	core := func(r string) schema.GroupVersionResource { return corev1.SchemeGroupVersion.WithResource(r) }
	rbac := func(r string) schema.GroupVersionResource { return rbacv1.SchemeGroupVersion.WithResource(r) }
	return []namedObject{
		{"Namespace", core("namespaces"), o.Namespace},
		{"ServiceAccount", core("serviceaccounts"), o.ServiceAccount},
		{"ClusterRole", rbac("clusterroles"), o.ClusterRole},
		{"ClusterRoleBinding", rbac("clusterrolebindings"), o.ClusterRoleBinding},
		{"Deployment", appsv1.SchemeGroupVersion.WithResource("deployments"), o.Deployment},
	}
}

type namedObject struct {
	Kind     string
	Resource schema.GroupVersionResource
	Object   any
}

// applyObject is n's object as server-side apply is given it: apiVersion
// and kind set, and without the nulls and empty objects that k8s.io/api's
// types marshal for fields left unset (metadata.creationTimestamp: null,
// status: {}, ...). None of the objects sets an empty object on purpose.
func (n namedObject) applyObject() (*unstructured.Unstructured, error) {
	b, err := json.Marshal(n.Object)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", n.Kind, err)
	}
	var m map[string]any
	if err := utiljson.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", n.Kind, err)
	}
	pruneEmpty(m)
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(n.Resource.GroupVersion().String())
	u.SetKind(n.Kind)
	return u, nil
}

// pruneEmpty removes, depth first, the null values and the objects left
// empty from m and the objects nested in it (also inside lists).
func pruneEmpty(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			if pruneEmpty(v); len(v) == 0 {
				delete(m, k)
			}
		case []any:
			for _, e := range v {
				if e, ok := e.(map[string]any); ok {
					pruneEmpty(e)
				}
			}
		}
	}
}

// labels are put on every object.
func commonLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":       AppName,
		"app.kubernetes.io/managed-by": "marina",
	}
}

// fqdnTemplate is ExternalDNS's --fqdn-template for a Service or Ingress
// without a hostname annotation: <name>.<namespace>.<cluster>.<zone>. The
// template is executed against the object (source/template/engine.go), so
// .Name and .Namespace are its metadata.
func fqdnTemplate(cluster, zone string) string {
	return "{{.Name}}.{{.Namespace}}." + defaultDomain(cluster, zone)
}

// defaultDomain is the domain default names are made under.
func defaultDomain(cluster, zone string) string {
	return cluster + "." + zone
}

// args are ExternalDNS's command-line flags (pkg/apis/externaldns/types.go).
func args(p params) []string {
	c := p.Config
	a := []string{"--provider=coredns"}
	for _, s := range c.Sources {
		a = append(a, "--source="+s)
	}
	if slices.Contains(c.Sources, "service") {
		for _, t := range c.ServiceTypes {
			a = append(a, "--service-type-filter="+t)
		}
	}
	a = append(a,
		"--domain-filter="+p.Zone,
		"--fqdn-template="+fqdnTemplate(p.Cluster, p.Zone),
		"--registry=txt",
		"--txt-owner-id="+p.Cluster,
		"--coredns-prefix="+EtcdPrefix,
	)
	if c.StrictlyOwned {
		a = append(a, "--coredns-strictly-owned")
	}
	a = append(a,
		"--policy="+c.Policy,
		"--events",
		"--interval="+c.Interval.String(),
		"--min-event-sync-interval="+c.MinEventSyncInterval.String(),
		fmt.Sprintf("--metrics-address=:%d", metricsPort),
	)
	return a
}

// render builds the objects for one cluster.
func render(p params) *objects {
	lbl := commonLabels()
	o := &objects{}
	meta := func(name, namespace string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: lbl}
	}

	o.Namespace = &corev1.Namespace{ObjectMeta: meta(Namespace, "")}

	o.ServiceAccount = &corev1.ServiceAccount{ObjectMeta: meta(AppName, Namespace)}

	// What the sources read (the upstream chart's rules for the same sources,
	// charts/external-dns/templates/clusterrole.yaml): the service source
	// watches Services, and EndpointSlices, Pods and Nodes for headless,
	// ClusterIP and NodePort Services.
	rules := []rbacv1.PolicyRule{}
	if slices.Contains(p.Config.Sources, "service") {
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
		)
	}
	if slices.Contains(p.Config.Sources, "ingress") {
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: []string{"get", "list", "watch"}})
	}
	o.ClusterRole = &rbacv1.ClusterRole{ObjectMeta: meta(AppName, ""), Rules: rules}

	o.ClusterRoleBinding = &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta(AppName, ""),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: AppName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: AppName, Namespace: Namespace}},
	}

	healthz := func(initialDelay, period, failureThreshold int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
			PeriodSeconds:       period,
			TimeoutSeconds:      5,
			InitialDelaySeconds: initialDelay,
			FailureThreshold:    failureThreshold,
		}
	}
	container := corev1.Container{
		Name:            AppName,
		Image:           p.Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            args(p),
		// The coredns provider reads its etcd endpoints from ETCD_URLS
		// (provider/coredns/coredns.go, getETCDConfig).
		Env:           []corev1.EnvVar{{Name: "ETCD_URLS", Value: p.EtcdEndpoint}},
		Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: metricsPort, Protocol: corev1.ProtocolTCP}},
		LivenessProbe: healthz(10, 10, 2),
		// Ready as soon as it serves (PostCluster waits for it, and so
		// does every cluster create), with the same 60 s of tolerance.
		ReadinessProbe: healthz(1, 2, 30),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("32Mi"),
			},
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		SecurityContext: &corev1.SecurityContext{
			Privileged:               ptrTo(false),
			AllowPrivilegeEscalation: ptrTo(false),
			ReadOnlyRootFilesystem:   ptrTo(true),
			RunAsNonRoot:             ptrTo(true),
			RunAsUser:                ptrTo[int64](nonRootID),
			RunAsGroup:               ptrTo[int64](nonRootID),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}

	o.Deployment = &appsv1.Deployment{
		ObjectMeta: meta(AppName, Namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo[int32](1),
			// Recreate: never two writers of the same owner's records at once.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					ServiceAccountName: AppName,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptrTo(true),
						FSGroup:        ptrTo[int64](65534),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{container},
				},
			},
		},
	}
	return o
}

func ptrTo[T any](v T) *T { return &v }
