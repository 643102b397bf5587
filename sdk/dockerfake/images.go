package dockerfake

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

type image struct {
	id      string // sha256:<hex>
	refs    []string
	created time.Time
}

// canonicalRef returns ref in full: registry, repository, and a tag
// (latest when none) or digest — "alpine" is
// "docker.io/library/alpine:latest", as the engine resolves it.
func canonicalRef(ref string) string {
	ref = strings.TrimSpace(ref)
	name, digest, hasDigest := strings.Cut(ref, "@")
	tag := ""
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, tag = name[:i], name[i+1:]
	}
	domain, rest, found := strings.Cut(name, "/")
	if !found || (!strings.ContainsAny(domain, ".:") && domain != "localhost" && strings.ToLower(domain) == domain) {
		domain, rest = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	out := domain + "/" + rest
	if tag != "" {
		out += ":" + tag
	}
	if hasDigest {
		return out + "@" + digest
	}
	if tag == "" {
		out += ":latest"
	}
	return out
}

// familiarRef is Docker's short form of a canonical ref: "alpine:latest".
func familiarRef(ref string) string {
	ref = strings.TrimPrefix(ref, "docker.io/")
	return strings.TrimPrefix(ref, "library/")
}

// addImage makes ref present. e.mu is held.
func (e *Engine) addImage(ref string) *image {
	c := canonicalRef(ref)
	if im := e.findImage(ref); im != nil {
		return im
	}
	sum := sha256.Sum256([]byte(c))
	id := "sha256:" + hex.EncodeToString(sum[:])
	im := &image{id: id, refs: []string{c}, created: time.Now().UTC()}
	e.images[id] = im
	return im
}

// findImage finds an image by reference or id (full, or a prefix of at
// least 4 hex digits). e.mu is held.
func (e *Engine) findImage(ref string) *image {
	c := canonicalRef(ref)
	for _, im := range e.images {
		for _, r := range im.refs {
			if r == c {
				return im
			}
		}
	}
	hexID := strings.TrimPrefix(ref, "sha256:")
	if len(hexID) >= 4 && isHex(hexID) {
		var found *image
		for id, im := range e.images {
			if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), hexID) {
				if found != nil {
					return nil // ambiguous
				}
				found = im
			}
		}
		return found
	}
	return nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// imageInspect answers GET /images/{name}/json.
func (e *Engine) imageInspect(w http.ResponseWriter, name string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	im := e.findImage(name)
	if im == nil {
		return notFound("No such image: %s", name)
	}
	tags := make([]string, 0, len(im.refs))
	for _, r := range im.refs {
		tags = append(tags, familiarRef(r))
	}
	// A map rather than image.InspectResponse: its Config type lives in a
	// module sdk does not require directly.
	writeJSON(w, http.StatusOK, map[string]any{
		"Id":           im.id,
		"RepoTags":     tags,
		"RepoDigests":  []string{},
		"Created":      im.created.Format(time.RFC3339Nano),
		"Architecture": "amd64",
		"Os":           "linux",
		"Size":         0,
		"Config":       map[string]any{"Labels": map[string]string{}},
		"RootFS":       map[string]any{"Type": "layers"},
		"Metadata":     map[string]any{"LastTagTime": "0001-01-01T00:00:00Z"},
	})
	return nil
}

// imagePull answers POST /images/create?fromImage=…&tag=…: the image is
// present afterwards, unless FailPull made that ref fail.
func (e *Engine) imagePull(w http.ResponseWriter, r *http.Request) *apiError {
	q := r.URL.Query()
	from, tag := q.Get("fromImage"), q.Get("tag")
	if from == "" {
		if q.Get("fromSrc") != "" {
			return errf(http.StatusNotImplemented, "dockerfake: image import (POST /images/create?fromSrc=) is not implemented by the fake Docker engine")
		}
		return badRequest("fromImage or fromSrc is required")
	}
	ref := from
	switch {
	case strings.HasPrefix(tag, "sha256:"):
		ref += "@" + tag
	case tag != "":
		ref += ":" + tag
	}
	e.mu.Lock()
	msg, fail := e.failPull[canonicalRef(ref)]
	if !fail {
		e.addImage(ref)
	}
	e.mu.Unlock()
	if fail {
		return errf(http.StatusInternalServerError, "%s", msg)
	}
	sum := sha256.Sum256([]byte(canonicalRef(ref)))
	name := familiarRef(canonicalRef(ref))
	repo, t, _ := strings.Cut(name, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo, t = repo[:i], repo[i+1:]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for _, m := range []map[string]string{
		{"status": "Pulling from " + repo, "id": t},
		{"status": "Digest: sha256:" + hex.EncodeToString(sum[:])},
		{"status": "Status: Downloaded newer image for " + name},
	} {
		_ = enc.Encode(m)
	}
	return nil
}
