package container

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// listTar renders a tar archive's entries as "name type mode|...".
func listTar(t *testing.T, b []byte) string {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(b))
	var out []string
	for i := 0; i < 100; i++ {
		h, err := tr.Next()
		if err == io.EOF {
			return strings.Join(out, "|")
		}
		if err != nil {
			t.Fatal(err)
		}
		typ := "f"
		if h.Typeflag == tar.TypeDir {
			typ = "d"
		}
		out = append(out, fmt.Sprintf("%s %s %o", h.Name, typ, h.Mode))
	}
	t.Fatal("tar archive has more than 100 entries")
	return ""
}

func TestHashIsCanonicalAndCoversEveryField(t *testing.T) {
	base := Spec{
		Name: "m", Image: "img:1", Cmd: []string{"a"}, Env: []string{"A=1"},
		Network: "kind", IP: "172.30.255.52", Aliases: []string{"x", "y"},
		Ports:  []Port{{HostPort: 1, ContainerPort: 1}, {HostPort: 2, ContainerPort: 2, Protocol: "udp"}},
		Mounts: []Mount{{Type: "volume", Source: "v", Target: "/v"}},
		Files:  []File{{Path: "/a", Content: []byte("1")}, {Path: "/b", Content: []byte("2")}},
	}
	h := hashSpec(base, nil)

	reordered := base
	reordered.Aliases = []string{"y", "x"}
	reordered.Ports = []Port{base.Ports[1], {HostPort: 1, ContainerPort: 1, Protocol: "tcp"}}
	reordered.Files = []File{base.Files[1], {Path: "/a", Content: []byte("1"), Mode: 0o644}}
	reordered.Restart = "always"
	if got := hashSpec(reordered, nil); got != h {
		t.Fatalf("equivalent spec hashes differently:\n%s\n%s", got, h)
	}

	changes := map[string]func(*Spec){
		"image":        func(s *Spec) { s.Image = "img:2" },
		"cmd":          func(s *Spec) { s.Cmd = []string{"b"} },
		"env":          func(s *Spec) { s.Env = []string{"A=2"} },
		"network":      func(s *Spec) { s.Network = "other" },
		"ip":           func(s *Spec) { s.IP = "172.30.255.53" },
		"port":         func(s *Spec) { s.Ports = s.Ports[:1] },
		"mount":        func(s *Spec) { s.Mounts = nil },
		"file content": func(s *Spec) { s.Files = []File{{Path: "/a", Content: []byte("changed")}, s.Files[1]} },
		"file mode":    func(s *Spec) { s.Files = []File{{Path: "/a", Content: []byte("1"), Mode: 0o600}, s.Files[1]} },
		"restart":      func(s *Spec) { s.Restart = "unless-stopped" },
		"labels":       func(s *Spec) { s.Labels = map[string]string{"k": "v"} },
		"user":         func(s *Spec) { s.User = "1000" },
	}
	for name, change := range changes {
		s := base
		s.Files = append([]File(nil), base.Files...)
		s.Ports = append([]Port(nil), base.Ports...)
		change(&s)
		if hashSpec(s, nil) == h {
			t.Errorf("changing the %s does not change the hash", name)
		}
	}
	if hashSpec(base, []byte("k1")) == hashSpec(base, []byte("k2")) || hashSpec(base, []byte("k1")) == h {
		t.Error("the hash key does not change the hash")
	}
}

func TestValidate(t *testing.T) {
	ok := Spec{Name: "n", Image: "i"}
	cases := map[string]struct {
		change func(*Spec)
		want   string
	}{
		"no name":       {func(s *Spec) { s.Name = "" }, "Name"},
		"no image":      {func(s *Spec) { s.Image = "" }, "Image"},
		"bad ip":        {func(s *Spec) { s.IP, s.Network = "300.1.1.1", "kind" }, "IP"},
		"ip no network": {func(s *Spec) { s.IP = "10.0.0.1" }, "Network"},
		"restart":       {func(s *Spec) { s.Restart = "sometimes" }, "Restart"},
		"port":          {func(s *Spec) { s.Ports = []Port{{ContainerPort: 70000}} }, "Ports[0]"},
		"protocol":      {func(s *Spec) { s.Ports = []Port{{ContainerPort: 53, Protocol: "sctp"}} }, "Protocol"},
		"host ip":       {func(s *Spec) { s.Ports = []Port{{ContainerPort: 53, HostIP: "localhost"}} }, "HostIP"},
		"mount type":    {func(s *Spec) { s.Mounts = []Mount{{Type: "tmpfs", Source: "x", Target: "/x"}} }, "Mounts[0].Type"},
		"mount target":  {func(s *Spec) { s.Mounts = []Mount{{Type: "bind", Source: "/x", Target: "x"}} }, "Mounts[0]"},
		"file path":     {func(s *Spec) { s.Files = []File{{Path: "etc/x"}} }, "Files[0].Path"},
		"file dotdot":   {func(s *Spec) { s.Files = []File{{Path: "/etc/../x"}} }, "Files[0].Path"},
	}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	for name, tc := range cases {
		s := ok
		tc.change(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate() = %v, want an error naming %s", name, err, tc.want)
		}
	}
}

func TestTarFiles(t *testing.T) {
	b, err := tarFiles([]File{{Path: "/etc/a/b/c.yml", Content: []byte("x"), Mode: 0o600}, {Path: "/etc/a/d", Content: []byte("yy")}})
	if err != nil {
		t.Fatal(err)
	}
	got := listTar(t, b)
	want := "etc/ d 755|etc/a/ d 755|etc/a/b/ d 755|etc/a/b/c.yml f 600|etc/a/d f 644"
	if got != want {
		t.Fatalf("tar entries:\n got %s\nwant %s", got, want)
	}
}
