package dockerfake_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	ctypes "github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/bcollard/marina/sdk/dockerfake"
)

func clientCreate(name, image string, labels map[string]string) client.ContainerCreateOptions {
	return client.ContainerCreateOptions{Name: name, Config: &ctypes.Config{Image: image, Labels: labels}}
}

// rawClient talks HTTP to the fake's socket, without the Docker client.
func rawClient(eng *dockerfake.Engine) *http.Client {
	sock := strings.TrimPrefix(eng.Host(), "unix://")
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

func do(t *testing.T, hc *http.Client, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://docker"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, strings.TrimSpace(string(b))
}

// TestVersionNegotiation: /_ping says the API version, the client uses it
// in every path, and paths with versions the engine lacks are refused.
func TestVersionNegotiation(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithAPIVersion("1.44"))
	hc := rawClient(eng)
	resp, body := do(t, hc, "GET", "/_ping", "")
	if resp.StatusCode != 200 || body != "OK" || resp.Header.Get("Api-Version") != "1.44" {
		t.Fatalf("GET /_ping: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = do(t, hc, "HEAD", "/_ping", "")
	if resp.StatusCode != 200 || body != "" || resp.Header.Get("Api-Version") != "1.44" {
		t.Fatalf("HEAD /_ping: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, hc, "GET", "/v1.45/containers/json", "")
	if resp.StatusCode != 400 || body != `{"message":"client version 1.45 is too new. Maximum supported API version is 1.44"}` {
		t.Fatalf("too new: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, hc, "GET", "/v1.11/version", "")
	if resp.StatusCode != 400 || !strings.Contains(body, "client version 1.11 is too old") {
		t.Fatalf("too old: %d %s", resp.StatusCode, body)
	}

	api, err := client.New(client.WithHost(eng.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	v, err := api.ServerVersion(context.Background(), client.ServerVersionOptions{})
	if err != nil || v.APIVersion != "1.44" || v.Os != "linux" {
		t.Fatalf("ServerVersion = %+v, %v", v, err)
	}
	if api.ClientVersion() != "1.44" {
		t.Fatalf("negotiated version %s, want 1.44", api.ClientVersion())
	}
	var sawVersioned bool
	for _, r := range eng.Requests() {
		sawVersioned = sawVersioned || (r.Path == "/version" && r.Version == "1.44")
	}
	if !sawVersioned {
		t.Fatalf("requests: %v", eng.Requests())
	}

	if got := dockerfake.Start(t).APIVersion(); got != dockerfake.DefaultAPIVersion {
		t.Fatalf("default API version %s", got)
	}
}

// TestErrorBodies: the engine's status codes and JSON error bodies, as the
// client classifies them.
func TestErrorBodies(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("alpine"))
	hc := rawClient(eng)
	for _, tc := range []struct {
		method, path, body string
		status             int
		message            string
	}{
		{"GET", "/v1.41/containers/nope/json", "", 404, "No such container: nope"},
		{"GET", "/v1.41/images/nope:v1/json", "", 404, "No such image: nope:v1"},
		{"DELETE", "/v1.41/volumes/nope", "", 404, "get nope: no such volume"},
		{"GET", "/v1.41/networks/nope", "", 404, "network nope not found"},
		{"POST", "/v1.41/containers/create", `{"Image":"nope:v9"}`, 404, "No such image: nope:v9"},
		{"POST", "/v1.41/containers/create?name=bad/name", `{"Image":"alpine"}`, 400, "Invalid container name (bad/name), only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed"},
		{"DELETE", "/v1.41/networks/bridge", "", 403, "bridge is a pre-defined network and cannot be removed"},
		{"GET", "/v1.41/containers/json?filters=%7B%22bogus%22%3A%7B%22x%22%3Atrue%7D%7D", "", 400, "invalid filter 'bogus'"},
	} {
		resp, body := do(t, hc, tc.method, tc.path, tc.body)
		var msg struct{ Message string }
		if err := json.Unmarshal([]byte(body), &msg); err != nil || resp.StatusCode != tc.status || msg.Message != tc.message || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q, want %d %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status, tc.message)
		}
	}

	resp, body := do(t, hc, "POST", "/v1.41/containers/create?name=web", `{"Image":"alpine"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	var created struct{ Id string }
	_ = json.Unmarshal([]byte(body), &created)
	resp, body = do(t, hc, "POST", "/v1.41/containers/create?name=web", `{"Image":"alpine"}`)
	if resp.StatusCode != 409 || !strings.Contains(body, `The container name \"/web\" is already in use by container \"`+created.Id+`\"`) {
		t.Errorf("create of an existing name: %d %s", resp.StatusCode, body)
	}
	if resp, _ = do(t, hc, "POST", "/v1.41/containers/web/start", ""); resp.StatusCode != 204 {
		t.Errorf("start: %d", resp.StatusCode)
	}
	if resp, body = do(t, hc, "POST", "/v1.41/containers/"+created.Id[:8]+"/start", ""); resp.StatusCode != 304 || body != "" {
		t.Errorf("start of a running container (by id prefix): %d %q, want 304", resp.StatusCode, body)
	}
	if resp, body = do(t, hc, "DELETE", "/v1.41/containers/web", ""); resp.StatusCode != 409 || !strings.Contains(body, "You cannot remove a running container "+created.Id) {
		t.Errorf("remove of a running container: %d %s", resp.StatusCode, body)
	}
	if resp, _ = do(t, hc, "DELETE", "/v1.41/containers/web?force=1", ""); resp.StatusCode != 204 {
		t.Errorf("forced remove: %d", resp.StatusCode)
	}
}

// TestNotImplemented: an endpoint the fake lacks answers 501 naming it.
func TestNotImplemented(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("alpine"))
	api, err := client.New(client.WithHost(eng.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	_, err = api.ContainerStop(context.Background(), "x", client.ContainerStopOptions{})
	if !cerrdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), "POST /v1.41/containers/x/stop is not implemented by the fake Docker engine") {
		t.Fatalf("ContainerStop: %v, want 501 naming the call", err)
	}
	_, err = api.ContainerList(context.Background(), client.ContainerListOptions{Filters: client.Filters{}.Add("ancestor", "alpine")})
	if !cerrdefs.IsNotImplemented(err) || !strings.Contains(err.Error(), `filter "ancestor"`) {
		t.Fatalf("ContainerList(ancestor): %v, want 501", err)
	}
}

// TestImages: references resolve as Docker's do; pulls make images
// present.
func TestImages(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("alpine", "localhost:5000/team/app:1", "registry.k8s.io/pause:3.10"))
	api, err := client.New(client.WithHost(eng.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	c := context.Background()
	for _, ref := range []string{"alpine", "alpine:latest", "docker.io/library/alpine", "library/alpine:latest", "localhost:5000/team/app:1", "registry.k8s.io/pause:3.10"} {
		res, err := api.ImageInspect(c, ref)
		if err != nil || !strings.HasPrefix(res.ID, "sha256:") {
			t.Errorf("ImageInspect(%s) = %+v, %v", ref, res.ID, err)
			continue
		}
		if byID, err := api.ImageInspect(c, res.ID[:19]); err != nil || byID.ID != res.ID {
			t.Errorf("ImageInspect by id prefix %s: %v", res.ID[:19], err)
		}
	}
	for _, ref := range []string{"alpine:3", "team/app:1", "registry.k8s.io/pause:3.9"} {
		if _, err := api.ImageInspect(c, ref); !cerrdefs.IsNotFound(err) {
			t.Errorf("ImageInspect(%s) = %v, want not found", ref, err)
		}
	}
	resp, err := api.ImagePull(c, "alpine:3", client.ImagePullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Wait(c); err != nil {
		t.Fatal(err)
	}
	_ = resp.Close()
	if _, err := api.ImageInspect(c, "docker.io/library/alpine:3"); err != nil {
		t.Fatalf("after the pull: %v", err)
	}
	eng.FailPull("ghcr.io/x/y", "manifest unknown")
	if _, err := api.ImagePull(c, "ghcr.io/x/y:latest", client.ImagePullOptions{}); err == nil || !strings.Contains(err.Error(), "manifest unknown") {
		t.Fatalf("failing pull: %v", err)
	}
}

// TestNetworks: create (with IPAM), inspect, list, connect, disconnect and
// remove, and a container's address on each network.
func TestNetworks(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("alpine"))
	api, err := client.New(client.WithHost(eng.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	c := context.Background()
	sub := netip.MustParsePrefix("10.40.0.0/24")
	created, err := api.NetworkCreate(c, "lab2", client.NetworkCreateOptions{Driver: "bridge", Labels: map[string]string{"team": "a"},
		IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: sub, IPRange: netip.MustParsePrefix("10.40.0.128/25")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.NetworkCreate(c, "lab2", client.NetworkCreateOptions{}); !cerrdefs.IsConflict(err) {
		t.Fatalf("second create of lab2: %v, want a conflict", err)
	}
	if _, err := api.NetworkCreate(c, "lab3", client.NetworkCreateOptions{IPAM: &network.IPAM{Config: []network.IPAMConfig{{Subnet: netip.MustParsePrefix("10.40.0.0/16")}}}}); !cerrdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "Pool overlaps") {
		t.Fatalf("overlapping create: %v", err)
	}
	auto, err := api.NetworkCreate(c, "auto", client.NetworkCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := api.NetworkInspect(c, "auto", client.NetworkInspectOptions{})
	if err != nil || len(in.Network.IPAM.Config) != 1 || in.Network.IPAM.Config[0].Subnet.String() != "172.18.0.0/16" || in.Network.ID != auto.ID {
		t.Fatalf("auto network = %+v, %v", in.Network, err)
	}
	list, err := api.NetworkList(c, client.NetworkListOptions{Filters: client.Filters{}.Add("label", "team=a")})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != created.ID {
		t.Fatalf("NetworkList(team=a) = %+v, %v", list.Items, err)
	}

	if _, err := api.ContainerCreate(c, clientCreate("web", "alpine", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NetworkConnect(c, "lab2", client.NetworkConnectOptions{Container: "web", EndpointConfig: &network.EndpointSettings{Aliases: []string{"www"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ContainerStart(c, "web", client.ContainerStartOptions{}); err != nil {
		t.Fatal(err)
	}
	got, _ := eng.Container("web")
	if got.Networks["lab2"].IP != "10.40.0.129" || got.Networks["bridge"].IP != "172.17.0.2" {
		t.Fatalf("addresses = %+v (dynamic ones come from the IP range)", got.Networks)
	}
	in, err = api.NetworkInspect(c, created.ID[:12], client.NetworkInspectOptions{})
	if err != nil || in.Network.Containers[got.ID].IPv4Address.String() != "10.40.0.129/24" || in.Network.Containers[got.ID].Name != "web" {
		t.Fatalf("inspect lab2: %+v, %v", in.Network.Containers, err)
	}
	if _, err := api.NetworkConnect(c, "lab2", client.NetworkConnectOptions{Container: "web"}); !cerrdefs.IsPermissionDenied(err) {
		t.Fatalf("second connect: %v", err)
	}
	if _, err := api.NetworkRemove(c, "lab2", client.NetworkRemoveOptions{}); !cerrdefs.IsPermissionDenied(err) || !strings.Contains(err.Error(), "has active endpoints") {
		t.Fatalf("remove of a network in use: %v", err)
	}
	if _, err := api.NetworkConnect(c, "auto", client.NetworkConnectOptions{Container: "web", EndpointConfig: &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: netip.MustParseAddr("172.18.5.5")}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := eng.Container("web"); got.Networks["auto"].IP != "172.18.5.5" {
		t.Fatalf("static address on connect: %+v", got.Networks)
	}
	if _, err := api.NetworkDisconnect(c, "lab2", client.NetworkDisconnectOptions{Container: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NetworkDisconnect(c, "lab2", client.NetworkDisconnectOptions{Container: "web"}); !cerrdefs.IsInternal(err) {
		t.Fatalf("second disconnect: %v", err)
	}
	if _, err := api.NetworkRemove(c, "lab2", client.NetworkRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, n := range eng.Networks() {
		names = append(names, n.Name+"="+strings.Join(n.Containers, ","))
	}
	if strings.Join(names, " ") != "auto=web bridge=web host= kind= none=" {
		t.Fatalf("networks = %v", names)
	}
}

// TestArchive: files copied in are kept with their mode and owner and read
// back as Docker's archive API returns them.
func TestArchive(t *testing.T) {
	eng := dockerfake.Start(t, dockerfake.WithImages("alpine"))
	api, err := client.New(client.WithHost(eng.Host()))
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	c := context.Background()
	res, err := api.ContainerCreate(c, clientCreate("files", "alpine", nil))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: "conf/", Typeflag: tar.TypeDir, Mode: 0o750})
	_ = tw.WriteHeader(&tar.Header{Name: "conf/a.yml", Typeflag: tar.TypeReg, Mode: 0o600, Size: 3, Uid: 7, Gid: 8})
	_, _ = tw.Write([]byte("a: 1"[:3]))
	_ = tw.Close()
	if _, err := api.CopyToContainer(c, res.ID, client.CopyToContainerOptions{DestinationPath: "/etc", Content: bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	got, _ := eng.Container("files")
	if f := got.Files["/etc/conf/a.yml"]; string(f.Content) != "a: " || f.Mode != 0o600 || f.UID != 0 {
		t.Fatalf("file = %+v (without copyUIDGID the owner is root)", f)
	}
	if _, err := api.CopyToContainer(c, res.ID, client.CopyToContainerOptions{DestinationPath: "/etc/conf/a.yml", Content: bytes.NewReader(buf.Bytes())}); !cerrdefs.IsInternal(err) || !strings.Contains(err.Error(), "extraction point is not a directory") {
		t.Fatalf("copy onto a file: %v", err)
	}
	st, err := api.ContainerStatPath(c, "files", client.ContainerStatPathOptions{Path: "/etc/conf"})
	if err != nil || !st.Stat.Mode.IsDir() || st.Stat.Mode.Perm() != 0o750 || st.Stat.Name != "conf" {
		t.Fatalf("stat /etc/conf = %+v, %v", st.Stat, err)
	}
	out, err := api.CopyFromContainer(c, "files", client.CopyFromContainerOptions{SourcePath: "/etc/conf"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Content.Close()
	tr := tar.NewReader(out.Content)
	var entries []string
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		entries = append(entries, h.Name)
	}
	if strings.Join(entries, " ") != "conf/ conf/a.yml" {
		t.Fatalf("archive of /etc/conf = %v", entries)
	}
	if _, err := api.CopyFromContainer(c, "files", client.CopyFromContainerOptions{SourcePath: "/etc/passwd"}); !cerrdefs.IsNotFound(err) {
		t.Fatalf("copy of a file not copied in: %v, want not found (the fake has no image content)", err)
	}
}

// TestSocketPath: when t.TempDir's path is too long for a unix socket
// (as on macOS, whose $TMPDIR is long), the socket goes to a short
// directory of its own, removed at the end.
func TestSocketPath(t *testing.T) {
	base := t.TempDir()
	for _, tc := range []struct {
		name, tmpdir, want string
	}{
		{"TMPDIR", filepath.Join(base, strings.Repeat("t", 20)), filepath.Join(base, strings.Repeat("t", 20), "df")},
		{"/tmp", filepath.Join(base, strings.Repeat("t", 110)), "/tmp/df"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.MkdirAll(tc.tmpdir, 0o700); err != nil {
				t.Skipf("cannot make a long TMPDIR here: %v", err)
			}
			t.Setenv("GOTMPDIR", "")
			t.Setenv("TMPDIR", tc.tmpdir)
			var sock string
			t.Run("a subtest with a name long enough to make t.TempDir's path too long for a socket", func(t *testing.T) {
				eng := dockerfake.Start(t)
				sock = strings.TrimPrefix(eng.Host(), "unix://")
				if len(sock) > 100 || !strings.HasPrefix(sock, tc.want) {
					t.Fatalf("socket path %s (%d bytes), want one under %s*", sock, len(sock), tc.want)
				}
				connect(t, eng)
			})
			if _, err := net.Dial("unix", sock); err == nil {
				t.Fatalf("%s still answers after the test", sock)
			}
			if _, err := os.Stat(filepath.Dir(sock)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the socket's directory is left after the test: %v", err)
			}
		})
	}
}
