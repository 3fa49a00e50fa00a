package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"
)

// common holds the flags every command takes.
type common struct {
	config    string
	logLevel  string
	logFormat string
}

func newFlagSet(name string, stderr io.Writer, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.config, "config", "proxy.hcl", "configuration file")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "json", "log format: json or console")
	return fs
}

// parseFlags parses args, allowing flags after positional arguments too; everything
// after "--" is positional, as it is (a command and its own flags).
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	return append(pos, rest...), nil
}

func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitError{code: 0}
			}
			return nil, exitError{code: 2, msg: err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// logger builds the process logger: always stderr (stdout carries the protocol).
func (c *common) logger(stderr io.Writer) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(strings.ToLower(c.logLevel))
	if err != nil || c.logLevel == "" {
		return zerolog.Nop(), exitError{code: 2, msg: fmt.Sprintf("invalid --log-level %q", c.logLevel)}
	}
	var w io.Writer = stderr
	switch c.logFormat {
	case "json":
	case "console":
		w = zerolog.ConsoleWriter{Out: stderr, NoColor: true, TimeFormat: "15:04:05.000"}
	default:
		return zerolog.Nop(), exitError{code: 2, msg: fmt.Sprintf("invalid --log-format %q (json or console)", c.logFormat)}
	}
	// Milliseconds: a proxy's events are often closer together than a second. (zerolog
	// keeps the format in a package variable; main owns the process, so it sets it.)
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
