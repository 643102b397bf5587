package main

import (
	"slices"
	"strings"
	"testing"
)

func TestRewrite(t *testing.T) {
	node := strings.Join(NodeFlags, " ")
	for _, tc := range []struct {
		name, in, want string
		changed        bool
	}{
		{
			name: "kind's node run",
			in: "run --name dev-control-plane --hostname dev-control-plane --label io.x-k8s.kind.role=control-plane --privileged " +
				"--security-opt seccomp=unconfined --tmpfs /tmp --volume /var --volume /lib/modules:/lib/modules:ro " +
				"-e KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER --detach --tty --net kind --restart=on-failure:1 --init=false " +
				"--volume=/var/lib/marina/nodefiles/dev/etc/x:/etc/x:ro --publish=0.0.0.0:7001:6443/TCP marina-test/kind-node:v1",
			want: "run --name dev-control-plane --hostname dev-control-plane --label io.x-k8s.kind.role=control-plane " + node + " " +
				"--security-opt seccomp=unconfined --tmpfs /tmp --volume /var " +
				"-e KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER --detach --tty --net kind --restart=on-failure:1 --init=false " +
				"--volume=/var/lib/marina/nodefiles/dev/etc/x:/etc/x:ro --publish=0.0.0.0:7001:6443/TCP marina-test/kind-node:v1",
			changed: true,
		},
		{
			name:    "kind's exec",
			in:      "exec --privileged -i -e KUBECONFIG=/etc/kubernetes/admin.conf dev-control-plane kubectl create -f -",
			want:    "exec -i -e KUBECONFIG=/etc/kubernetes/admin.conf dev-control-plane kubectl create -f -",
			changed: true,
		},
		{
			name:    "container exec",
			in:      "container exec --privileged n cat /kind/version",
			want:    "container exec n cat /kind/version",
			changed: true,
		},
		{
			name: "the command's own arguments are left alone",
			in:   "run --rm -v /a:/b img sh -c --privileged --volume /lib/modules:/lib/modules:ro",
			want: "run --rm -v /a:/b img sh -c --privileged --volume /lib/modules:/lib/modules:ro",
		},
		{
			name: "a flag's value that looks like --privileged is a value",
			in:   "run --label --privileged img",
			want: "run --label --privileged img",
		},
		{name: "other commands pass through", in: "ps -a --filter label=io.x-k8s.kind.cluster --format {{.Names}}", want: "ps -a --filter label=io.x-k8s.kind.cluster --format {{.Names}}"},
		{name: "inspect passes through", in: "inspect --privileged x", want: "inspect --privileged x"},
		{name: "no arguments", in: "", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Fields(tc.in)
			got, changed := Rewrite(slices.Clone(in))
			if g := strings.Join(got, " "); g != tc.want {
				t.Errorf("Rewrite(%q)\n got %q\nwant %q", tc.in, g, tc.want)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
		})
	}
}

// TestNodeFlagsKeepProcSysReadOnly: nothing in the flags that replace
// --privileged may make /proc/sys writable (a node must never change the
// host's kernel settings).
func TestNodeFlagsKeepProcSysReadOnly(t *testing.T) {
	for _, f := range NodeFlags {
		for _, bad := range []string{"privileged", "systempaths", "/proc", "SYS_RESOURCE=", "--sysctl"} {
			if strings.Contains(f, bad) {
				t.Errorf("NodeFlags holds %q", f)
			}
		}
	}
	if !slices.Contains(NodeFlags, "SYS_RESOURCE") {
		t.Errorf("NodeFlags does not drop SYS_RESOURCE: %v", NodeFlags)
	}
}
