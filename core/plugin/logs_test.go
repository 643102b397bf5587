package plugin

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestParseJSONLine(t *testing.T) {
	tests := []struct {
		line  string
		ok    bool
		level slog.Level
		msg   string
		attrs string
	}{
		{`{"@level":"debug","@message":"hi","@timestamp":"x","hook":"PostUp"}`, true, slog.LevelDebug, "hi", "hook=PostUp"},
		{`{"@level":"INFO","@message":"m","b":2,"a":"1","@module":"sdk"}`, true, slog.LevelInfo, "m", "a=1 b=2 module=sdk"},
		{`{"@level":"warn","@message":"w"}`, true, slog.LevelWarn, "w", ""},
		{`{"@level":"error","@message":"e"}`, true, slog.LevelError, "e", ""},
		{`{"@level":"trace","@message":"t"}`, true, levelTrace, "t", ""},
		{`{"@level":"DEBUG-4","@message":"t"}`, true, slog.LevelDebug, "t", ""},
		{`{"@message":"no level"}`, true, slog.LevelInfo, "no level", ""},
		{`{"msg":"not hclog"}`, false, 0, "", ""},
		{`{broken`, false, 0, "", ""},
		{`plain text`, false, 0, "", ""},
	}
	for _, tc := range tests {
		level, msg, attrs, ok := parseJSONLine(tc.line)
		var as []string
		for _, a := range attrs {
			as = append(as, a.String())
		}
		if ok != tc.ok || ok && (level != tc.level || msg != tc.msg || strings.Join(as, " ") != tc.attrs) {
			t.Errorf("parseJSONLine(%s) = %v %q %q %v", tc.line, level, msg, as, ok)
		}
	}
}

func TestStderrLevels(t *testing.T) {
	rec := newRecorder(levelTrace)
	p := newPluginLog("acme", slog.New(rec), nil)
	lines := []struct {
		line  string
		level slog.Level
	}{
		{"[DEBUG] d", slog.LevelDebug},
		{"[WARN] w", slog.LevelWarn},
		{"[TRACE] t", levelTrace},
		{"[ERROR] e", slog.LevelError},
		{"[INFO] i", slog.LevelInfo},
		{"just text", slog.LevelInfo},
		{"panic: boom", slog.LevelError},
		{"goroutine 1 [running]:", slog.LevelError}, // panic mode sticks
		{`{"@level":"debug","@message":"json after panic"}`, slog.LevelDebug},
	}
	for _, l := range lines {
		p.stderrLine(l.line)
	}
	recs := rec.records()
	if len(recs) != len(lines) {
		t.Fatalf("%d records", len(recs))
	}
	for i, l := range lines {
		if recs[i].level != l.level || recs[i].attrs["plugin"] != "acme" {
			t.Errorf("%q logged at %v with %v, want %v", l.line, recs[i].level, recs[i].attrs, l.level)
		}
	}
	for i := 0; i < 30; i++ {
		p.stderrLine("line")
	}
	if n := len(p.lastLines()); n != stderrLines {
		t.Errorf("kept %d lines, want %d", n, stderrLines)
	}

	// For error reports, Debug lines count only when marina shows them.
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"[INFO] i", "plain"}},
		{slog.LevelDebug, []string{"[DEBUG] d", "[INFO] i", "plain"}},
	} {
		p := newPluginLog("acme", slog.New(newRecorder(tc.level)), nil)
		for _, l := range []string{"[TRACE] t", "[DEBUG] d", "[INFO] i", "plain"} {
			p.stderrLine(l)
		}
		if got := p.lastLines(); strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("at %v: last lines = %q, want %q", tc.level, got, tc.want)
		}
	}
}

func TestLineWriter(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(s string) { got = append(got, s) }}
	for _, chunk := range []string{"one", "\n", "two\nthr", "ee\r\n", "\n", "four"} {
		if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	w.Flush()
	if want := []string{"one", "two", "three", "", "four"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
	}
	got = nil
	_, _ = w.Write([]byte(strings.Repeat("x", maxLine+10)))
	w.Flush()
	if len(got) != 2 || len(got[0]) != maxLine {
		t.Errorf("long line split into %d parts", len(got))
	}
}

func TestHclogAdapter(t *testing.T) {
	rec := newRecorder(slog.LevelInfo)
	h := &hclogAdapter{logger: slog.New(rec), relayAs: "acme-bin"}
	h.Error("plugin process exited", "plugin", "/path/acme-bin", "error", "exit status 1")
	if len(rec.records()) != 0 {
		t.Errorf("go-plugin's messages must be Debug, got %+v", rec.records())
	}
	if h.GetLevel() != hclog.Off || h.IsDebug() {
		t.Errorf("level at Info = %v", h.GetLevel())
	}
	rec = newRecorder(slog.LevelDebug)
	h = &hclogAdapter{logger: slog.New(rec), relayAs: "acme-bin"}
	h.Named("stdio").Warn("x", "plugin", "/path")
	if r := rec.records(); len(r) != 1 || r[0].level != slog.LevelDebug || r[0].attrs["component"] != "go-plugin.stdio" || r[0].attrs["path"] != "/path" {
		t.Errorf("records = %+v", r)
	}
	relay := h.Named("acme-bin")
	relay.Error("stderr line")
	if relay.GetLevel() != hclog.Off || len(rec.records()) != 1 {
		t.Errorf("the stderr relay must be off (pluginLog parses stderr)")
	}
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Plugin: "acme", Version: "1.2.0", Hook: "PostCluster", Cause: "timed out after 2s"}, "plugin acme 1.2.0, hook PostCluster: timed out after 2s"},
		{&Error{Plugin: "acme", Hook: "start", Cause: "exited before the handshake (exit status 1)", Stderr: []string{`{"@level":"error","@message":"no docker","host":"x"}`, "plain"}},
			"plugin acme, start: exited before the handshake (exit status 1)\n  last stderr lines of acme:\n    ERROR no docker host=x\n    plain"},
		{&Error{Plugin: "acme", Version: "1.0.0", Hook: "Describe", Cause: "speaks protocol 1.9"}, "plugin acme 1.0.0, Describe: speaks protocol 1.9"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
	inner := errors.New("inner")
	if !errors.Is(&Error{Err: inner}, inner) {
		t.Error("Unwrap")
	}
}
