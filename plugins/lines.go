package plugins

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"unicode"

	"github.com/rs/zerolog"
)

// maxLine is the longest line a plugin's output is cut into records at.
const maxLine = 64 << 10

// pluginLines is where what a plugin writes goes: its process's stderr (what it writes
// before sdk.Serve, and what goes to the file descriptor itself: the SDK's logger, the
// standard log package, a panic) and the stderr and stdout that go-plugin's Serve puts in
// place of os.Stderr and os.Stdout (what is written to them after Serve started, carried
// over go-plugin's stdio stream). Each line is one record in the proxy's log, with the
// plugin's name, at the level the line says: JSON lines of hclog (the SDK's logger),
// slog, zerolog or logrus keep their level, message and fields; text lines of hclog,
// slog and logfmt keep their level, and so do lines that start with [LEVEL] or LEVEL:;
// a panic and what follows it are at error; any other line is at info.
type pluginLines struct {
	log     zerolog.Logger
	mu      sync.Mutex
	buf     []byte
	inPanic bool
}

func newPluginLines(log zerolog.Logger) *pluginLines { return &pluginLines{log: log} }

// Write logs every complete line of p and keeps the rest for the next write.
func (w *pluginLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			for len(w.buf) >= maxLine {
				w.line(w.buf[:maxLine])
				w.buf = append(w.buf[:0], w.buf[maxLine:]...)
			}
			break
		}
		w.buf = append(w.buf, p[:i]...)
		w.line(w.buf)
		w.buf = w.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// Flush logs what is left of a line that did not end.
func (w *pluginLines) Flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) > 0 {
		w.line(w.buf)
		w.buf = w.buf[:0]
	}
}

// line logs one line.
func (w *pluginLines) line(b []byte) {
	s := strings.TrimRightFunc(string(b), unicode.IsSpace)
	if strings.TrimSpace(s) == "" {
		return
	}
	if s[0] == '{' {
		if r, ok := jsonRecord(s); ok {
			w.emit(r)
			return
		}
	}
	r := textRecord(s)
	switch {
	case strings.HasPrefix(s, "panic: ") || strings.HasPrefix(s, "fatal error: "):
		w.inPanic = true
		r.level = zerolog.ErrorLevel
	case w.inPanic && !r.leveled:
		r.level = zerolog.ErrorLevel
	}
	w.emit(r)
}

// record is one parsed line.
type record struct {
	level   zerolog.Level
	leveled bool // the line said its level
	msg     string
	fields  [][2]any
}

func (w *pluginLines) emit(r record) {
	ev := w.log.WithLevel(r.level)
	if !ev.Enabled() {
		return
	}
	for _, f := range r.fields {
		k := f[0].(string)
		switch k {
		case zerolog.LevelFieldName, zerolog.MessageFieldName, zerolog.TimestampFieldName, "plugin":
			k = "plugin_" + k // never the record's own
		}
		switch v := f[1].(type) {
		case string:
			ev = ev.Str(k, v)
		case json.RawMessage:
			ev = ev.RawJSON(k, v)
		default:
			ev = ev.Interface(k, v)
		}
	}
	ev.Msg(r.msg)
}

// levelOf reads a level's name as the common loggers write it (slog's "INFO+2" too).
func levelOf(s string) (zerolog.Level, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexAny(s, "+-"); i > 0 {
		s = s[:i]
	}
	switch s {
	case "trace":
		return zerolog.TraceLevel, true
	case "debug", "dbg":
		return zerolog.DebugLevel, true
	case "info", "information", "notice":
		return zerolog.InfoLevel, true
	case "warn", "warning":
		return zerolog.WarnLevel, true
	case "error", "err", "fatal", "panic", "critical", "crit", "alert", "emerg", "emergency":
		return zerolog.ErrorLevel, true
	}
	return zerolog.InfoLevel, false
}

// jsonRecord reads a JSON log line: hclog's @level/@message, or level and msg/message.
// ok is false for JSON that says neither a level nor a message (it is logged as text).
func jsonRecord(s string) (record, bool) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return record{}, false
	}
	str := func(keys ...string) (string, bool) {
		for _, k := range keys {
			if raw, ok := m[k]; ok {
				var v string
				if json.Unmarshal(raw, &v) == nil {
					for _, k := range keys {
						delete(m, k)
					}
					return v, true
				}
			}
		}
		return "", false
	}
	r := record{level: zerolog.InfoLevel}
	lv, hasLevel := str("@level", "level", "severity")
	if hasLevel {
		r.level, r.leveled = levelOf(lv)
	}
	msg, hasMsg := str("@message", "message", "msg")
	if !hasLevel && !hasMsg {
		return record{}, false
	}
	r.msg = msg
	for _, k := range []string{"@timestamp", "time", "timestamp", "ts"} {
		delete(m, k)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		name := strings.TrimPrefix(k, "@") // hclog's @module, @caller
		var v string
		if json.Unmarshal(m[k], &v) == nil {
			r.fields = append(r.fields, [2]any{name, v})
		} else {
			r.fields = append(r.fields, [2]any{name, m[k]})
		}
	}
	return r, true
}

// textRecord reads a text line: logfmt with level= (slog's text handler), or a line whose
// first word after its timestamp is [LEVEL] (hclog's text format) or LEVEL: or LEVEL.
func textRecord(s string) record {
	r := record{level: zerolog.InfoLevel, msg: s}
	if pairs, ok := logfmt(s); ok {
		var lvl string
		for _, p := range pairs {
			if p[0] == "level" {
				lvl = p[1]
			}
		}
		if lv, ok := levelOf(lvl); ok {
			r.level, r.leveled = lv, true
			r.msg = ""
			for _, p := range pairs {
				switch p[0] {
				case "level", "time", "ts":
				case "msg", "message":
					r.msg = p[1]
				default:
					r.fields = append(r.fields, [2]any{p[0], p[1]})
				}
			}
			return r
		}
	}
	rest := s
	for range 2 { // a timestamp first: hclog's one word, the standard log's two
		w, after, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
		if w == "" || w[0] < '0' || w[0] > '9' {
			break
		}
		rest = after
	}
	rest = strings.TrimLeft(rest, " ")
	w, after, _ := strings.Cut(rest, " ")
	name := ""
	switch {
	case len(w) > 2 && w[0] == '[' && w[len(w)-1] == ']':
		name = w[1 : len(w)-1]
	case len(w) > 1 && w[len(w)-1] == ':' && strings.ToUpper(w) == w:
		name = w[:len(w)-1]
	case strings.ToUpper(w) == w:
		name = w
	}
	if lv, ok := levelOf(name); ok && name != "" {
		r.level, r.leveled = lv, true
		r.msg = strings.TrimLeft(after, " ")
	}
	return r
}

// logfmt splits a line of key=value pairs (values quoted as Go strings where they need
// it); ok is false when a word is not a pair.
func logfmt(s string) ([][2]string, bool) {
	var out [][2]string
	for s = strings.TrimLeft(s, " "); s != ""; s = strings.TrimLeft(s, " ") {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 || strings.ContainsAny(s[:eq], " \"") {
			return nil, false
		}
		key, v := s[:eq], s[eq+1:]
		var val string
		if strings.HasPrefix(v, `"`) {
			end := 1
			for end < len(v) && v[end] != '"' {
				if v[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(v) {
				return nil, false
			}
			var err error
			if err = json.Unmarshal([]byte(v[:end+1]), &val); err != nil {
				val = v[1:end]
			}
			s = v[end+1:]
		} else {
			val, s, _ = strings.Cut(v, " ")
		}
		out = append(out, [2]string{key, val})
	}
	return out, len(out) > 0
}
