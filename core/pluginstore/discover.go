package pluginstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry"

	"github.com/bcollard/marina/core/pluginsign"
	"github.com/bcollard/marina/sdk"
)

// RemoteVersion is one published version of a plugin in an OCI repository.
type RemoteVersion struct {
	Version string `json:"version"`
	Tag     string `json:"tag"`
	Digest  string `json:"digest"`
	// Protocol is the version's dev.marina.plugin.protocol annotation ("" if
	// the publisher did not set it).
	Protocol string `json:"protocol,omitempty"`
	// Platforms it is published for (os/arch; empty for a single manifest
	// without a platform).
	Platforms []string `json:"platforms"`
	// Description is the version's description annotation (publish sets it).
	Description string `json:"description,omitempty"`
	// Signature is this machine's build's signature checked against the
	// keys trusted now: "signed by NAME", "unsigned", "untrusted (...)".
	Signature string `json:"signature,omitempty"`
	// Capabilities are those the version declares, from its
	// dev.marina.plugin.capabilities annotation: [] for none, null when
	// the publisher did not say.
	Capabilities []string `json:"capabilities"`
	// Runnable: this marina speaks its protocol (or it does not say), it
	// is published for this machine (or does not say), and the trust
	// policy lets it install and run (the decision install and every
	// launch take: signature, and pluginTrust.capabilities when the
	// version says what it declares). Why says why not.
	Runnable bool   `json:"runnable"`
	Why      string `json:"why,omitempty"`
}

// maxVersionsListed bounds how many versions Versions inspects (newest first).
const maxVersionsListed = 200

// RepositoryOf returns the oci:// repository of an oci:// source (its tag
// or digest removed), or "" when source is not an oci:// reference.
func RepositoryOf(source string) string {
	if !strings.HasPrefix(source, "oci://") {
		return ""
	}
	ref, err := registry.ParseReference(strings.TrimPrefix(source, "oci://"))
	if err != nil {
		return ""
	}
	return "oci://" + ref.Registry + "/" + ref.Repository
}

// Versions lists the semver-tagged versions of the plugin in an OCI
// repository (oci://HOST[:PORT]/REPOSITORY), newest first, each with its
// protocol and platforms and whether this marina can run it here. It reads
// the tag list and one manifest (or index) per version; no layer.
func (s *Store) Versions(ctx context.Context, source string) ([]RemoteVersion, error) {
	repoRef := RepositoryOf(source)
	if repoRef == "" {
		return nil, newError(ErrInvalid, fmt.Sprintf("%s is not an oci:// reference: only OCI repositories list their versions (oci://HOST[:PORT]/REPOSITORY)", source))
	}
	ref, _ := registry.ParseReference(strings.TrimPrefix(repoRef, "oci://"))
	repo := s.repository(ref)
	tags, err := listTags(ctx, repo, repoRef)
	if err != nil {
		return nil, err
	}
	type tagged struct {
		v   *semver.Version
		tag string
	}
	var vs []tagged
	for _, t := range tags {
		if v, err := semver.StrictNewVersion(strings.TrimPrefix(t, "v")); err == nil {
			vs = append(vs, tagged{v, t})
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].v.GreaterThan(vs[j].v) })
	if len(vs) > maxVersionsListed {
		vs = vs[:maxVersionsListed]
	}
	here := HostPlatform().String()
	var out []RemoteVersion
	for _, t := range vs {
		label := repoRef + ":" + t.tag
		desc, data, err := fetchManifest(ctx, repo, t.tag, label)
		if err != nil {
			return nil, err
		}
		rv := RemoteVersion{Version: t.v.String(), Tag: t.tag, Digest: desc.Digest.String(), Platforms: []string{}}
		var refused error // by the trust policy, from this machine's manifest
		switch desc.MediaType {
		case ocispec.MediaTypeImageIndex, mediaTypeDockerManifestList:
			var idx ocispec.Index
			if err := json.Unmarshal(data, &idx); err != nil {
				return nil, newError(ErrInvalid, fmt.Sprintf("%s: the image index is invalid: %v", label, err))
			}
			for _, m := range idx.Manifests {
				if m.Platform != nil {
					rv.Platforms = append(rv.Platforms, m.Platform.OS+"/"+m.Platform.Architecture)
				}
			}
			if len(idx.Manifests) > 0 {
				// The annotations are on the platform manifests: read this
				// machine's (or the first).
				pick := idx.Manifests[0]
				for _, m := range idx.Manifests {
					if m.Platform != nil && m.Platform.OS+"/"+m.Platform.Architecture == here {
						pick = m
					}
				}
				_, mdata, err := fetchManifest(ctx, repo, pick.Digest.String(), label)
				if err != nil {
					return nil, err
				}
				var man ocispec.Manifest
				if json.Unmarshal(mdata, &man) == nil {
					refused = s.annotate(&rv, &man, repoRef+":"+t.tag)
				}
			}
		default:
			var man ocispec.Manifest
			if err := json.Unmarshal(data, &man); err != nil {
				return nil, newError(ErrInvalid, fmt.Sprintf("%s: the manifest is invalid: %v", label, err))
			}
			refused = s.annotate(&rv, &man, repoRef+":"+t.tag)
		}
		sort.Strings(rv.Platforms)
		rv.Runnable = true
		if rv.Protocol != "" {
			if err := checkProtocol("it", rv.Protocol); err != nil {
				rv.Runnable, rv.Why = false, "needs protocol "+rv.Protocol
			}
		}
		if rv.Runnable && len(rv.Platforms) > 0 && !slices.Contains(rv.Platforms, here) {
			rv.Runnable, rv.Why = false, "no build for "+here
		}
		if rv.Runnable && refused != nil {
			rv.Runnable, rv.Why = false, refused.Error()
		}
		out = append(out, rv)
	}
	return out, nil
}

// annotate fills rv's protocol, description and signature status from a platform
// manifest: the signature annotation is checked against the layer's digest
// (in the manifest: nothing is downloaded) and the keys trusted now. It
// returns the trust policy's refusal of that build (refuseUntrusted and
// refuseCapabilities, as install takes them from the same manifest), as
// the short reason `versions` shows, nil when it may run.
func (s *Store) annotate(rv *RemoteVersion, man *ocispec.Manifest, source string) error {
	rv.Protocol = man.Annotations[OCIProtocolAnnotation]
	rv.Description = man.Annotations[ocispec.AnnotationDescription]
	var sig *pluginsign.Signature
	if raw := man.Annotations[OCISignatureAnnotation]; raw != "" {
		parsed, err := pluginsign.ParseSignature([]byte(raw))
		if err != nil {
			rv.Signature = "invalid (" + err.Error() + ")"
			return errors.New("refused by pluginTrust: " + rv.Signature)
		}
		sig = &parsed
	}
	digest := ""
	if len(man.Layers) == 1 {
		digest = man.Layers[0].Digest.String()
	}
	trust := pluginsign.Check(sig, digest, RepositoryOf(source), s.Trust.Keys)
	rv.Signature = trust.String()
	if s.refuse(source, trust) != nil {
		return errors.New("refused by pluginTrust: " + rv.Signature)
	}
	if caps, ok := annotatedCapabilities(man.Annotations); ok {
		rv.Capabilities = caps
		if bad := (&sdk.Description{Capabilities: caps}).UnknownCapabilities(); len(bad) > 0 {
			return errors.New("declares capabilities this marina does not know: " + strings.Join(bad, ", "))
		}
		if l, denied := s.overLimit(caps, RepositoryOf(source)); l != nil {
			return errors.New("refused by " + l.Rule + ": declares " + strings.Join(denied, ", "))
		}
	}
	return nil
}

// Newest returns the newest runnable version in vs (newest first) that
// satisfies constraint ("" = any release), or nil.
func Newest(vs []RemoteVersion, constraint string) (*RemoteVersion, error) {
	var c *semver.Constraints
	if constraint != "" {
		var err error
		if c, err = semver.NewConstraint(constraint); err != nil {
			return nil, newError(ErrInvalid, fmt.Sprintf("version constraint %q: %v", constraint, err))
		}
	}
	for i := range vs {
		v, err := semver.StrictNewVersion(vs[i].Version)
		if err != nil || !vs[i].Runnable {
			continue
		}
		if c == nil && v.Prerelease() != "" || c != nil && !c.Check(v) {
			continue
		}
		return &vs[i], nil
	}
	return nil, nil
}
