package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/bcollard/marina/sdk"
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

// TestLineWriterClose: what go-plugin's stdio relay delivers after the
// plugin was stopped is dropped, not emitted as a line of its own. Such a
// chunk starts mid-line, possibly inside an escape sequence whose
// introducer was flushed with the line's start: emitted, it would carry the
// sequence's payload as text ("pwned" of an OSC title; seen in CI as a
// flake of TestStderrFloodAndEscapes).
func TestLineWriterClose(t *testing.T) {
	var got []string
	w := &lineWriter{emit: func(s string) { got = append(got, s) }}
	_, _ = w.Write([]byte("whole line\n\x1b]0;"))
	w.Close()
	if n, err := w.Write([]byte("pwned\x07 rest of the line\nnext line\n")); n != 34 || err != nil {
		t.Errorf("Write after Close = %d, %v; want every byte taken, no error", n, err)
	}
	w.Close()
	if want := []string{"whole line", "\x1b]0;"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines = %q, want %q", got, want)
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

// TestStderrBudgets: per hook, the run log takes fileBudget of a plugin's
// stderr, then says how much it left out and keeps the last tailBudget;
// marina's logger takes termBudget (of the records at its level), then
// warns once, and says at the end of the hook how much it did not show.
// The next hook starts afresh.
func TestStderrBudgets(t *testing.T) {
	rec := newRecorder(slog.LevelInfo)
	var file bytes.Buffer
	p := newPluginLog("acme", slog.New(rec), &file)
	line := func(i int) string { return fmt.Sprintf("%-1023d", i) } // 1 KiB with its newline
	const n = fileBudget/1024 + 300
	for i := 0; i < n; i++ {
		p.stderrLine(line(i))
	}
	p.endHook()

	got := strings.Split(strings.TrimSuffix(file.String(), "\n"), "\n")
	var want []string
	for i := 0; i < fileBudget/1024; i++ {
		want = append(want, "[acme] "+line(i))
	}
	want = append(want,
		"[acme] [marina] stderr over 1 MiB in this hook: later lines are left out; how many, and the last of them, follow when the hook ends",
		"[acme] [marina] 236 stderr lines (236 KiB) left out: over 1 MiB in one hook; the last 64 lines follow")
	for i := n - 64; i < n; i++ {
		want = append(want, "[acme] "+line(i))
	}
	if len(got) != len(want) {
		t.Fatalf("the run log has %d lines, want %d; its end:\n%s", len(got), len(want), strings.Join(got[max(0, len(got)-70):len(got)-64], "\n"))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("run log line %d = %.120q, want %.120q", i, got[i], want[i])
		}
	}

	recs := rec.records()
	shown := termBudget / 1024
	if len(recs) != shown+2 {
		t.Fatalf("%d records on marina's logger, want %d lines and 2 warnings", len(recs), shown)
	}
	for i := 0; i < shown; i++ {
		if recs[i].msg != line(i) {
			t.Fatalf("record %d = %.60q, want line %d", i, recs[i].msg, i)
		}
	}
	if w := recs[shown]; w.level != slog.LevelWarn || w.msg != "plugin stderr is over 64 KiB in this hook: the rest is not shown here; the run log has up to 1 MiB of it and its last lines" {
		t.Errorf("first warning = %v %q", w.level, w.msg)
	}
	if w := recs[shown+1]; w.level != slog.LevelWarn || w.msg != "1260 plugin stderr lines (1.2 MiB) were not shown: over 64 KiB in one hook; see the run log" || w.attrs["plugin"] != "acme" {
		t.Errorf("end-of-hook warning = %v %q %v", w.level, w.msg, w.attrs)
	}
	if last := p.lastLines(); len(last) != stderrLines || last[stderrLines-1] != line(n-1) {
		t.Errorf("the error report's last lines end with %.40q, want the last line", last[len(last)-1])
	}

	// The next hook has fresh budgets, and nothing to report.
	file.Reset()
	p.stderrLine("next hook")
	p.endHook()
	if file.String() != "[acme] next hook\n" {
		t.Errorf("next hook's run log = %q", file.String())
	}
	if recs := rec.records(); len(recs) != shown+3 || recs[shown+2].msg != "next hook" {
		t.Errorf("next hook's line not shown: %d records", len(recs))
	}

	// Records below the logger's level do not use the terminal's budget.
	rec = newRecorder(slog.LevelInfo)
	p = newPluginLog("acme", slog.New(rec), nil)
	for i := 0; i < 2*termBudget/1024; i++ {
		p.stderrLine(`{"@level":"debug","@message":"` + strings.Repeat("d", 1000) + `"}`)
	}
	for i := 0; i < termBudget/1024; i++ {
		p.stderrLine(line(i))
	}
	p.endHook()
	if recs := rec.records(); len(recs) != termBudget/1024 || len(rec.find("not shown")) != 0 {
		t.Errorf("%d records, want the %d Info lines and no warning", len(recs), termBudget/1024)
	}
}

// TestStderrCleaned: what a plugin's stderr carries reaches marina's
// logger and the run log without terminal control sequences, in the
// message and in JSON attributes alike; the raw lines kept for error
// reports are cleaned when the error is rendered.
func TestStderrCleaned(t *testing.T) {
	rec := newRecorder(slog.LevelInfo)
	var file bytes.Buffer
	p := newPluginLog("acme\x1b[2J", slog.New(rec), &file)
	p.stderrLine(`{"@level":"warn","@message":"\u001b]0;pwned\u0007disk \u001b[31mfull\u001b[0m","path\u001b[8m":"/x\u001b[1A","n":3,"obj":{"k":"\u009b31m v"}}`)
	p.stderrLine("\x1b]52;c;cHduZWQ=\x07plain \x1b[1mline\r")
	p.writeFile("", "panic in PostUp: boom\x1b[31m\ngoroutine 1 [running]:")

	recs := rec.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if r := recs[0]; r.level != slog.LevelWarn || r.msg != "disk full" || r.attrs["path"] != "/x" || r.attrs["n"] != "3" || r.attrs["obj"] != `{"k":" v"}` || r.attrs["plugin"] != "acme" {
		t.Errorf("JSON record = %v %q %q", r.level, r.msg, r.attrs)
	}
	if r := recs[1]; r.msg != "plain line" {
		t.Errorf("plain record = %q", r.msg)
	}
	if f := file.String(); !strings.Contains(f, "[acme] plain line\n") || !strings.Contains(f, "[acme] panic in PostUp: boom\ngoroutine 1 [running]:\n") || strings.ContainsAny(f, "\x1b\x07\r") {
		t.Errorf("run log = %q", f)
	}
	// The raw lines are kept for error reports; Error() cleans them.
	e := &Error{Plugin: "acme", Hook: "PostUp", Kind: KindHook, Cause: "failed", Stderr: p.lastLines()}
	if got := e.Error(); got != "plugin acme, hook PostUp: failed\n  last stderr lines of acme:\n    WARN disk full n=3 obj=map[k: v] path=/x\n    plain line" {
		t.Errorf("Error() = %q", got)
	}
}

// TestErrorMessageCleaned: a plugin's text in *Error, *ConfigError and
// *DependencyError is shown without terminal control sequences (newlines
// kept in a multi-line cause) and capped.
func TestErrorMessageCleaned(t *testing.T) {
	e := &Error{Plugin: "acme", Version: "1.0.0\x1b[8m", Hook: "PostUp", Kind: KindHook, Cause: "\x1b]0;pwned\x07\x1b[31mbroken\x1b[0m\nsecond\r\x1b[2Kline\u202e"}
	if got, want := e.Error(), "plugin acme 1.0.0, hook PostUp: broken\nsecondline"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Plugin: "acme", Hook: "PostUp", Cause: strings.Repeat("y", 100000)}
	if got := e.Error(); len(got) > maxCause+100 || !strings.HasSuffix(got, "y...") {
		t.Errorf("a 100 kB cause renders as %d bytes, want it cut at %d", len(got), maxCause)
	}
	ce := &ConfigError{Plugin: "acme", Diagnostics: []sdk.Diagnostic{{Path: "pools\x1b[1A", Summary: "bad\x1b]0;t\x07 value", Detail: "see\nthe docs\x07"}}}
	if got, want := ce.Error(), "plugin acme: config field pools: bad value (see the docs)"; got != want {
		t.Errorf("ConfigError = %q, want %q", got, want)
	}
	de := &DependencyError{Plugin: "acme", Message: "plugin acme needs base \x1b[31m>=2\x1b[0m\n  fix it"}
	if got, want := de.Error(), "plugin acme needs base >=2\n  fix it"; got != want {
		t.Errorf("DependencyError = %q, want %q", got, want)
	}
}

// TestCheckOutputs: the limits on outputs, against what the plugin
// published before (a key published again replaces its value).
func TestCheckOutputs(t *testing.T) {
	desc := &sdk.Description{Outputs: []string{"a", "b", "c"}}
	val := strings.Repeat("v", MaxOutputValue)
	acc, dropped, cause := checkOutputs(desc, nil, map[string]string{"a": "1", "zz": "2", "b\x1b[8m": "3"})
	if cause != "" || len(acc) != 1 || acc["a"] != "1" || strings.Join(dropped, ",") != "b\x1b[8m,zz" {
		t.Errorf("undeclared: accepted %v, dropped %q, cause %q", acc, dropped, cause)
	}
	if w := droppedOutputsWarning(desc, dropped); !strings.Contains(w, `"b", "zz"; dropped`) || !strings.Contains(w, "declared: a, b, c") {
		t.Errorf("warning = %q", w)
	}
	if _, _, cause := checkOutputs(desc, nil, map[string]string{"a": val}); cause != "" {
		t.Errorf("a value of exactly %d bytes refused: %s", MaxOutputValue, cause)
	}
	if _, _, cause := checkOutputs(desc, nil, map[string]string{"a": val + "v"}); !strings.Contains(cause, `returned output "a" of 64.0 KiB; marina takes at most 64 KiB per output value`) {
		t.Errorf("over the value limit: cause %q", cause)
	}
	// Published before: 1 MiB minus what a and b take now; replacing a
	// with a value of the same size fits, adding b does not.
	prev := map[string]string{"a": val, "c": strings.Repeat("c", MaxOutputsTotal-MaxOutputValue-2)}
	if _, _, cause := checkOutputs(desc, prev, map[string]string{"a": val}); cause != "" {
		t.Errorf("replacing a value of the same size refused: %s", cause)
	}
	if _, _, cause := checkOutputs(desc, prev, map[string]string{"b": "x"}); !strings.Contains(cause, "published outputs of 1.0 MiB in all; marina takes at most 1 MiB for all of a plugin's outputs") {
		t.Errorf("over the total: cause %q", cause)
	}
}
