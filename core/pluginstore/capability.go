package pluginstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// CapabilityLimit caps what the plugins of some sources may ask for
// (pluginTrust.capabilities in the config).
type CapabilityLimit struct {
	// Rule names the limit in messages, e.g. "pluginTrust.capabilities[0]".
	Rule string
	// Sources are source prefixes (as pluginTrust.keys' sources); empty:
	// every source.
	Sources []string
	// Allow are the capabilities those plugins may declare; empty: none.
	Allow []string
}

// refuseCapabilities is the capability decision of an install and of every
// launch: desc (what, from source) is refused when it declares a
// capability this marina does not know, or one that a limit covering
// source does not allow. Limits apply whatever pluginTrust.policy says:
// they are the user's explicit rule.
func (s *Store) refuseCapabilities(what string, desc *sdk.Description, source string) error {
	if desc == nil {
		return nil
	}
	if bad := desc.UnknownCapabilities(); len(bad) > 0 {
		return newError(ErrProtocol, fmt.Sprintf("plugin %s declares capabilities %s that this marina does not know (or twice): upgrade marina, or use a version of the plugin built with an older SDK", what, strings.Join(bad, ", ")))
	}
	l, denied := s.overLimit(desc.Capabilities, source)
	if l == nil {
		return nil
	}
	allowed := "no capability"
	if len(l.Allow) > 0 {
		allowed = "only " + strings.Join(l.Allow, ", ")
	}
	scope := "plugins from any source"
	if len(l.Sources) > 0 {
		scope = "plugins from " + strings.Join(l.Sources, ", ")
	}
	return newError(ErrUntrusted, fmt.Sprintf("plugin %s declares capability %s, but %s allows %s %s: add it to that rule's allow list if you trust this plugin with it, or do not use the plugin",
		what, strings.Join(denied, ", "), l.Rule, scope, allowed))
}

// overLimit returns the first limit covering source that caps does not
// fit, with the capabilities it denies; nil when none.
func (s *Store) overLimit(caps []string, source string) (*CapabilityLimit, []string) {
	for i, l := range s.Trust.Capabilities {
		if !pluginsign.Covers(l.Sources, source) {
			continue
		}
		var denied []string
		for _, c := range caps {
			if !slices.Contains(l.Allow, c) {
				denied = append(denied, c)
			}
		}
		if len(denied) > 0 {
			return &s.Trust.Capabilities[i], denied
		}
	}
	return nil, nil
}

// NewCapabilities returns the capabilities desc declares that no
// installed version of its plugin declared: what installing it would
// grant anew (all of them for a plugin not installed yet).
func (s *Store) NewCapabilities(desc *sdk.Description) []string {
	granted := map[string]bool{}
	installed, _ := s.listPlugin(desc.Name)
	for _, inst := range installed {
		if inst.Description != nil {
			for _, c := range inst.Description.Capabilities {
				granted[c] = true
			}
		}
	}
	var added []string
	for _, c := range desc.Capabilities {
		if !granted[c] {
			added = append(added, c)
		}
	}
	return added
}
