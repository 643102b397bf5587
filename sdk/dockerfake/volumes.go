package dockerfake

import (
	"net/http"
	"sort"
	"strings"
	"time"
)

// volume is a named volume, created by the first container that mounts it.
type volume struct {
	name    string
	created time.Time
}

// volumeRemove answers DELETE /volumes/{name}: 404 when missing, 409 while
// a container (running or not) mounts it, even with force, as Docker does.
func (e *Engine) volumeRemove(w http.ResponseWriter, name string) *apiError {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.volumes[name] == nil {
		return notFound("get %s: no such volume", name)
	}
	var users []string
	for _, c := range e.containers {
		for _, m := range c.mounts() {
			if m.typ == "volume" && m.source == name {
				users = append(users, c.id)
				break
			}
		}
	}
	if len(users) > 0 {
		sort.Strings(users)
		return conflict("remove %s: volume is in use - [%s]", name, strings.Join(users, ", "))
	}
	delete(e.volumes, name)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
