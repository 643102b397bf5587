package migrate

import (
	"fmt"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/bcollard/marina/core/config"
)

// mapper turns klimax's config into marina's, key by key.
type mapper struct {
	k   *klimaxConfig
	vm  VMInfo
	cfg *config.Config
	// keys are the rows shown to the user, in klimax's schema order.
	keys []KeyMapping
	// written maps each marina key written to the file to its comment.
	written map[string]string
	// reverts undo a scalar mapping that marina's validation rejects.
	reverts map[string]func(reason string)
	// mirrors and resolvers are list entries; dead ones were rejected.
	mirrors   []listItem[config.Mirror]
	resolvers []listItem[config.DomainResolver]
	// mirrorsCustom says the mirror list is klimax's own, not a default.
	mirrorsCustom bool
}

type listItem[T any] struct {
	v    T
	row  int
	dead bool
}

func newMapper(k *klimaxConfig, vm VMInfo) *mapper {
	return &mapper{k: k, vm: vm, cfg: config.Default(), written: map[string]string{}, reverts: map[string]func(string){}}
}

func (m *mapper) add(row KeyMapping) int {
	m.keys = append(m.keys, row)
	return len(m.keys) - 1
}

// run maps every key, then drops what marina's validation rejects.
func (m *mapper) run(drops []dropped) error {
	k, c := m.k, m.cfg
	m.vmName()
	mapScalar(m, "vm.cpus", "vm.cpus", k.CPUs, klimaxCPUs, c.VM.CPUs, &c.VM.CPUs)
	mapScalar(m, "vm.memory", "vm.memory", k.Memory, klimaxMemory, c.VM.Memory, &c.VM.Memory)
	mapScalar(m, "vm.disk", "vm.disk", k.Disk, klimaxDisk, c.VM.Disk, &c.VM.Disk)
	mapScalar(m, "vm.rosetta", "vm.rosetta", k.Rosetta, false, c.VM.Rosetta, &c.VM.Rosetta)
	mapScalar(m, "network.kindBridgeCIDR", "network.bridgeCIDR", k.BridgeCIDR, klimaxBridgeCIDR, c.Network.BridgeCIDR, &c.Network.BridgeCIDR)
	mapScalar(m, "network.disablePortMirroring", "network.disablePortMirroring", k.DisablePortMirroring, true, c.Network.DisablePortMirroring, &c.Network.DisablePortMirroring)
	mapScalar(m, "kind.nodeVersion", "kind.nodeVersion", k.NodeVersion, klimaxNodeVersion, c.Kind.NodeVersion, &c.Kind.NodeVersion)
	mapScalar(m, "kind.metalLBVersion", "kind.metalLBVersion", k.MetalLBVersion, klimaxMetalLBVersion, c.Kind.MetalLBVersion, &c.Kind.MetalLBVersion)
	m.mapResolvers()
	mapScalar(m, "kind.autoMergeKubeconfig", "kind.autoMergeKubeconfig", k.AutoMerge, true, c.Kind.AutoMergeKubeconfig, &c.Kind.AutoMergeKubeconfig)
	mapScalar(m, "kind.autoRemoveKubeconfig", "kind.autoRemoveKubeconfig", k.AutoRemove, true, c.Kind.AutoRemoveKubeconfig, &c.Kind.AutoRemoveKubeconfig)
	mapScalar(m, "registries.cacheStorage", "registries.cacheStorage", k.CacheStorage, klimaxCacheStorage, c.Registries.CacheStorage, &c.Registries.CacheStorage)
	m.mapMirrors()
	for _, d := range drops {
		m.add(KeyMapping{KlimaxKey: d.Key, Status: KeyDropped, Value: d.Value, Note: d.Reason})
	}
	if err := m.validate(); err != nil {
		return err
	}
	m.finish()
	return nil
}

// vmName keeps klimax's VM name when the VM is adopted (Lima names an
// instance after its directory); otherwise marina's default, unless the
// name was klimax's user's own.
func (m *mapper) vmName() {
	name := m.k.VMName
	row := KeyMapping{KlimaxKey: "vm.name", MarinaKey: "vm.name", Status: KeyWritten, Value: name}
	switch {
	case m.vm.adoptable():
		row.Note = "kept: the VM is adopted under its name; Lima names an instance after its directory, and the Docker socket ~/." + name + ".docker.sock follows the name"
	case name == klimaxVMName:
		name = config.DefaultVMName
		row.Status, row.Value = KeyMarinaDefault, name
		row.Note = "marina's default: there is no klimax VM to adopt"
		if m.vm.State != VMAbsent && m.vm.State != VMBroken {
			row.Note = "marina's default: klimax's VM cannot be adopted and is recreated"
		}
	}
	m.cfg.VM.Name = name
	i := m.add(row)
	m.written["vm.name"] = "from klimax vm.name"
	if row.Status == KeyMarinaDefault {
		m.written["vm.name"] = "marina's default (" + row.Note[len("marina's default: "):] + ")"
	}
	m.reverts["vm.name"] = func(reason string) {
		m.keys[i].Status, m.keys[i].Value = KeyMarinaDefault, config.DefaultVMName
		m.keys[i].Note = fmt.Sprintf("klimax's %q is not valid in marina: %s", m.cfg.VM.Name, reason)
		m.cfg.VM.Name = config.DefaultVMName
		m.written["vm.name"] = "marina's default"
	}
}

// mapScalar maps one scalar. A klimax value equal to klimax's default is
// klimax's default, not a choice: marina's default replaces it.
func mapScalar[T comparable](m *mapper, kKey, mKey string, kval, kdef, mdef T, dst *T) {
	row := KeyMapping{KlimaxKey: kKey, MarinaKey: mKey}
	val := kval
	switch {
	case kval == kdef && kdef != mdef:
		val = mdef
		row.Status = KeyMarinaDefault
		row.Note = fmt.Sprintf("marina's default; klimax's %v was klimax's own default, not a choice", kdef)
	case kval == mdef:
		row.Status = KeyDefault
		row.Note = "marina's default too"
	default:
		row.Status = KeyWritten
	}
	*dst = val
	row.Value = fmt.Sprint(val)
	i := m.add(row)
	m.reverts[mKey] = func(reason string) {
		*dst = mdef
		m.keys[i].Status, m.keys[i].Value = KeyMarinaDefault, fmt.Sprint(mdef)
		m.keys[i].Note = fmt.Sprintf("klimax's %v is not valid in marina, so marina's default applies: %s", kval, reason)
	}
}

func (m *mapper) mapResolvers() {
	if len(m.k.Resolvers) == 0 {
		m.add(KeyMapping{KlimaxKey: "kind.customDnsResolvers", MarinaKey: "kind.customDNSResolvers", Status: KeyDefault, Value: "[]", Note: "marina's default too"})
		return
	}
	for i, r := range m.k.Resolvers {
		row := KeyMapping{KlimaxKey: fmt.Sprintf("kind.customDnsResolvers[%d]", i), Status: KeyWritten,
			Value: r.Domain + " -> " + strings.Join(r.Resolvers, ", ")}
		if m.k.defaultedResolvers[i] {
			row.Note = "klimax's implicit resolvers, written out"
		}
		m.resolvers = append(m.resolvers, listItem[config.DomainResolver]{
			v: config.DomainResolver{Domain: r.Domain, Resolvers: r.Resolvers}, row: m.add(row)})
	}
}

func (m *mapper) mapMirrors() {
	ms := m.k.Mirrors
	switch {
	case reflect.DeepEqual(ms, config.DefaultMirrors()):
		m.add(KeyMapping{KlimaxKey: "registries.mirrors", MarinaKey: "registries.mirrors", Status: KeyDefault,
			Value: fmt.Sprintf("the %d default mirrors", len(ms)), Note: "marina's default too"})
		return
	case reflect.DeepEqual(ms, klimaxDefaultMirrors()):
		m.add(KeyMapping{KlimaxKey: "registries.mirrors", MarinaKey: "registries.mirrors", Status: KeyMarinaDefault,
			Value: "marina's default mirrors", Note: "klimax's defaults were klimax's own, not a choice"})
		return
	case len(ms) == 0:
		m.mirrorsCustom = true
		m.add(KeyMapping{KlimaxKey: "registries.mirrors", MarinaKey: "registries.mirrors", Status: KeyWritten, Value: "[]", Note: "no mirrors, as in klimax"})
		return
	}
	m.mirrorsCustom = true
	for i, mi := range ms {
		row := KeyMapping{KlimaxKey: fmt.Sprintf("registries.mirrors[%d]", i), Status: KeyWritten, Value: showMirror(mi)}
		m.mirrors = append(m.mirrors, listItem[config.Mirror]{v: mi, row: m.add(row)})
	}
}

// showMirror renders a mirror without its password (and without a
// password embedded in its URL).
func showMirror(mi config.Mirror) string {
	s := fmt.Sprintf("%s port %d %s", mi.Name, mi.Port, redactURL(mi.RemoteURL))
	if mi.Username != "" {
		s += ", username " + mi.Username
	}
	if mi.Password != "" {
		s += ", password (set)"
	}
	return s
}

func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if err != nil && strings.Contains(s, "@") {
			return "(a URL that does not parse; not shown)"
		}
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "(set)")
		return strings.Replace(u.String(), "%28set%29", "(set)", 1)
	}
	return s
}

// redact hides every credential of klimax's mirrors in a message (marina's
// validation quotes values, e.g. a URL that carries a password).
func (m *mapper) redact(msg string) string {
	for _, mi := range m.k.Mirrors {
		for _, secret := range []string{mi.Password, urlPassword(mi.RemoteURL)} {
			if secret != "" {
				msg = strings.ReplaceAll(msg, secret, "(set)")
			}
		}
	}
	return msg
}

func urlPassword(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return ""
	}
	p, _ := u.User.Password()
	return p
}

var itemPath = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(registries\.mirrors|kind\.customDNSResolvers)\[(\d+)\]`)
})

// validate checks the mapped config as marina will, and reverts what is
// rejected to marina's default (dropping rejected list entries), until it
// is valid. Each round removes at least one value, so it ends.
func (m *mapper) validate() error {
	for round := 0; round <= len(m.keys)+1; round++ {
		m.rebuild()
		v := *m.cfg
		deriveDNS(&v)
		problems := config.Validate(&v)
		if len(problems) == 0 {
			return nil
		}
		type kill struct {
			list   string
			idx    int
			reason string
		}
		var kills []kill
		reasons := map[string][]string{}
		var order []string
		for _, pr := range problems {
			msg := m.redact(pr.Message)
			if sm := itemPath().FindStringSubmatch(pr.Path); sm != nil {
				n, _ := strconv.Atoi(sm[2])
				field := strings.TrimPrefix(strings.TrimPrefix(pr.Path, sm[0]), ".")
				if field != "" {
					msg = field + ": " + msg
				}
				kills = append(kills, kill{sm[1], n, msg})
				continue
			}
			if _, ok := m.reverts[pr.Path]; !ok {
				return fmt.Errorf("the migrated configuration is not valid: %s; write marina's config by hand (`marina config init`) and report this", pr)
			}
			if reasons[pr.Path] == nil {
				order = append(order, pr.Path)
			}
			reasons[pr.Path] = append(reasons[pr.Path], msg)
		}
		for _, p := range order {
			m.reverts[p](strings.Join(reasons[p], "; "))
			delete(m.reverts, p)
		}
		// Indices refer to the list as validated: resolve them all first.
		type target struct {
			dead   *bool
			row    int
			reason string
		}
		var targets []target
		for _, kl := range kills {
			if kl.list == "registries.mirrors" {
				if i := aliveIndex(m.mirrors, kl.idx); i >= 0 {
					targets = append(targets, target{&m.mirrors[i].dead, m.mirrors[i].row, kl.reason})
				}
			} else if i := aliveIndex(m.resolvers, kl.idx); i >= 0 {
				targets = append(targets, target{&m.resolvers[i].dead, m.resolvers[i].row, kl.reason})
			}
		}
		for _, t := range targets {
			*t.dead = true
			k := &m.keys[t.row]
			if k.Status == KeyDropped {
				k.Note += "; " + t.reason
				continue
			}
			k.Status, k.MarinaKey = KeyDropped, ""
			k.Note = "not valid in marina: " + t.reason
		}
	}
	return fmt.Errorf("the migrated configuration does not become valid; write marina's config by hand (`marina config init`) and report this")
}

// aliveIndex maps the n-th live entry to its index among all entries.
func aliveIndex[T any](items []listItem[T], n int) int {
	for i := range items {
		if items[i].dead {
			continue
		}
		if n == 0 {
			return i
		}
		n--
	}
	return -1
}

// rebuild sets the config's lists from the live entries.
func (m *mapper) rebuild() {
	if m.mirrorsCustom {
		m.cfg.Registries.Mirrors = []config.Mirror{}
		for _, it := range m.mirrors {
			if !it.dead {
				m.cfg.Registries.Mirrors = append(m.cfg.Registries.Mirrors, it.v)
			}
		}
	}
	m.cfg.Kind.CustomDNSResolvers = []config.DomainResolver{}
	for _, it := range m.resolvers {
		if !it.dead {
			m.cfg.Kind.CustomDNSResolvers = append(m.cfg.Kind.CustomDNSResolvers, it.v)
		}
	}
}

// finish numbers the surviving list entries and records what is written.
func (m *mapper) finish() {
	m.rebuild()
	n := 0
	for _, it := range m.mirrors {
		if !it.dead {
			m.keys[it.row].MarinaKey = fmt.Sprintf("registries.mirrors[%d]", n)
			n++
		}
	}
	n = 0
	for _, it := range m.resolvers {
		if !it.dead {
			m.keys[it.row].MarinaKey = fmt.Sprintf("kind.customDNSResolvers[%d]", n)
			n++
		}
	}
	for _, k := range m.keys {
		if k.Status != KeyWritten || k.MarinaKey == "" {
			continue
		}
		key := k.MarinaKey
		if i := strings.Index(key, "["); i >= 0 {
			key = key[:i]
		}
		if _, ok := m.written[key]; !ok {
			from := k.KlimaxKey
			if i := strings.Index(from, "["); i >= 0 {
				from = from[:i]
			}
			m.written[key] = "from klimax " + from
		}
	}
	if m.mirrorsCustom && !reflect.DeepEqual(m.cfg.Registries.Mirrors, config.DefaultMirrors()) {
		m.written["registries.mirrors"] = "from klimax registries.mirrors"
	}
	deriveDNS(m.cfg)
}

// deriveDNS places the local DNS addresses in the bridge, as config.Load
// does for addresses the file leaves out.
func deriveDNS(c *config.Config) {
	p, err := netip.ParsePrefix(c.Network.BridgeCIDR)
	if err != nil || !p.Addr().Is4() || p.Bits() != 16 {
		return
	}
	b := p.Masked().Addr().As4()
	c.DNS.EtcdIP = netip.AddrFrom4([4]byte{b[0], b[1], 255, 52}).String()
	c.DNS.ServerIP = netip.AddrFrom4([4]byte{b[0], b[1], 255, 53}).String()
}
