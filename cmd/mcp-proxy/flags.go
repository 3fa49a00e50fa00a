package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/cluster"
)

// common holds the flags every command takes.
type common struct {
	config    string
	logLevel  string
	logFormat string
}

// newFlagSet is the flag set of command name, with the common flags when c is not nil.
// It prints nothing itself: parseFlags returns --help and mistakes as errors, which run
// prints with the command's help (help.go). A flag's usage names its value in back
// quotes ("the configuration `FILE`"), as help shows it. (The writer, once where the
// flag package printed, is no longer used.)
func newFlagSet(name string, _ io.Writer, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	if c != nil {
		fs.StringVar(&c.config, "config", "proxy.hcl", "the configuration `FILE`")
		fs.StringVar(&c.logLevel, "log-level", "info", "log `LEVEL`: trace, debug, info, warn or error")
		fs.StringVar(&c.logFormat, "log-format", "json", "log `FORMAT`: json or console; logs always go to stderr")
	}
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
				return nil, helpError{fs}
			}
			return nil, usageErrorf(fs.Name(), "%v", err)
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
	log := zerolog.New(w).Level(level).With().Timestamp().Logger()
	cluster.SetLogger(log) // go-redis's own lines, as JSON on the same stderr
	return log, nil
}
