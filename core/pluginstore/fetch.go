package pluginstore

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// httpClient returns the configured client or a default one.
func (s *Store) httpClient() *http.Client {
	if s.HTTPClient != nil {
		return s.HTTPClient
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// maxRedirects bounds redirects on a download (release hosts redirect to a CDN).
const maxRedirects = 10

// fetchURL downloads an https source into the staging directory, checks it is
// a binary or .tar.gz before hashing it, and compares its sha256.
func (s *Store) fetchURL(ctx context.Context, source, tmp string, target Platform, want string) (*fetched, error) {
	base := s.httpClient()
	client := *base
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Scheme != "https" {
			return fmt.Errorf("redirected to %s, which is not https; refusing to download a plugin over plain http", req.URL.Redacted())
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if base.CheckRedirect != nil {
			return base.CheckRedirect(req, via)
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, source, nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", source, err)
	}
	req.Header.Set("User-Agent", "marina-plugin-install")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", source, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, sniffLen))
		detail := ""
		if len(strings.TrimSpace(string(body))) > 0 {
			_, what := sniff(body)
			detail = " with " + what
		}
		return nil, newError(ErrNotPlugin, fmt.Sprintf("download %s: the server answered %s%s; check the download link (a private repository's assets need a token)", source, resp.Status, detail))
	}
	max := s.maxBytes()
	if resp.ContentLength > max {
		return nil, newError(ErrInvalid, fmt.Sprintf("download %s: it is %d MiB, larger than the %d MiB limit for a plugin (Store.MaxArtifactBytes); is it really a plugin?", source, resp.ContentLength>>20, max>>20))
	}
	artifact := filepath.Join(tmp, "artifact")
	kind, sum, err := copyArtifact(resp.Body, artifact, max, source, func(kind artifactKind, what string) error {
		if kind != kindUnknown {
			return nil
		}
		if strings.HasPrefix(what, "an HTML page") {
			return newError(ErrNotPlugin, fmt.Sprintf("the URL %s returned an HTML page, not a plugin binary or archive — is it a release page rather than the download link?", source))
		}
		return newError(ErrNotPlugin, fmt.Sprintf("the URL %s returned %s, not a plugin binary or archive; check the download link", source, what))
	})
	if err != nil {
		return nil, err
	}
	if err := checkSum(source, sum, want); err != nil {
		return nil, err
	}
	return s.unpack(artifact, kind, sum, tmp, target, source)
}
