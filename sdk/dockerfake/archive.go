package dockerfake

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
)

// fsEntry is a file or directory copied into a container.
type fsEntry struct {
	dir      bool
	content  []byte
	mode     int64 // permission bits
	uid, gid int
	mtime    time.Time
}

// lookupPath returns the entry at the clean absolute path p: only the root
// and what was copied in exist (the fake has no image content).
func (c *ctr) lookupPath(p string) (e *fsEntry, exists, isDir bool) {
	if p == "/" {
		return nil, true, true
	}
	if e := c.fs[p]; e != nil {
		return e, true, e.dir
	}
	return nil, false, false
}

// archivePut answers PUT /containers/{id}/archive?path=…: it extracts the
// tar archive (plain or gzip) under path. The fake has no image
// filesystem: any destination directory is taken to exist, unless a file
// copied earlier is there.
func (e *Engine) archivePut(w http.ResponseWriter, r *http.Request, ref string) *apiError {
	q := r.URL.Query()
	dest := q.Get("path")
	noOverwrite := boolQuery(q, "noOverwriteDirNonDir")
	keepOwner := boolQuery(q, "copyUIDGID")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return badRequest("read archive: %v", err)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(ref)
	if c == nil {
		return notFound("No such container: %s", ref)
	}
	if dest == "" || !strings.HasPrefix(dest, "/") {
		return badRequest("dockerfake: path %q is not absolute (the fake has no working directory)", dest)
	}
	dest = path.Clean(dest)
	if _, exists, isDir := c.lookupPath(dest); exists && !isDir {
		return errf(http.StatusInternalServerError, "extraction point is not a directory")
	}

	var rd io.Reader = bytes.NewReader(body)
	if len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b {
		gz, err := gzip.NewReader(rd)
		if err != nil {
			return badRequest("invalid gzip archive: %v", err)
		}
		rd = gz
	}
	// Extract into a copy: a bad archive changes nothing.
	fs := make(map[string]*fsEntry, len(c.fs))
	for k, v := range c.fs {
		fs[k] = v
	}
	tr := tar.NewReader(bufio.NewReader(rd))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badRequest("invalid tar archive: %v", err)
		}
		p := path.Join(dest, h.Name)
		if !strings.HasPrefix(p+"/", dest+"/") && dest != "/" {
			return badRequest("invalid tar entry %q: it leaves %s", h.Name, dest)
		}
		if p == "/" {
			continue
		}
		ent := &fsEntry{mode: h.Mode & 0o7777, mtime: h.ModTime}
		if keepOwner {
			ent.uid, ent.gid = h.Uid, h.Gid
		}
		switch h.Typeflag {
		case tar.TypeDir:
			ent.dir = true
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				return badRequest("invalid tar archive: %v", err)
			}
			ent.content = b
		default:
			return errf(http.StatusNotImplemented, "dockerfake: tar entry %q is of type %q; the fake Docker engine keeps only regular files and directories", h.Name, string(h.Typeflag))
		}
		if old := fs[p]; old != nil && noOverwrite && old.dir != ent.dir {
			if old.dir {
				return badRequest("cannot overwrite directory %q with non-directory %q", p, h.Name)
			}
			return badRequest("cannot overwrite non-directory %q with directory %q", p, h.Name)
		}
		// Missing parents are created, as tar extraction does.
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if x := fs[d]; x == nil {
				fs[d] = &fsEntry{dir: true, mode: 0o755, mtime: time.Now().UTC()}
			} else if !x.dir {
				return badRequest("cannot extract %q: %s is not a directory", h.Name, d)
			}
		}
		if ent.dir {
			if old := fs[p]; old != nil && old.dir {
				old.mode, old.uid, old.gid, old.mtime = ent.mode, ent.uid, ent.gid, ent.mtime
				continue
			}
		}
		// A directory replaced by a file loses what was under it.
		for k := range fs {
			if strings.HasPrefix(k, p+"/") && !ent.dir {
				delete(fs, k)
			}
		}
		fs[p] = ent
	}
	c.fs = fs
	w.WriteHeader(http.StatusOK)
	return nil
}

// archiveGet answers GET (a tar archive of path) and HEAD (only its stat,
// in the X-Docker-Container-Path-Stat header) /containers/{id}/archive.
func (e *Engine) archiveGet(w http.ResponseWriter, r *http.Request, ref string) *apiError {
	p := r.URL.Query().Get("path")
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.findContainer(ref)
	if c == nil {
		return notFound("No such container: %s", ref)
	}
	if !strings.HasPrefix(p, "/") {
		return badRequest("dockerfake: path %q is not absolute (the fake has no working directory)", p)
	}
	clean := path.Clean(p)
	ent, exists, isDir := c.lookupPath(clean)
	if !exists {
		return notFound("Could not find the file %s in container %s", p, c.name)
	}
	base := path.Base(clean)
	stat := container.PathStat{Name: base, Size: 4096, Mode: os.ModeDir | 0o755}
	if ent != nil {
		stat.Mode, stat.Mtime = os.FileMode(ent.mode), ent.mtime
		if ent.dir {
			stat.Mode |= os.ModeDir
		} else {
			stat.Size = int64(len(ent.content))
		}
	}
	js, _ := json.Marshal(stat)
	w.Header().Set("X-Docker-Container-Path-Stat", base64.StdEncoding.EncodeToString(js))
	w.Header().Set("Content-Type", "application/x-tar")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return nil
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(name string, x *fsEntry) {
		h := &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}
		if x != nil {
			h.Mode, h.Uid, h.Gid, h.ModTime = x.mode, x.uid, x.gid, x.mtime
			if !x.dir {
				h.Typeflag, h.Size = tar.TypeReg, int64(len(x.content))
			}
		}
		_ = tw.WriteHeader(h)
		if x != nil && !x.dir {
			_, _ = tw.Write(x.content)
		}
	}
	if !isDir {
		write(base, ent)
	} else {
		prefix := base
		if clean == "/" {
			prefix = "."
		}
		write(prefix+"/", ent)
		var under []string
		for k := range c.fs {
			if clean == "/" || strings.HasPrefix(k, clean+"/") {
				under = append(under, k)
			}
		}
		sort.Strings(under)
		for _, k := range under {
			name := prefix + "/" + strings.TrimPrefix(strings.TrimPrefix(k, clean), "/")
			if c.fs[k].dir {
				name += "/"
			}
			write(name, c.fs[k])
		}
	}
	_ = tw.Close()
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
	return nil
}
