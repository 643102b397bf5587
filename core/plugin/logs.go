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
)

// stderrLines is how many of a plugin's last stderr lines an *Error carries.
const stderrLines = 20

// maxLine caps one log line; longer output is split.
const maxLine = 64 * 1024

// levelTrace is slog's stand-in for hclog's trace level.
const levelTrace = slog.LevelDebug - 4

// logFileMu serialises writes to Options.LogFile, which every plugin of a
// run shares: each write is one whole line.
var logFileMu sync.Mutex

// pluginLog receives everything a plugin writes to stderr and stdout. It
// re-logs stderr records on marina's logger at their own level with
// plugin=<name>, copies raw lines to the per-run log file, and keeps the
// last lines for error reports.
type pluginLog struct {
	name    string
	logger  *slog.Logger // marina's logger, with plugin=<name>
	logFile io.Writer

	mu      sync.Mutex
	last    []string // ring of the last stderrLines lines
	inPanic bool     // a Go panic trace started: the rest is logged as errors
}

func newPluginLog(name string, logger *slog.Logger, logFile io.Writer) *pluginLog {
	return &pluginLog{name: name, logger: logger.With("plugin", name), logFile: logFile}
}

// writeFile appends one raw line to the per-run log file.
func (p *pluginLog) writeFile(prefix, line string) {
	if p.logFile == nil {
		return
	}
	logFileMu.Lock()
	defer logFileMu.Unlock()
	_, _ = io.WriteString(p.logFile, "["+p.name+"] "+prefix+line+"\n")
}

// stderrLine handles one line the plugin wrote to stderr.
func (p *pluginLog) stderrLine(line string) {
	p.writeFile("", line)
	p.mu.Lock()
	level, msg, attrs, ok := parseJSONLine(line)
	if !ok {
		level, msg = p.plainLevel(line), line
	}
	// Error reports carry the lines the user would see: Info and above,
	// and Debug too when marina logs at Debug (the log file has them all).
	if level >= slog.LevelInfo || p.logger.Enabled(context.Background(), level) {
		p.last = append(p.last, line)
		if len(p.last) > stderrLines {
			p.last = p.last[len(p.last)-stderrLines:]
		}
	}
	p.mu.Unlock()
	p.logger.LogAttrs(context.Background(), level, msg, attrs...)
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
// handshake (go-plugin forwards it): stdout is reserved, so it is a warning.
func (p *pluginLog) stdoutLine(line string) {
	p.writeFile("stdout: ", line)
	p.logger.Warn("plugin wrote to stdout, which is reserved for the plugin protocol; plugins must log to stderr (Request.Logger)", "text", line)
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
// as "LEVEL message key=value", other lines as they are, capped in length.
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
	if len(out) > 500 {
		out = out[:500] + "..."
	}
	return out
}

// lineWriter splits a byte stream into lines for emit. go-plugin writes a
// line and its newline separately, and stdio chunks arbitrarily.
type lineWriter struct {
	mu   sync.Mutex
	buf  []byte
	emit func(string)
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(b)
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
