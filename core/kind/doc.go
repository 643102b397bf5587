// Package kind is the core's thin adapter over sigs.k8s.io/kind (v0.33.0): it
// renders the kind config of one cluster from its slot and the plugins'
// PreCluster contributions, places the files plugins want in every node on the
// Docker host, and creates, lists and deletes clusters through kind's own
// library.
//
// # Rendering (Render)
//
// The config is kind's own v1alpha4.Cluster, filled field by field:
//
//	name                      the cluster name (a DNS label of at most 49 characters)
//	nodes                     one control-plane node and Workers workers, all with the
//	                          node image, the node labels and one read-only extraMount
//	                          per plugin NodeFile
//	networking.apiServerPort  the slot's API port 7000+N
//	networking.apiServerAddress
//	                          "" (kind: 127.0.0.1) without an APIServerAddress or with a
//	                          loopback one; 0.0.0.0 otherwise
//	networking.serviceSubnet  10.N.0.0/16; networking.podSubnet 10.1N.0.0/16
//	kubeadmConfigPatches      marina's ClusterConfiguration patch adding the
//	                          APIServerAddress and 127.0.0.1 to the API server
//	                          certificate's SANs (only with a non-loopback address),
//	                          then each plugin's patches, in plugin-name order
//	containerdConfigPatches   each plugin's patches, in plugin-name order
//	extraPortMappings         the plugins' port mappings, on the control-plane node
//
// Why the API port is kind's networking.apiServerPort and not an extra port
// mapping (as klimax did): kind itself publishes the API server's port 6443 on
// networking.apiServerAddress:apiServerPort, and its kubeconfig reports the
// first 6443 binding of the control-plane container. An extra 6443 mapping
// would publish the API twice (kind's own random 127.0.0.1 port as well) and
// make the kubeconfig depend on the order kind appends bindings in. With the
// networking fields there is exactly one binding, the one the slot owns. It
// listens on 0.0.0.0, not on the VM's address, because the VM's address can
// change across reboots and Docker cannot restart a container whose port is
// bound to an address the machine no longer has; kind's kubeconfig then says
// https://0.0.0.0:700N and the core rewrites the server to
// https://<APIServerAddress>:700N, which the certificate covers.
//
// Why node labels are kind's per-node `labels` and not kubeadm patches: kind
// renders them itself into the kubelet's node-labels argument in whatever
// kubeadm API version the node image uses (v1beta4 since Kubernetes 1.31,
// where kubeletExtraArgs is a list of {name, value}), and it merges
// kubeletExtraArgs by name — a kubeadm patch setting node-labels would replace
// kind's value and every other patch's. The kubelet refuses to start when
// --node-labels holds a key in the kubernetes.io or k8s.io namespaces other than
// the few it may set on itself (topology.kubernetes.io/region and /zone, the
// node.kubernetes.io/ and kubelet.kubernetes.io/ namespaces, ...), so such keys
// (app.kubernetes.io/managed-by among them) cannot be node labels in the kind
// config: SplitNodeLabels separates them, and the core applies them with the
// admin kubeconfig once the cluster is ready.
//
// kind exposes no public way to validate a config (its Validate and strict
// loader are internal), so Validate re-implements the checks of kind v0.33.0's
// config validation and strict YAML decoding that a rendered config can fail,
// plus marina's own (port conflicts with the API binding, mount paths).
//
// # Node files (NodeFiles, PlaceFiles, RemoveFiles)
//
// A plugin's NodeFile is written on the Docker host at
// <NodeFilesDir>/<cluster>/<path> and bind-mounted read-only at <path> into every
// node. Files must be placed before the cluster is created: Docker creates a
// missing bind source as a directory. A bind-mounted file is pinned by inode,
// so a file changed after creation reaches the nodes only when the cluster is
// recreated. NodeFilesDir must survive reboots of the Docker host (not /tmp),
// since node containers restart with it.
//
// # Creating clusters (Provider, KindProvider)
//
// kind's library shells out to the `docker` CLI (found on PATH) for every
// operation, through os/exec with the process's environment: the Docker
// endpoint can only be chosen with DOCKER_HOST (or a docker context) in the
// environment, the network with KIND_EXPERIMENTAL_DOCKER_NETWORK, and none of
// its calls take a context. KindProvider therefore runs each kind operation in
// a child process — marina itself re-executed with HelperArg — whose
// environment carries the endpoint and network, and kills that child's process
// group (with the docker CLIs it started) when the context ends. The core's
// own environment is never changed, and operations run concurrently. The
// binary's main must therefore serve HelperArg (see ServeHelper); kind also
// gets a throwaway kubeconfig path, so the user's ~/.kube/config is never
// touched by kind (marina writes kubeconfigs itself from Kubeconfig).
package kind
