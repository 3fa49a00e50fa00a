package plugins

import (
	"fmt"
	"io"
	"log"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/rs/zerolog"
)

// hclogger is the hclog.Logger go-plugin logs to, writing into the proxy's zerolog with
// the plugin's name: go-plugin's own messages about the plugin process, and the lines
// the plugin writes to its stderr (the SDK's logger writes JSON lines that keep their
// level and fields; other lines arrive at debug, panics at error).
type hclogger struct {
	log     zerolog.Logger
	name    string
	implied []any
	// stderr is the name go-plugin gives the logger it parses the plugin's stderr lines
	// with (the program's base name): that logger is off, since the lines arrive through
	// ClientConfig.Stderr (a pluginLines) instead, parsed in more formats than go-plugin
	// knows.
	stderr string
	off    bool
}

var _ hclog.Logger = (*hclogger)(nil)

func newHCLogger(log zerolog.Logger, program string) *hclogger {
	return &hclogger{log: log, stderr: filepath.Base(program)}
}

func (l *hclogger) Log(level hclog.Level, msg string, args ...any) {
	if l.off {
		return
	}
	var ev *zerolog.Event
	switch level {
	case hclog.Trace:
		ev = l.log.Trace()
	case hclog.Debug, hclog.NoLevel: // not hclog.DefaultLevel: that is Info
		ev = l.log.Debug()
	case hclog.Info:
		ev = l.log.Info()
	case hclog.Warn:
		ev = l.log.Warn()
	default:
		ev = l.log.Error()
	}
	if !ev.Enabled() {
		return
	}
	if l.name != "" {
		ev = ev.Str("source", l.name)
	}
	all := append(append([]any(nil), l.implied...), args...)
	for i := 0; i+1 < len(all); i += 2 {
		k := fmt.Sprint(all[i])
		switch k {
		case "plugin":
			k = "program" // go-plugin's name for the program's path; "plugin" is the block's label
		case zerolog.LevelFieldName, zerolog.MessageFieldName, zerolog.TimestampFieldName:
			k = "plugin_" + k
		}
		switch v := all[i+1].(type) {
		case error:
			ev = ev.AnErr(k, v)
		case string:
			ev = ev.Str(k, v)
		default:
			ev = ev.Interface(k, v)
		}
	}
	ev.Msg(msg)
}

func (l *hclogger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *hclogger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *hclogger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *hclogger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *hclogger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *hclogger) IsTrace() bool { return l.GetLevel() <= hclog.Trace }
func (l *hclogger) IsDebug() bool { return l.GetLevel() <= hclog.Debug }
func (l *hclogger) IsInfo() bool  { return l.GetLevel() <= hclog.Info }
func (l *hclogger) IsWarn() bool  { return l.GetLevel() <= hclog.Warn }
func (l *hclogger) IsError() bool { return l.GetLevel() <= hclog.Error }

func (l *hclogger) ImpliedArgs() []any { return l.implied }

func (l *hclogger) With(args ...any) hclog.Logger {
	n := *l
	n.implied = append(append([]any(nil), l.implied...), args...)
	return &n
}

func (l *hclogger) Name() string { return l.name }

func (l *hclogger) Named(name string) hclog.Logger {
	n := *l
	if n.name == "" && name == l.stderr {
		n.off = true
	}
	if n.name != "" {
		name = n.name + "." + name
	}
	n.name = name
	return &n
}

func (l *hclogger) ResetNamed(name string) hclog.Logger {
	n := *l
	n.name = name
	return &n
}

// SetLevel is ignored: the proxy's log level decides.
func (l *hclogger) SetLevel(hclog.Level) {}

func (l *hclogger) GetLevel() hclog.Level {
	if l.off {
		return hclog.Off
	}
	switch lv := l.log.GetLevel(); {
	case lv <= zerolog.TraceLevel:
		return hclog.Trace
	case lv <= zerolog.DebugLevel:
		return hclog.Debug
	case lv <= zerolog.InfoLevel:
		return hclog.Info
	case lv <= zerolog.WarnLevel:
		return hclog.Warn
	}
	return hclog.Error
}

func (l *hclogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *hclogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer { return lineWriter{l} }

// lineWriter logs what is written to it, one record per write, at info.
type lineWriter struct{ l *hclogger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
