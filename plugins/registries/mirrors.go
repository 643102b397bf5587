package registries

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/sdk"
)

// Paths inside a mirror container.
const (
	// configPath is where the registry config is placed (the path the
	// distribution v3 image reads by default; the plugin passes it on the
	// command line, so any image of distribution's registry agrees).
	configPath = "/etc/distribution/config.yml"
	// dataDir is the registry's storage root: the cache.
	dataDir = "/var/lib/registry"
)

// mirrorName is a lower-case DNS label: the container's name is also its
// host name on the kind network. A name with a dot or a colon could shadow a
// real registry host (a container named quay.io makes Docker's DNS answer
// quay.io with the mirror itself, so the mirror proxies to itself).
var mirrorName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`) })

// mirror is a configured mirror, checked, with its parsed upstream.
type mirror struct {
	sdk.Mirror
	// upstream is the parsed RemoteURL.
	upstream *url.URL
	// host is the registry host namespace containerd looks up for images of
	// the upstream ("docker.io" for Docker Hub, else host[:port]).
	host string
}

// checkMirrors validates the configured mirrors and returns them parsed.
// Errors name the field (mirrors[i].x) and never echo a password.
func checkMirrors(ms []sdk.Mirror) ([]mirror, error) {
	var errs []error
	out := make([]mirror, 0, len(ms))
	names, ports, hosts := map[string]int{}, map[int]int{}, map[string]int{}
	for i, m := range ms {
		field := fmt.Sprintf("registries.mirrors[%d]", i)
		if !mirrorName().MatchString(m.Name) {
			errs = append(errs, fmt.Errorf("%s.name %q must be a lower-case DNS label (letters, digits, '-'; no '.' or ':', which would shadow a real registry host on the kind network), e.g. %q", field, m.Name, suggestName(m.Name)))
		} else if j, dup := names[m.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name %q is also the name of registries.mirrors[%d]; mirror names must be unique", field, m.Name, j))
		} else {
			names[m.Name] = i
		}
		if m.Port < 1 || m.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s.port %d is out of range 1-65535", field, m.Port))
		} else if j, dup := ports[m.Port]; dup {
			errs = append(errs, fmt.Errorf("%s.port %d is also the port of registries.mirrors[%d]; give each mirror its own port", field, m.Port, j))
		} else {
			ports[m.Port] = i
		}
		u, err := checkRemoteURL(m.RemoteURL)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.remoteURL: %w", field, err))
			continue
		}
		host := registryHost(u)
		if j, dup := hosts[host]; dup {
			errs = append(errs, fmt.Errorf("%s.remoteURL %s mirrors %s, like registries.mirrors[%d]; keep one mirror per upstream registry", field, u, host, j))
		} else {
			hosts[host] = i
		}
		if (m.Username == "") != (m.Password == "") {
			errs = append(errs, fmt.Errorf("%s: set both username and password, or neither", field))
		}
		out = append(out, mirror{Mirror: m, upstream: u, host: host})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// checkRemoteURL parses an upstream registry URL: http or https, a host, no
// credentials (they go in username/password), no path, query or fragment.
func checkRemoteURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err // without the URL, which might hold a password
		}
		return nil, fmt.Errorf("not a URL (%v); write it like https://quay.io", err)
	}
	switch {
	case u.User != nil:
		return nil, fmt.Errorf("%s holds credentials; put them in username and password instead", u.Redacted())
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%s must start with https:// (or http://)", u.Redacted())
	case u.Hostname() == "":
		return nil, fmt.Errorf("%s has no host", u.Redacted())
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return nil, fmt.Errorf("%s must be the registry's root URL, without a path, query or fragment", u.Redacted())
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%s has an invalid port", u.Redacted())
		}
	}
	u.Path = ""
	return u, nil
}

// registryHost is the registry host namespace containerd uses for images of
// upstream u: Docker Hub's endpoints are the namespace "docker.io" (image
// names say docker.io/library/..., containerd resolves them at
// registry-1.docker.io); every other registry is its host[:port].
func registryHost(u *url.URL) string {
	switch u.Host {
	case "registry-1.docker.io", "index.docker.io", "docker.io":
		return "docker.io"
	}
	return u.Host
}

// suggestName turns s (often a host name) into a valid mirror name.
func suggestName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '-', r == '.', r == ':', r == '_':
			b.WriteRune('-')
		}
	}
	n := strings.Trim(b.String(), "-")
	if n == "" {
		n = "mirror"
	}
	return "registry-" + n
}

// registryConfig is distribution's registry configuration (config.yml),
// the part a pull-through mirror needs. Field names follow
// https://distribution.github.io/distribution/about/configuration/.
type registryConfig struct {
	Version string         `yaml:"version"`
	Log     registryLog    `yaml:"log"`
	Storage registryStore  `yaml:"storage"`
	HTTP    registryHTTP   `yaml:"http"`
	Health  registryHealth `yaml:"health"`
	Proxy   registryProxy  `yaml:"proxy"`
}

type registryLog struct {
	Level     string            `yaml:"level"`
	Fields    map[string]string `yaml:"fields"`
	AccessLog struct {
		Disabled bool `yaml:"disabled"`
	} `yaml:"accesslog"`
}

type registryStore struct {
	Cache struct {
		BlobDescriptor string `yaml:"blobdescriptor"`
	} `yaml:"cache"`
	Filesystem struct {
		RootDirectory string `yaml:"rootdirectory"`
	} `yaml:"filesystem"`
}

type registryHTTP struct {
	Addr    string              `yaml:"addr"`
	Headers map[string][]string `yaml:"headers"`
}

type registryHealth struct {
	StorageDriver struct {
		Enabled   bool   `yaml:"enabled"`
		Interval  string `yaml:"interval"`
		Threshold int    `yaml:"threshold"`
	} `yaml:"storagedriver"`
}

type registryProxy struct {
	RemoteURL string `yaml:"remoteurl"`
	Username  string `yaml:"username,omitempty"`
	Password  string `yaml:"password,omitempty"`
}

// renderRegistryConfig renders the config.yml of mirror m. It holds m's
// credentials: it is only ever written into the container (mode 0600).
func renderRegistryConfig(m mirror, logLevel string) ([]byte, error) {
	c := registryConfig{Version: "0.1"}
	c.Log.Level = logLevel
	c.Log.Fields = map[string]string{"service": "registry", "mirror": m.Name}
	c.Storage.Cache.BlobDescriptor = "inmemory"
	c.Storage.Filesystem.RootDirectory = dataDir
	c.HTTP.Addr = net.JoinHostPort("", strconv.Itoa(m.Port))
	c.HTTP.Headers = map[string][]string{"X-Content-Type-Options": {"nosniff"}}
	c.Health.StorageDriver.Enabled = true
	c.Health.StorageDriver.Interval = "10s"
	c.Health.StorageDriver.Threshold = 3
	c.Proxy = registryProxy{RemoteURL: m.upstream.String(), Username: m.Username, Password: m.Password}
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("mirror %s: render registry config: %w", m.Name, err)
	}
	return b, nil
}
