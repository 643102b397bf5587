package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/userfile"
)

// SourceKind says which layer a value came from.
type SourceKind string

// The layers, lowest precedence first.
const (
	FromDefault SourceKind = "default"
	FromFile    SourceKind = "file"
	FromEnv     SourceKind = "env"
	FromFlag    SourceKind = "flag"
)

// Source is where one effective value came from.
type Source struct {
	Kind SourceKind `json:"kind"`
	// Detail is "config.yaml:4:3", "MARINA_VM_CPUS", "--set vm.cpus=6", or a note on a default.
	Detail string `json:"detail,omitempty"`
}

func (s Source) String() string {
	if s.Detail == "" {
		return string(s.Kind)
	}
	return string(s.Kind) + " " + s.Detail
}

// LoadOptions says where to read configuration from.
type LoadOptions struct {
	// Path is the config file; "" means $MARINA_CONFIG, else ~/.marina/config.yaml.
	// An explicitly named file must exist; the default one may be absent.
	Path string
	// Sets are --set key=value overrides (highest precedence).
	Sets []string
	// Home overrides the home directory (tests).
	Home string
}

// Loaded is the effective configuration and its provenance.
type Loaded struct {
	Config *Config
	// Path is the config file consulted; FileExists says whether it was there.
	Path       string
	FileExists bool
	// Sources maps key paths (e.g. "vm.cpus", "registries.mirrors",
	// "plugins.metallb.enabled") to where their value came from.
	Sources map[string]Source
	// Warnings are non-fatal findings, e.g. a MARINA_* variable that sets no key.
	Warnings []string

	// Where each key was written, for Locate: file positions (plugin config
	// keys included), --set flags (one per key set) and MARINA_* variables.
	lines map[string]string
	sets  map[string]string
	env   map[string]string
}

// Locate says where the value at path came from: "config.yaml:12:5",
// "--set plugins.x.config.a=1", "env MARINA_VM_CPUS" or "" (a default). It
// answers for paths this package does not check itself, such as a field of a
// plugin's config that the plugin found wrong ("plugins.acme.config.pools[0].name"):
// a path that was not written itself is located at its nearest written parent.
// A --set of the path or of a parent wins over the file, as its value does.
func (l *Loaded) Locate(path string) string {
	for p := path; p != ""; p = parentPath(p) {
		if kv, ok := l.sets[p]; ok {
			return kv
		}
	}
	for p := path; p != ""; p = parentPath(p) {
		if name, ok := l.env[p]; ok {
			return "env " + name
		}
		if where, ok := l.lines[p]; ok {
			return where
		}
	}
	return ""
}

// parentPath strips the last ".key" or "[i]" of path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

// ResolvePath returns the config file path and whether it was named explicitly
// (by the option or $MARINA_CONFIG).
func ResolvePath(explicit, home string) (string, bool, error) {
	if explicit != "" {
		return explicit, true, nil
	}
	if env := os.Getenv("MARINA_CONFIG"); env != "" {
		return env, true, nil
	}
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", false, fmt.Errorf("cannot find the home directory for ~/.marina/config.yaml: %w; pass --config", err)
		}
		home = h
	}
	return filepath.Join(home, ".marina", "config.yaml"), false, nil
}

// Load reads the effective configuration: defaults, then the file, then
// MARINA_* variables, then --set overrides, and validates it. Every problem
// is reported at once in a *ValidationError.
func Load(opts LoadOptions) (*Loaded, error) {
	path, explicit, err := ResolvePath(opts.Path, opts.Home)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Path: path, Sources: map[string]Source{}, sets: map[string]string{}, env: map[string]string{}}
	var problems []Problem

	v := viper.New()
	v.SetConfigType("yaml")
	def := Default()
	for _, leaf := range schema().leaves() {
		if leaf.kind() != kindStructMap { // plugins get per-key defaults below
			v.SetDefault(leaf.Path, valueAt(def, leaf))
		}
	}
	for _, name := range sortedKeys(def.Plugins) {
		v.SetDefault("plugins."+name+".enabled", def.Plugins[name].Enabled)
	}

	// The file: checked strictly first, then its clean part handed to viper.
	var fileCfg Config
	var lines map[string]string
	data, err := userfile.ReadFile(path, userfile.MaxSize)
	var refused *userfile.Error
	switch {
	case errors.As(err, &refused):
		return nil, &ValidationError{File: path, Problems: []Problem{{Path: "(file)", Message: "the config file " + refused.Reason, Where: path}}}
	case err == nil:
		l.FileExists = true
		sf := checkFile(path, data)
		problems = append(problems, sf.problems...)
		lines = sf.lines
		if sf.clean != nil {
			var m map[string]any
			if err := sf.clean.Decode(&m); err != nil {
				problems = append(problems, Problem{Path: "(file)", Message: err.Error(), Where: path})
			} else if err := v.MergeConfigMap(m); err != nil {
				return nil, fmt.Errorf("reading %s: %w", path, err)
			}
			// A case-preserving decode for plugin config maps (viper lower-cases map keys).
			_ = sf.clean.Decode(&fileCfg)
		}
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// No file: defaults apply.
	case errors.Is(err, fs.ErrNotExist):
		return nil, &ValidationError{File: path, Problems: []Problem{{Path: "(file)", Message: "config file does not exist; create it with `marina config init --config " + path + "` or omit --config/MARINA_CONFIG"}}}
	default:
		return nil, fmt.Errorf("reading config %s: %w", path, err)
	}

	// Environment: only well-formed values are bound, the others are problems.
	envKeys := EnvVars()
	envSet := map[string]string{}
	for _, leaf := range schema().leaves() {
		if leaf.kind() != kindScalar {
			continue
		}
		name := envName(leaf.Path)
		val, ok := os.LookupEnv(name)
		if !ok {
			continue
		}
		l.env[leaf.Path] = name
		if err := parseScalar(val, "", leaf.Type); err != nil {
			problems = append(problems, Problem{Path: leaf.Path, Message: err.Error(), Where: "env " + name})
			continue
		}
		if err := v.BindEnv(leaf.Path, name); err != nil {
			return nil, err
		}
		envSet[leaf.Path] = name
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "MARINA_") && envKeys[name] == "" && !reservedEnv[name] {
			hint := ""
			if best := closest(name, sortedKeys(envKeys)); best != "" {
				hint = fmt.Sprintf("; did you mean %s?", best)
			}
			l.Warnings = append(l.Warnings, fmt.Sprintf("environment variable %s sets no config key%s", name, hint))
		}
	}

	// --set overrides.
	sets := map[string]string{}
	pluginSets := map[string]map[string]string{} // plugin -> config key -> value
	for _, kv := range opts.Sets {
		key, val, p := parseSet(kv)
		if p != nil {
			problems = append(problems, *p)
			continue
		}
		l.sets[key] = "--set " + kv
		if name, ck, ok := pluginConfigKey(key); ok {
			if pluginSets[name] == nil {
				pluginSets[name] = map[string]string{}
			}
			pluginSets[name][ck] = val
			sets["plugins."+name+".config"] = kv
			continue
		}
		v.Set(key, val)
		sets[key] = kv
	}

	cfg := &Config{}
	if err := v.Unmarshal(cfg, func(dc *mapstructure.DecoderConfig) { dc.TagName = "yaml" }); err != nil {
		return nil, fmt.Errorf("decoding configuration: %w", err)
	}
	for _, name := range sortedKeys(pluginSets) {
		if _, ok := cfg.Plugins[name]; !ok {
			// Nothing else names this plugin: its config would go nowhere.
			for _, ck := range sortedKeys(pluginSets[name]) {
				key := "plugins." + name + ".config." + ck
				problems = append(problems, Problem{Path: key, Where: l.sets[key],
					Message: fmt.Sprintf("plugin %s is not in the configuration, so this config would be ignored; check the name (marina plugin list), or enable it too with --set plugins.%s.enabled=true", name, name)})
			}
		}
	}
	for name, pc := range cfg.Plugins {
		pc.Config = fileCfg.Plugins[name].Config
		for ck, val := range pluginSets[name] {
			if pc.Config == nil {
				pc.Config = map[string]any{}
			}
			setNested(pc.Config, strings.Split(ck, "."), val)
		}
		cfg.Plugins[name] = pc
	}

	// Provenance of every value.
	source := func(path string) Source {
		if kv, ok := sets[path]; ok {
			return Source{Kind: FromFlag, Detail: "--set " + kv}
		}
		if name, ok := envSet[path]; ok {
			return Source{Kind: FromEnv, Detail: name}
		}
		if where, ok := lines[path]; ok {
			return Source{Kind: FromFile, Detail: where}
		}
		return Source{Kind: FromDefault}
	}
	for _, leaf := range schema().leaves() {
		if leaf.kind() != kindStructMap {
			l.Sources[leaf.Path] = source(leaf.Path)
		}
	}
	for name := range cfg.Plugins {
		for _, f := range schema().child("plugins").Elem.Children {
			p := "plugins." + name + "." + f.Key
			l.Sources[p] = source(p)
		}
	}

	// DNS addresses follow the bridge unless set explicitly.
	deriveDNS(cfg, l.Sources)

	l.Config = cfg
	l.lines = lines
	problems = append(problems, Validate(cfg)...)
	// The extra CAs are files: read and checked here, where the home
	// directory is known, so a bad one is a config problem at its line.
	home := opts.Home
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	_, caProblems := cfg.ExtraCAs(home)
	problems = append(problems, caProblems...)
	if len(problems) > 0 {
		for i := range problems {
			if problems[i].Where == "" {
				if s, ok := l.Sources[problems[i].Path]; ok && s.Kind != FromDefault {
					problems[i].Where = s.Detail
				} else {
					problems[i].Where = l.Locate(problems[i].Path)
				}
			}
			problems[i] = problems[i].Bounded()
		}
		file := ""
		if l.FileExists {
			file = path
		}
		SortProblems(file, problems)
		return l, &ValidationError{File: file, Problems: problems}
	}
	return l, nil
}

// reservedEnv are MARINA_* variables that are not config keys: the config
// file's path, the plugin handshake, the kind helper (marina re-executed) and what
// marina's test harness passes through marina to it (test/standin, test/).
var reservedEnv = map[string]bool{
	"MARINA_CONFIG":        true,
	"MARINA_PLUGIN_COOKIE": true,
	"MARINA_KIND_HELPER":   true,
	"MARINA_STANDIN_IMAGE": true,
	"MARINA_SKIP_DOCKER":   true,
	"MARINA_SKIP_KUBE":     true,
	"MARINA_KUBE_ASSETS":   true,
	"MARINA_TEST_CACHE":    true,
}

// valueAt returns the value of a schema leaf in c.
func valueAt(c *Config, f *field) any {
	v := reflect.ValueOf(c).Elem()
	for _, key := range strings.Split(f.Path, ".") {
		v = fieldByKey(v, key)
	}
	return v.Interface()
}

func fieldByKey(v reflect.Value, key string) reflect.Value {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if yamlKey(t.Field(i)) == key {
			return v.Field(i)
		}
	}
	panic("config: no field " + key + " in " + t.String())
}

// parseSet parses one --set key=value against the schema.
func parseSet(kv string) (string, string, *Problem) {
	key, val, ok := strings.Cut(kv, "=")
	where := "--set " + kv
	if !ok || key == "" {
		return "", "", &Problem{Path: kv, Message: "--set needs key=value, e.g. --set vm.cpus=6", Where: where}
	}
	if _, _, ok := pluginConfigKey(key); ok {
		return key, val, nil
	}
	f := lookupPath(key)
	if f == nil {
		hint := ""
		var paths []string
		for _, l := range schema().leaves() {
			paths = append(paths, l.Path)
		}
		if best := closest(key, paths); best != "" {
			hint = fmt.Sprintf("; did you mean %q?", best)
		}
		return "", "", &Problem{Path: key, Message: "unknown key" + hint, Where: where}
	}
	switch f.kind() {
	case kindScalar:
	default:
		return "", "", &Problem{Path: key, Message: "lists and sections cannot be set with --set; set them in the config file", Where: where}
	}
	if err := parseScalar(val, "", f.Type); err != nil {
		return "", "", &Problem{Path: key, Message: err.Error(), Where: where}
	}
	return key, val, nil
}

// lookupPath finds the schema field for a dotted path, including
// plugins.<name>.<field>.
func lookupPath(path string) *field {
	parts := strings.Split(path, ".")
	f := schema()
	for i := 0; i < len(parts); i++ {
		switch f.kind() {
		case kindStruct:
			f = f.child(parts[i])
		case kindStructMap:
			f = f.Elem // parts[i] is the map key
			if i+1 < len(parts) {
				i++
				f = f.child(parts[i])
			}
		default:
			return nil
		}
		if f == nil {
			return nil
		}
	}
	if f == schema() {
		return nil
	}
	return f
}

// pluginConfigKey recognises plugins.<name>.config.<key...>.
func pluginConfigKey(key string) (name, configKey string, ok bool) {
	parts := strings.SplitN(key, ".", 4)
	if len(parts) == 4 && parts[0] == "plugins" && parts[2] == "config" && parts[1] != "" && parts[3] != "" {
		return parts[1], parts[3], true
	}
	return "", "", false
}

func setNested(m map[string]any, keys []string, val string) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	var decoded any = val
	_ = yaml.Unmarshal([]byte(val), &decoded) // "3" -> 3, "true" -> true, like the file would
	m[keys[len(keys)-1]] = decoded
}
