package plugintest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/bcollard/marina/sdk"
)

// HostVersion is the marina version the fake host reports.
const HostVersion = "0.0.0-plugintest"

// NoDockerHost is the Docker endpoint of DefaultEnv: a socket that does not
// exist, named so that a plugin's "no such file" error says what to do. A
// test reaches a Docker engine only when it asks for one with WithEnv —
// sdk/dockerfake's in-memory engine, or sdk/dockertest.Host() for the real
// one — never through $DOCKER_HOST, which on an author's machine may be the
// engine of their running lab (whose containers a hook would replace).
var NoDockerHost = "unix://" + filepath.Join(os.TempDir(), "plugintest-has-no-docker-give-one-WithEnv-dockerfake-or-dockertest.sock")

// DefaultEnv returns the environment Run passes by default: a lab as
// `marina up` makes it with default settings (bridge 172.30.0.0/16, zone
// demo.internal with its servers at 172.30.255.52/.53), stateDir as the
// plugin's state directory, and NoDockerHost: the harness never points a
// plugin at a Docker engine (the machine's own, or a live lab's) unless
// the test says so.
func DefaultEnv(stateDir string) sdk.Env {
	docker := NoDockerHost
	return sdk.Env{
		HostVersion:          HostVersion,
		VMName:               "marina",
		Driver:               "lima",
		HostOS:               runtime.GOOS,
		DockerHost:           docker,
		NetworkName:          "kind",
		BridgeCIDR:           "172.30.0.0/16",
		Gateway:              "172.30.0.1",
		DynamicIPRange:       "172.30.128.0/18",
		DNSZone:              "demo.internal",
		DNSEtcdIP:            "172.30.255.52",
		DNSServerIP:          "172.30.255.53",
		StateDir:             stateDir,
		RegistryCacheStorage: "guest",
	}
}

// DefaultCluster returns the cluster Run passes to cluster hooks by default:
// "dev" in slot 1 (API port 7001, services 10.1.0.0/16, pods 10.11.0.0/16,
// MetalLB pools 172.30.1.1-7 and 172.30.1.16-254, one control-plane node).
// Run adds the kubeconfig for PostCluster and PreClusterDelete.
func DefaultCluster() *sdk.Cluster {
	return &sdk.Cluster{
		Name:          "dev",
		Slot:          1,
		APIPort:       7001,
		ServiceSubnet: "10.1.0.0/16",
		PodSubnet:     "10.11.0.0/16",
		MetalLBPools: []sdk.AddressRange{
			{First: "172.30.1.1", Last: "172.30.1.7"},
			{First: "172.30.1.16", Last: "172.30.1.254"},
		},
		NodeVersion: "v1.33.1",
		NodeImage:   "kindest/node:v1.33.1",
		Labels: map[string]string{
			"topology.kubernetes.io/region": "europe-west1",
			"topology.kubernetes.io/zone":   "europe-west1-b",
			"app.kubernetes.io/managed-by":  "marina",
			"marina.dev/slot":               "1",
		},
	}
}

// fakeKubeconfig is an admin kubeconfig for c that points at server (the
// harness's noAPIServer, never a live lab's API port); it carries no
// credentials.
func fakeKubeconfig(c *sdk.Cluster, server string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: kind-%[1]s
  cluster:
    server: %[2]s
    insecure-skip-tls-verify: true
contexts:
- name: kind-%[1]s
  context:
    cluster: kind-%[1]s
    user: kind-%[1]s
current-context: kind-%[1]s
users:
- name: kind-%[1]s
  user:
    token: plugintest-fake-token
`, c.Name, server)
}
