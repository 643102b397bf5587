package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/bcollard/marina/core/atomicfile"
	"github.com/bcollard/marina/core/userfile"
)

// SetPluginEnabled sets plugins.<name>.enabled in the config file at path,
// keeping the file's comments and layout. A missing file is created (0600)
// holding just that setting. The edited file must still validate; otherwise
// nothing is written and the problems are returned. Callers hold the process lock.
func SetPluginEnabled(path, name string, enabled bool) error {
	if !isPluginName(name) {
		return &ValidationError{Problems: []Problem{{Path: "plugins." + name, Message: fmt.Sprintf("%q is not a valid plugin name: lower-case letters, digits and '-', starting with a letter", name)}}}
	}
	data, err := userfile.ReadFile(path, userfile.MaxSize)
	var refused *userfile.Error
	switch {
	case errors.As(err, &refused):
		return &ValidationError{File: path, Problems: []Problem{{Path: "(file)", Message: "the config file " + refused.Reason, Where: path}}}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	// One document only: writing back the first of two would drop the second.
	parsed, p := parseDocument(path, data)
	if p != nil {
		return &ValidationError{File: path, Problems: []Problem{*p}}
	}
	doc := *parsed
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		*root = yaml.Node{Kind: yaml.MappingNode}
	}
	if root.Kind != yaml.MappingNode {
		return &ValidationError{File: path, Problems: []Problem{{Path: "(top level)", Message: "must be a mapping of keys"}}}
	}
	plugins := mappingChild(root, "plugins")
	entry := mappingChild(plugins, name)
	value := "false"
	if enabled {
		value = "true"
	}
	setScalar(entry, "enabled", value, "!!bool")
	out, err := encodeNode(&doc)
	if err != nil {
		return err
	}
	// Validate the result before it replaces the file.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".marina-config-check-*.yaml")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return err
			}
			tmp, err = os.CreateTemp(filepath.Dir(path), ".marina-config-check-*.yaml")
		}
		if err != nil {
			return err
		}
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	tmp.Close()
	if _, err := Load(LoadOptions{Path: tmp.Name()}); err != nil {
		var verr *ValidationError
		if errors.As(err, &verr) {
			verr.File = path
			return fmt.Errorf("%s was not changed: %w", path, verr)
		}
		return err
	}
	return atomicfile.WriteFile(path, out, 0o600)
}

// mappingChild returns the mapping under key in m, creating it (or replacing
// a null value) when needed.
func mappingChild(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				*v = yaml.Node{Kind: yaml.MappingNode}
			}
			return v
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

func setScalar(m *yaml.Node, key, value, tag string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1].Kind, m.Content[i+1].Value, m.Content[i+1].Tag = yaml.ScalarNode, value, tag
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value, Tag: tag})
}
