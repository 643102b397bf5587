package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestRenderConflistGolden(t *testing.T) {
	got, err := RenderConflist([]string{"10.244.1.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{
  "cniVersion": "1.0.0",
  "name": "nodenet",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "ranges": [
          [
            {
              "subnet": "10.244.1.0/24"
            }
          ]
        ],
        "routes": [
          {
            "dst": "0.0.0.0/0"
          }
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
`
	if string(got) != want {
		t.Errorf("RenderConflist:\n%s\nwant:\n%s", got, want)
	}
}

func TestRenderConflist(t *testing.T) {
	tests := []struct {
		name       string
		cidrs      []string
		wantRanges []string
		wantRoutes []string
		wantErr    bool
	}{
		{
			name:       "ipv4",
			cidrs:      []string{"10.244.0.0/24"},
			wantRanges: []string{"10.244.0.0/24"},
			wantRoutes: []string{"0.0.0.0/0"},
		},
		{
			name:       "dual-stack",
			cidrs:      []string{"10.244.2.0/24", "fd00:10:244:2::/64"},
			wantRanges: []string{"10.244.2.0/24", "fd00:10:244:2::/64"},
			wantRoutes: []string{"0.0.0.0/0", "::/0"},
		},
		{
			name:       "dual-stack, IPv6 first",
			cidrs:      []string{"fd00:10:244:2::/64", "10.244.2.0/24"},
			wantRanges: []string{"fd00:10:244:2::/64", "10.244.2.0/24"},
			wantRoutes: []string{"0.0.0.0/0", "::/0"},
		},
		{
			name:       "ipv6 only",
			cidrs:      []string{"fd00:10:244::/64"},
			wantRanges: []string{"fd00:10:244::/64"},
			wantRoutes: []string{"::/0"},
		},
		{
			name:       "non-canonical CIDR is masked",
			cidrs:      []string{"10.244.3.7/24"},
			wantRanges: []string{"10.244.3.0/24"},
			wantRoutes: []string{"0.0.0.0/0"},
		},
		{name: "no CIDR", cidrs: nil, wantErr: true},
		{name: "invalid CIDR", cidrs: []string{"10.244.0.0"}, wantErr: true},
		{name: "garbage", cidrs: []string{`x", "evil": "y`}, wantErr: true},
		{name: "duplicate", cidrs: []string{"10.244.0.0/24", "10.244.0.1/24"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := RenderConflist(tt.cidrs)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("RenderConflist(%q) succeeded, want an error", tt.cidrs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var conf struct {
				CNIVersion string `json:"cniVersion"`
				Name       string `json:"name"`
				Plugins    []struct {
					Type         string          `json:"type"`
					IPMasq       bool            `json:"ipMasq"`
					Capabilities map[string]bool `json:"capabilities"`
					IPAM         struct {
						Type   string `json:"type"`
						Ranges [][]struct {
							Subnet string `json:"subnet"`
						} `json:"ranges"`
						Routes []struct {
							Dst string `json:"dst"`
						} `json:"routes"`
					} `json:"ipam"`
				} `json:"plugins"`
			}
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatalf("output is not JSON: %v\n%s", err, data)
			}
			if conf.CNIVersion != "1.0.0" || conf.Name != "nodenet" {
				t.Errorf("cniVersion/name = %q/%q", conf.CNIVersion, conf.Name)
			}
			if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "ptp" || conf.Plugins[1].Type != "portmap" {
				t.Fatalf("plugins = %+v, want ptp then portmap", conf.Plugins)
			}
			ptp := conf.Plugins[0]
			if !ptp.IPMasq || ptp.IPAM.Type != "host-local" {
				t.Errorf("ptp ipMasq=%v ipam=%q", ptp.IPMasq, ptp.IPAM.Type)
			}
			var ranges, routes []string
			for _, set := range ptp.IPAM.Ranges {
				if len(set) != 1 {
					t.Errorf("range set %+v, want one range", set)
				}
				for _, r := range set {
					ranges = append(ranges, r.Subnet)
				}
			}
			for _, r := range ptp.IPAM.Routes {
				routes = append(routes, r.Dst)
			}
			if !reflect.DeepEqual(ranges, tt.wantRanges) {
				t.Errorf("ranges = %q, want %q", ranges, tt.wantRanges)
			}
			if !reflect.DeepEqual(routes, tt.wantRoutes) {
				t.Errorf("routes = %q, want %q", routes, tt.wantRoutes)
			}
			if !conf.Plugins[1].Capabilities["portMappings"] {
				t.Errorf("portmap capabilities = %v", conf.Plugins[1].Capabilities)
			}
		})
	}
}

func TestWriteFileIfChanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "net.d") // created on demand
	path := filepath.Join(dir, conflistName)

	written, err := writeFileIfChanged(path, []byte("one"))
	if err != nil || !written {
		t.Fatalf("first write: written=%v err=%v", written, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v, want 0644", st.Mode().Perm())
	}
	mtime := st.ModTime()

	written, err = writeFileIfChanged(path, []byte("one"))
	if err != nil || written {
		t.Fatalf("same content: written=%v err=%v, want no write", written, err)
	}
	if st, _ := os.Stat(path); !st.ModTime().Equal(mtime) {
		t.Errorf("file touched although unchanged")
	}

	written, err = writeFileIfChanged(path, []byte("two"))
	if err != nil || !written {
		t.Fatalf("new content: written=%v err=%v", written, err)
	}
	if got, _ := os.ReadFile(path); string(got) != "two" {
		t.Errorf("content = %q, want two", got)
	}

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %q, want only %s (temp files left behind?)", names, conflistName)
	}
}
