package plugins

import (
	"fmt"
	"io"
	"log"
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
}

var _ hclog.Logger = (*hclogger)(nil)

func newHCLogger(log zerolog.Logger) *hclogger { return &hclogger{log: log} }

func (l *hclogger) Log(level hclog.Level, msg string, args ...any) {
	var ev *zerolog.Event
	switch level {
	case hclog.Trace:
		ev = l.log.Trace()
	case hclog.Debug, hclog.NoLevel, hclog.DefaultLevel:
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

func (l *hclogger) IsTrace() bool { return l.log.GetLevel() <= zerolog.TraceLevel }
func (l *hclogger) IsDebug() bool { return l.log.GetLevel() <= zerolog.DebugLevel }
func (l *hclogger) IsInfo() bool  { return l.log.GetLevel() <= zerolog.InfoLevel }
func (l *hclogger) IsWarn() bool  { return l.log.GetLevel() <= zerolog.WarnLevel }
func (l *hclogger) IsError() bool { return l.log.GetLevel() <= zerolog.ErrorLevel }

func (l *hclogger) ImpliedArgs() []any { return l.implied }

func (l *hclogger) With(args ...any) hclog.Logger {
	n := *l
	n.implied = append(append([]any(nil), l.implied...), args...)
	return &n
}

func (l *hclogger) Name() string { return l.name }

func (l *hclogger) Named(name string) hclog.Logger {
	n := *l
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
