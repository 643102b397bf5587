package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/bcollard/marina/core/termsafe"
)

// stderrLines is how many of a plugin's last stderr lines an *Error carries.
const stderrLines = 20

// maxLine caps one log line; longer output is split.
const maxLine = 64 * 1024

// The volume of a plugin's stderr marina passes on, per hook (a window ends
// when the dispatcher finishes a hook, a config check, or stops the
// plugin). What is over a budget is counted, the tail of it kept, and one
// line says how much was dropped: a plugin cannot flood the terminal or fill
// the disk.
const (
	// fileBudget is how much of a plugin's stderr the run log takes per hook.
	fileBudget = 1 << 20
	// tailBudget is how much of the stderr over fileBudget is kept (the
	// last lines) and written to the run log when the hook ends.
	tailBudget = maxLine + 1
	// termBudget is how much of a plugin's stderr is re-logged on marina's
	// logger (the terminal) per hook; lines below its level do not count.
	termBudget = 64 * 1024
)

// levelTrace is slog's stand-in for hclog's trace level.
const levelTrace = slog.LevelDebug - 4

// logFileMu serialises writes to Options.LogFile, which every plugin of a
// run shares: each write is one whole line.
var logFileMu sync.Mutex

// pluginLog receives everything a plugin writes to stderr and stdout. It
// re-logs stderr records on marina's logger at their own level with
// plugin=<name>, copies lines to the per-run log file, and keeps the last
// lines for error reports. Everything it passes on is cleaned of terminal
// control sequences (termsafe.Line), and capped per hook (fileBudget,
// termBudget).
type pluginLog struct {
	name    string
	logger  *slog.Logger // marina's logger, with plugin=<name>
	logFile io.Writer

	mu      sync.Mutex
	last    []string // ring of the last stderrLines lines
	inPanic bool     // a Go panic trace started: the rest is logged as errors
	win     window   // this hook's stderr volume
}

// window counts one hook's stderr against the budgets.
type window struct {
	fileUsed, termUsed int
	// over*: lines (and bytes, newlines included) over the budget.
	overFileLines, overFileBytes int
	overTermLines, overTermBytes int
	// tail holds the last lines over fileBudget, at most tailBudget bytes.
	tail     []string
	tailSize int
}

func newPluginLog(name string, logger *slog.Logger, logFile io.Writer) *pluginLog {
	return &pluginLog{name: termsafe.Line(name), logger: logger.With("plugin", termsafe.Line(name)), logFile: logFile}
}

// writeFile appends text (one line, or a few: a panic's stack) to the
// per-run log file, cleaned of control sequences.
func (p *pluginLog) writeFile(prefix, text string) {
	if p.logFile == nil {
		return
	}
	logFileMu.Lock()
	defer logFileMu.Unlock()
	_, _ = io.WriteString(p.logFile, "["+p.name+"] "+prefix+termsafe.Text(text)+"\n")
}

// stderrLine handles one line the plugin wrote to stderr.
func (p *pluginLog) stderrLine(line string) {
	size := len(line) + 1
	p.mu.Lock()
	w := &p.win
	if w.fileUsed+size <= fileBudget {
		w.fileUsed += size
		p.writeFile("", line)
	} else {
		if w.overFileLines == 0 {
			p.writeFile("", fmt.Sprintf("[marina] stderr over %s in this hook: later lines are left out; how many, and the last of them, follow when the hook ends", byteSize(fileBudget)))
		}
		w.overFileLines++
		w.overFileBytes += size
		w.tail = append(w.tail, line)
		w.tailSize += size
		for w.tailSize > tailBudget {
			w.tailSize -= len(w.tail[0]) + 1
			w.tail = w.tail[1:]
		}
	}

	level, isJSON := jsonLevel(line)
	if !isJSON {
		level = p.plainLevel(line)
	}
	enabled := p.logger.Enabled(context.Background(), level)
	shown := enabled && w.termUsed+size <= termBudget
	msg, attrs := line, []slog.Attr(nil)
	if shown && isJSON {
		if lv, m, as, ok := parseJSONLine(line); ok {
			level, msg, attrs = lv, m, as
		}
	}
	// Error reports carry the lines the user would see: Info and above,
	// and Debug too when marina logs at Debug (the log file has them all).
	if level >= slog.LevelInfo || enabled {
		p.last = append(p.last, line)
		if len(p.last) > stderrLines {
			p.last = p.last[len(p.last)-stderrLines:]
		}
	}
	firstOver := false
	switch {
	case shown:
		w.termUsed += size
	case enabled:
		firstOver = w.overTermLines == 0
		w.overTermLines++
		w.overTermBytes += size
	}
	p.mu.Unlock()
	switch {
	case shown:
		p.logger.LogAttrs(context.Background(), level, termsafe.Line(msg), safeAttrs(attrs)...)
	case firstOver:
		p.logger.Warn(fmt.Sprintf("plugin stderr is over %s in this hook: the rest is not shown here; the run log has up to %s of it and its last lines", byteSize(termBudget), byteSize(fileBudget)))
	}
}

// endHook closes the stderr window of a hook: if the plugin wrote more
// than the budgets, it writes to the run log how much was left out and the
// last lines, and warns on marina's logger how much was not shown. The
// next hook starts with fresh budgets.
func (p *pluginLog) endHook() {
	p.mu.Lock()
	w := p.win
	p.win = window{}
	if w.overFileLines > 0 {
		dropped, droppedBytes := w.overFileLines-len(w.tail), w.overFileBytes-w.tailSize
		p.writeFile("", fmt.Sprintf("[marina] %d stderr lines (%s) left out: over %s in one hook; the last %d lines follow", dropped, byteSize(droppedBytes), byteSize(fileBudget), len(w.tail)))
		for _, l := range w.tail {
			p.writeFile("", l)
		}
	}
	p.mu.Unlock()
	if w.overTermLines > 0 {
		p.logger.Warn(fmt.Sprintf("%d plugin stderr lines (%s) were not shown: over %s in one hook; see the run log", w.overTermLines, byteSize(w.overTermBytes), byteSize(termBudget)))
	}
}

// byteSize renders n bytes for a message: "1 MiB", "64 KiB", "312 B".
func byteSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// safeAttrs cleans the keys and values a plugin's JSON log record carries:
// strings as they are, numbers and booleans as they are, anything else as
// JSON, each cleaned of control sequences and capped.
func safeAttrs(attrs []slog.Attr) []slog.Attr {
	for i, a := range attrs {
		a.Key = termsafe.Line(a.Key)
		switch v := a.Value.Any().(type) {
		case string:
			a.Value = slog.StringValue(termsafe.Line(v))
		case float64, bool, nil:
		default:
			b, _ := json.Marshal(v)
			a.Value = slog.StringValue(termsafe.Line(string(b)))
		}
		attrs[i] = a
	}
	return attrs
}

// jsonLevel reads the level of an hclog JSON line (one with "@message")
// without parsing it all: ok is false for other lines.
func jsonLevel(line string) (level slog.Level, ok bool) {
	if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"@message":`) {
		return 0, false
	}
	const key = `"@level":"`
	i := strings.Index(line, key)
	if i < 0 {
		return slog.LevelInfo, true
	}
	rest := line[i+len(key):]
	if j := strings.IndexByte(rest, '"'); j >= 0 {
		rest = rest[:j]
	}
	return parseLevel(rest), true
}

// plainLevel picks the level of a line that is not JSON: the usual
// [LEVEL] prefixes, Error from a Go panic or fatal error on, else Info (a
// plain line on stderr is meant to be seen, unlike go-plugin's Debug).
// Called with p.mu held.
func (p *pluginLog) plainLevel(line string) slog.Level {
	switch {
	case strings.HasPrefix(line, "[TRACE]"):
		return levelTrace
	case strings.HasPrefix(line, "[DEBUG]"):
		return slog.LevelDebug
	case strings.HasPrefix(line, "[INFO]"):
		return slog.LevelInfo
	case strings.HasPrefix(line, "[WARN]"):
		return slog.LevelWarn
	case strings.HasPrefix(line, "[ERROR]"):
		return slog.LevelError
	case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
		p.inPanic = true
		return slog.LevelError
	case p.inPanic:
		return slog.LevelError
	}
	return slog.LevelInfo
}

// stdoutLine handles one line the plugin wrote to stdout after the
// handshake (go-plugin forwards it): stdout is reserved, so it is a
// warning. It counts against the same budgets as stderr.
func (p *pluginLog) stdoutLine(line string) {
	size := len(line) + 1
	p.mu.Lock()
	w := &p.win
	toFile := w.fileUsed+size <= fileBudget
	toTerm := w.termUsed+size <= termBudget
	if toFile {
		w.fileUsed += size
		p.writeFile("stdout: ", line)
	} else {
		w.overFileLines++ // counted, not kept: stdout is not the plugin's log
		w.overFileBytes += size
	}
	if toTerm {
		w.termUsed += size
	} else {
		w.overTermLines++
		w.overTermBytes += size
	}
	p.mu.Unlock()
	if toTerm {
		p.logger.Warn("plugin wrote to stdout, which is reserved for the plugin protocol; plugins must log to stderr (Request.Logger)", "text", termsafe.Line(line))
	}
}

// lastLines returns a copy of the last stderr lines (Debug and Trace
// records only when marina's logger shows them).
func (p *pluginLog) lastLines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.last...)
}

// parseJSONLine parses an hclog JSON line (@level, @message, @timestamp and
// other keys as attributes), as the SDK's logger writes them.
func parseJSONLine(line string) (slog.Level, string, []slog.Attr, bool) {
	if !strings.HasPrefix(line, "{") {
		return 0, "", nil, false
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return 0, "", nil, false
	}
	msg, ok := m["@message"].(string)
	if !ok {
		return 0, "", nil, false
	}
	lv, _ := m["@level"].(string)
	attrs := make([]slog.Attr, 0, len(m))
	for k, v := range m {
		switch k {
		case "@message", "@level", "@timestamp", "@caller":
			continue
		}
		attrs = append(attrs, slog.Any(strings.TrimPrefix(k, "@"), v))
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].Key < attrs[j].Key })
	return parseLevel(lv), msg, attrs, true
}

// parseLevel maps an hclog/slog level name to a slog level; unknown names
// are Info.
func parseLevel(s string) slog.Level {
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.HasPrefix(s, "trace"):
		return levelTrace
	case strings.HasPrefix(s, "debug"):
		return slog.LevelDebug
	case strings.HasPrefix(s, "warn"):
		return slog.LevelWarn
	case strings.HasPrefix(s, "err"):
		return slog.LevelError
	}
	return slog.LevelInfo
}

// summarize renders a raw stderr line for an error message: JSON records
// as "LEVEL message key=value", other lines as they are, capped in length
// and cleaned of control sequences.
func summarize(line string) string {
	out := line
	if level, msg, attrs, ok := parseJSONLine(line); ok {
		var b strings.Builder
		b.WriteString(level.String())
		b.WriteByte(' ')
		b.WriteString(msg)
		for _, a := range attrs {
			fmt.Fprintf(&b, " %s=%v", a.Key, a.Value.Any())
		}
		out = b.String()
	}
	return termsafe.Excerpt(termsafe.Line(out), 500)
}

// lineWriter splits a byte stream into lines for emit. go-plugin writes a
// line and its newline separately, and stdio chunks arbitrarily.
type lineWriter struct {
	mu     sync.Mutex
	buf    []byte
	emit   func(string)
	closed bool // Close was called: later writes are dropped
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
	if w.closed {
		return n, nil
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.buf = append(w.buf, b...)
			for len(w.buf) >= maxLine {
				w.emit(string(w.buf[:maxLine]))
				w.buf = append(w.buf[:0], w.buf[maxLine:]...)
			}
			break
		}
		w.buf = append(w.buf, b[:i]...)
		w.flushLocked()
		b = b[i+1:]
	}
	return n, nil
}

// Flush emits a final unterminated line.
func (w *lineWriter) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.flushLocked()
	}
}

// Close emits a final unterminated line and drops whatever is written
// later. go-plugin's stdio relay can still deliver a chunk after the
// plugin was stopped (it does not wait for its copying goroutine): that
// chunk starts in the middle of a line whose start was just emitted, and a
// line cut there can begin inside an escape sequence whose introducer went
// with the first part, so cleaning it line by line would pass on the
// sequence's payload as text.
func (w *lineWriter) Close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.flushLocked()
	}
	w.closed = true
}

func (w *lineWriter) flushLocked() {
	line := strings.TrimRight(string(w.buf), "\r")
	w.buf = w.buf[:0]
	w.emit(line)
}

// hclogAdapter is the hclog.Logger handed to go-plugin so that it never
// falls back to its default Trace-level logger on stderr. go-plugin's own
// messages (starting, exited, ...) go to marina's logger at Debug with
// plugin=<name>: marina reports every failure itself as a typed *Error.
// The sub-logger go-plugin uses to re-log the plugin's stderr is Off,
// because pluginLog parses stderr itself (with marina's level mapping).
type hclogAdapter struct {
	logger  *slog.Logger
	name    string
	args    []any
	off     bool
	relayAs string // the Named() name go-plugin gives its stderr relay
}

var _ hclog.Logger = (*hclogAdapter)(nil)

func (h *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if h.off || level == hclog.Off {
		return
	}
	lv := slog.LevelDebug
	if level == hclog.Trace {
		lv = levelTrace
	}
	all := append(append([]any{"component", h.componentName()}, h.args...), args...)
	// go-plugin names the plugin by its path under "plugin", which would
	// shadow marina's plugin=<name>.
	for i := 0; i+1 < len(all); i += 2 {
		if k, ok := all[i].(string); ok && k == "plugin" {
			all[i] = "path"
		}
	}
	h.logger.Log(context.Background(), lv, msg, all...)
}

func (h *hclogAdapter) componentName() string {
	if h.name == "" {
		return "go-plugin"
	}
	return "go-plugin." + h.name
}

func (h *hclogAdapter) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogAdapter) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogAdapter) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogAdapter) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogAdapter) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *hclogAdapter) enabled(l slog.Level) bool {
	return !h.off && h.logger.Enabled(context.Background(), l)
}

func (h *hclogAdapter) IsTrace() bool { return h.enabled(levelTrace) }
func (h *hclogAdapter) IsDebug() bool { return h.enabled(slog.LevelDebug) }
func (h *hclogAdapter) IsInfo() bool  { return h.enabled(slog.LevelDebug) }
func (h *hclogAdapter) IsWarn() bool  { return h.enabled(slog.LevelDebug) }
func (h *hclogAdapter) IsError() bool { return h.enabled(slog.LevelDebug) }

func (h *hclogAdapter) ImpliedArgs() []any { return h.args }

func (h *hclogAdapter) With(args ...any) hclog.Logger {
	c := *h
	c.args = append(append([]any(nil), h.args...), args...)
	return &c
}

func (h *hclogAdapter) Name() string { return h.name }

func (h *hclogAdapter) Named(name string) hclog.Logger {
	c := *h
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	if h.name == "" && name == h.relayAs {
		c.off = true
	}
	return &c
}

func (h *hclogAdapter) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = ""
	return c.Named(name)
}

// SetLevel is ignored: marina's logger decides.
func (h *hclogAdapter) SetLevel(hclog.Level) {}

func (h *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case h.off:
		return hclog.Off
	case h.enabled(levelTrace):
		return hclog.Trace
	case h.enabled(slog.LevelDebug):
		return hclog.Debug
	}
	return hclog.Off
}

func (h *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{emit: func(s string) { h.Debug(s) }}
}
