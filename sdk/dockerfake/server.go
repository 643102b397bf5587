package dockerfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/system"
)

// apiError is an error answered as the engine does: a status and a JSON body
// {"message": ...}.
type apiError struct {
	status int
	msg    string
}

func errf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return errf(http.StatusNotFound, format, args...)
}

func badRequest(format string, args ...any) *apiError {
	return errf(http.StatusBadRequest, format, args...)
}

func conflict(format string, args ...any) *apiError {
	return errf(http.StatusConflict, format, args...)
}

// covered lists the endpoints the fake serves, for the 501 message.
const covered = "GET/HEAD /_ping, GET /version; containers: POST create, GET json (list), GET {id}/json, POST {id}/start, DELETE {id}, " +
	"PUT/GET/HEAD {id}/archive; images: GET {name}/json, POST create (pull); DELETE volumes/{name}; " +
	"networks: GET, GET {id}, POST create, POST {id}/connect, POST {id}/disconnect, DELETE {id}"

var versioned = regexp.MustCompile(`^/v([0-9]+\.[0-9]+)(/.*)$`)

// ServeHTTP answers one Engine API request.
func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, version := r.URL.Path, ""
	if m := versioned.FindStringSubmatch(p); m != nil {
		version, p = m[1], m[2]
	}
	e.mu.Lock()
	e.requests = append(e.requests, Request{Method: r.Method, Path: p, Query: r.URL.RawQuery, Version: version})
	e.mu.Unlock()

	h := w.Header()
	h.Set("Api-Version", e.api)
	h.Set("Docker-Experimental", "false")
	h.Set("Ostype", "linux")
	h.Set("Server", "Docker/dockerfake (linux)")

	if version != "" {
		if err := e.checkVersion(version); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := e.route(w, r, p); err != nil {
		if err.status == http.StatusNotImplemented {
			e.logf("dockerfake: %s", err.msg)
		}
		writeError(w, err)
	}
}

func (e *Engine) checkVersion(v string) *apiError {
	have, err := parseVersion(v)
	if err != nil {
		return badRequest("malformed API version %q", v)
	}
	top, _ := parseVersion(e.api)
	low, _ := parseVersion(minAPIVersion)
	if less(top, have) {
		return badRequest("client version %s is too new. Maximum supported API version is %s", v, e.api)
	}
	if less(have, low) {
		return badRequest("client version %s is too old. Minimum supported API version is %s, please upgrade your client to a newer version", v, minAPIVersion)
	}
	return nil
}

// route dispatches on the unversioned path p.
func (e *Engine) route(w http.ResponseWriter, r *http.Request, p string) *apiError {
	seg := strings.Split(strings.TrimPrefix(p, "/"), "/")
	m := r.Method
	get := m == http.MethodGet || m == http.MethodHead
	switch {
	case p == "/_ping" && get:
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-cache, no-store, must-revalidate")
		h.Set("Pragma", "no-cache")
		w.WriteHeader(http.StatusOK)
		if m == http.MethodGet {
			_, _ = w.Write([]byte("OK"))
		}
		return nil
	case p == "/version" && m == http.MethodGet:
		writeJSON(w, http.StatusOK, system.VersionResponse{
			Platform:      system.PlatformInfo{Name: "marina dockerfake (an in-memory fake of the Docker Engine API)"},
			Version:       "dockerfake",
			APIVersion:    e.api,
			MinAPIVersion: minAPIVersion,
			Os:            "linux",
			Arch:          runtime.GOARCH,
			Components:    []system.ComponentVersion{{Name: "Engine", Version: "dockerfake", Details: map[string]string{"ApiVersion": e.api, "MinAPIVersion": minAPIVersion}}},
		})
		return nil

	case p == "/containers/create" && m == http.MethodPost:
		return e.containerCreate(w, r)
	case p == "/containers/json" && m == http.MethodGet:
		return e.containerList(w, r)
	case len(seg) == 3 && seg[0] == "containers" && seg[2] == "json" && m == http.MethodGet:
		return e.containerInspect(w, seg[1])
	case len(seg) == 3 && seg[0] == "containers" && seg[2] == "start" && m == http.MethodPost:
		return e.containerStart(w, seg[1])
	case len(seg) == 2 && seg[0] == "containers" && m == http.MethodDelete:
		return e.containerRemove(w, r, seg[1])
	case len(seg) == 3 && seg[0] == "containers" && seg[2] == "archive" && m == http.MethodPut:
		return e.archivePut(w, r, seg[1])
	case len(seg) == 3 && seg[0] == "containers" && seg[2] == "archive" && get:
		return e.archiveGet(w, r, seg[1])

	case p == "/images/create" && m == http.MethodPost:
		return e.imagePull(w, r)
	case strings.HasPrefix(p, "/images/") && strings.HasSuffix(p, "/json") && len(p) > len("/images//json") && m == http.MethodGet:
		return e.imageInspect(w, strings.TrimSuffix(strings.TrimPrefix(p, "/images/"), "/json"))

	case len(seg) == 2 && seg[0] == "volumes" && seg[1] != "prune" && m == http.MethodDelete:
		return e.volumeRemove(w, seg[1])

	case p == "/networks" && m == http.MethodGet:
		return e.networkList(w, r)
	case p == "/networks/create" && m == http.MethodPost:
		return e.networkCreate(w, r)
	case len(seg) == 2 && seg[0] == "networks" && m == http.MethodGet:
		return e.networkInspect(w, seg[1])
	case len(seg) == 2 && seg[0] == "networks" && m == http.MethodDelete:
		return e.networkRemove(w, seg[1])
	case len(seg) == 3 && seg[0] == "networks" && seg[2] == "connect" && m == http.MethodPost:
		return e.networkConnect(w, r, seg[1])
	case len(seg) == 3 && seg[0] == "networks" && seg[2] == "disconnect" && m == http.MethodPost:
		return e.networkDisconnect(w, r, seg[1])
	}
	return errf(http.StatusNotImplemented, "dockerfake: %s %s is not implemented by the fake Docker engine (sdk/dockerfake), "+
		"which covers what sdk/container uses: %s; test this call against a real engine (sdk/dockertest)", m, r.URL.Path, covered)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, errf(http.StatusInternalServerError, "dockerfake: encode response: %v", err))
		return
	}
	// The client reads error bodies as JSON only with exactly this type.
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, err *apiError) {
	writeJSON(w, err.status, map[string]string{"message": err.msg})
}

// decodeBody reads r's JSON body into v.
func decodeBody(r *http.Request, v any) *apiError {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return badRequest("invalid JSON: %v", err)
	}
	return nil
}

// boolQuery reads a boolean query parameter as the engine does ("1", "true").
func boolQuery(q url.Values, key string) bool {
	v := strings.ToLower(strings.TrimSpace(q.Get(key)))
	return v != "" && v != "0" && v != "false" && v != "no" && v != "off"
}

// filters parses the "filters" query parameter: {"label":{"a=b":true}} or
// the older {"label":["a=b"]}.
func parseFilters(q url.Values) (map[string][]string, *apiError) {
	raw := q.Get("filters")
	out := map[string][]string{}
	if raw == "" {
		return out, nil
	}
	var m map[string]map[string]bool
	if err := json.Unmarshal([]byte(raw), &m); err == nil {
		for k, vs := range m {
			for v, ok := range vs {
				if ok {
					out[k] = append(out[k], v)
				}
			}
		}
		return out, nil
	}
	var l map[string][]string
	if err := json.Unmarshal([]byte(raw), &l); err != nil {
		return nil, badRequest("invalid filter: %v", err)
	}
	return l, nil
}

// checkFilters refuses filter keys outside known; those in valid (Docker's
// but not the fake's) are answered 501.
func checkFilters(f map[string][]string, known, valid []string) *apiError {
	for k := range f {
		if contains(known, k) {
			continue
		}
		if contains(valid, k) {
			return errf(http.StatusNotImplemented, "dockerfake: the filter %q is not implemented by the fake Docker engine (it filters by %s)", k, strings.Join(known, ", "))
		}
		return badRequest("invalid filter '%s'", k)
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// matchLabels reports whether labels carry every "key" or "key=value" of want.
func matchLabels(labels map[string]string, want []string) bool {
	for _, w := range want {
		k, v, hasValue := strings.Cut(w, "=")
		have, ok := labels[k]
		if !ok || (hasValue && have != v) {
			return false
		}
	}
	return true
}

type version struct{ major, minor int }

func parseVersion(s string) (version, error) {
	a, b, ok := strings.Cut(s, ".")
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || x < 0 || y < 0 {
		return version{}, fmt.Errorf("%q is not an API version like 1.41", s)
	}
	return version{x, y}, nil
}

func less(a, b version) bool {
	return a.major < b.major || (a.major == b.major && a.minor < b.minor)
}
