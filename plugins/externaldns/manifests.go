package externaldns

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
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

// objects are the objects PostCluster applies, in apply order.
type objects struct {
	Namespace          *corev1ac.NamespaceApplyConfiguration
	ServiceAccount     *corev1ac.ServiceAccountApplyConfiguration
	ClusterRole        *rbacv1ac.ClusterRoleApplyConfiguration
	ClusterRoleBinding *rbacv1ac.ClusterRoleBindingApplyConfiguration
	Deployment         *appsv1ac.DeploymentApplyConfiguration
}

// list returns the objects in apply order, named by kind (for golden files
// and messages).
func (o *objects) list() []namedObject {
	return []namedObject{
		{"Namespace", o.Namespace},
		{"ServiceAccount", o.ServiceAccount},
		{"ClusterRole", o.ClusterRole},
		{"ClusterRoleBinding", o.ClusterRoleBinding},
		{"Deployment", o.Deployment},
	}
}

type namedObject struct {
	Kind   string
	Object any
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

	o.Namespace = corev1ac.Namespace(Namespace).WithLabels(lbl)

	o.ServiceAccount = corev1ac.ServiceAccount(AppName, Namespace).WithLabels(lbl)

	// What the sources read (the upstream chart's rules for the same sources,
	// charts/external-dns/templates/clusterrole.yaml): the service source
	// watches Services, and EndpointSlices, Pods and Nodes for headless,
	// ClusterIP and NodePort Services.
	rules := []*rbacv1ac.PolicyRuleApplyConfiguration{}
	if slices.Contains(p.Config.Sources, "service") {
		rules = append(rules,
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("services", "pods").WithVerbs("get", "list", "watch"),
			rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("nodes").WithVerbs("list", "watch"),
			rbacv1ac.PolicyRule().WithAPIGroups("discovery.k8s.io").WithResources("endpointslices").WithVerbs("get", "list", "watch"),
		)
	}
	if slices.Contains(p.Config.Sources, "ingress") {
		rules = append(rules,
			rbacv1ac.PolicyRule().WithAPIGroups("networking.k8s.io").WithResources("ingresses").WithVerbs("get", "list", "watch"))
	}
	o.ClusterRole = rbacv1ac.ClusterRole(AppName).WithLabels(lbl).WithRules(rules...)

	o.ClusterRoleBinding = rbacv1ac.ClusterRoleBinding(AppName).WithLabels(lbl).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(AppName)).
		WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(AppName).WithNamespace(Namespace))

	healthz := func() *corev1ac.ProbeApplyConfiguration {
		return corev1ac.Probe().
			WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("http"))).
			WithPeriodSeconds(10).WithTimeoutSeconds(5)
	}
	container := corev1ac.Container().
		WithName(AppName).
		WithImage(p.Image).
		WithImagePullPolicy(corev1.PullIfNotPresent).
		WithArgs(args(p)...).
		// The coredns provider reads its etcd endpoints from ETCD_URLS
		// (provider/coredns/coredns.go, getETCDConfig).
		WithEnv(corev1ac.EnvVar().WithName("ETCD_URLS").WithValue(p.EtcdEndpoint)).
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(metricsPort).WithProtocol(corev1.ProtocolTCP)).
		WithLivenessProbe(healthz().WithInitialDelaySeconds(10).WithFailureThreshold(2)).
		WithReadinessProbe(healthz().WithInitialDelaySeconds(5).WithFailureThreshold(6)).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("10m"),
				corev1.ResourceMemory: resource.MustParse("32Mi"),
			}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})).
		WithSecurityContext(corev1ac.SecurityContext().
			WithPrivileged(false).
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithRunAsUser(nonRootID).
			WithRunAsGroup(nonRootID).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))

	o.Deployment = appsv1ac.Deployment(AppName, Namespace).
		WithLabels(lbl).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(1).
			// Recreate: never two writers of the same owner's records at once.
			WithStrategy(appsv1ac.DeploymentStrategy().WithType(appsv1.RecreateDeploymentStrategyType)).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels)).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(lbl).
				WithSpec(corev1ac.PodSpec().
					WithServiceAccountName(AppName).
					WithSecurityContext(corev1ac.PodSecurityContext().
						WithRunAsNonRoot(true).
						WithFSGroup(65534).
						WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
					WithContainers(container))))
	return o
}
