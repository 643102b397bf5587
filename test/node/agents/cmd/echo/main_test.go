package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEcho(t *testing.T) {
	id := identity{Hostname: "echo-7d9f", Pod: "echo-7d9f", Namespace: "demo", Message: "hello"}
	srv := httptest.NewServer(newHandler(id))
	defer srv.Close()

	for _, path := range []string{"/", "/some/path"} {
		t.Run(path, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "echo.default.dev.demo.internal"
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			var got map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"hostname":  "echo-7d9f",
				"pod":       "echo-7d9f",
				"namespace": "demo",
				"host":      "echo.default.dev.demo.internal",
				"path":      path,
				"message":   "hello",
			}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
			if !strings.HasPrefix(got["remote"], "127.0.0.1:") {
				t.Errorf("remote = %q, want 127.0.0.1:<port>", got["remote"])
			}
			if len(got) != 7 {
				t.Errorf("got %d fields, want 7: %v", len(got), got)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	srv := httptest.NewServer(newHandler(identity{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("GET /healthz = %d %q, want 200 \"ok\"", resp.StatusCode, body)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	rec := httptest.NewRecorder()
	newHandler(identity{}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST / = %d, want 405", rec.Code)
	}
}

func TestGet(t *testing.T) {
	srv := httptest.NewServer(newHandler(identity{Pod: "p"}))
	defer srv.Close()
	var out strings.Builder
	if code := get([]string{srv.URL + "/x", "5s"}, &out); code != 0 || !strings.Contains(out.String(), `"path":"/x"`) {
		t.Fatalf("get = %d, %q", code, out.String())
	}
	// Nothing listens on a closed server's address: exit 1 after the timeout.
	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	out.Reset()
	if code := get([]string{url, "1s"}, &out); code != 1 || out.Len() != 0 {
		t.Fatalf("get of a closed address = %d, %q; want 1 and no output", code, out.String())
	}
	if code := get(nil, &out); code != 2 {
		t.Fatalf("get without a URL = %d, want 2", code)
	}
}
