package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/proxy"
	"github.com/mcp-proxy/mcp-proxy/trust"
)

// names is a flag that may be given several times.
type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(s string) error { *n = append(*n, s); return nil }

// vetAll starts the configured upstreams with a vetter that sees every definition (pin at
// least "warn", screen at least "flag", so that nothing is hidden from the command), waits
// for their first handshake, and returns the vetter's verdicts and its lock; stop ends it.
func vetAll(ctx context.Context, c *common, stderr io.Writer) (v *trust.Vetter, cfg *config.Config, startErr error, stop func(), err error) {
	log, err := c.logger(stderr)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if c.logLevel == "info" { // what the command prints says it better than a warning per item
		log = log.Level(zerolog.ErrorLevel)
	}
	cfg, err = proxy.Load(c.config, stderr)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	seen := *cfg
	seen.Proxy.Pin = config.PinWarn
	if seen.Proxy.Screen == config.ScreenOff {
		seen.Proxy.Screen = config.ScreenFlag
	}
	seen.Upstreams = slices.Clone(cfg.Upstreams)
	for i := range seen.Upstreams {
		if seen.Upstreams[i].Screen == config.ScreenOff {
			seen.Upstreams[i].Screen = config.ScreenFlag
		}
	}
	p, err := proxy.New(ctx, &seen, proxy.WithLogger(log), proxy.WithVersion(buildVersion()), proxy.Oneshot())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	startErr = p.Start(ctx)
	return p.Vetter(), cfg, startErr, func() { p.Close() }, nil
}

// cmdLock writes the lock file of the definitions the upstreams list now, or checks it.
func cmdLock(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("lock", stderr, &c)
	update := fs.Bool("update", false, "approve what the upstreams list now: write the lock file with it")
	var only names
	fs.Var(&only, "upstream", "approve only upstream `NAME` (repeatable; the others keep their entries)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("lock", "takes no arguments (got %q)", pos)
	}
	v, cfg, startErr, stop, err := vetAll(ctx, &c, stderr)
	if err != nil {
		return err
	}
	defer stop()
	path := cfg.Proxy.LockFile
	st := v.Status()
	exists := v.Lock() != nil
	if startErr != nil && len(only) == 0 {
		return exitError{code: 1, msg: fmt.Sprintf("some upstreams did not start, so their definitions cannot be read: %v; nothing written (name the others with --upstream to approve them alone)", startErr)}
	}
	printDifferences(stdout, st, only)
	if exists && !*update {
		if n := countDifferences(st, only); n > 0 {
			return exitError{code: 1, msg: fmt.Sprintf("%d definitions differ from %s; approve them with mcp-proxy lock --update", n, path)}
		}
		fmt.Fprintf(stdout, "%s is up to date\n", path)
		return nil
	}
	l, err := v.Approved(only...)
	if err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	if err := trust.WriteLock(path, l); err != nil {
		return exitError{code: 1, msg: fmt.Sprintf("writing the lock file: %v", err)}
	}
	n := 0
	for _, u := range l.Upstreams {
		n += len(u.Tools) + len(u.Prompts) + len(u.Templates)
	}
	fmt.Fprintf(stdout, "wrote %s: %d upstreams, %d definitions\n", path, len(l.Upstreams), n)
	return nil
}

// countDifferences counts the new, changed and removed definitions of the upstreams
// named (all when none).
func countDifferences(st trust.Status, only []string) int {
	n := 0
	for _, u := range st.Upstreams {
		if len(only) > 0 && !slices.Contains(only, u.Upstream) {
			continue
		}
		for _, it := range u.Items {
			if it.Pin != "" {
				n++
			}
		}
	}
	return n
}

// printDifferences prints each definition that differs from the lock file, with the
// fields that changed.
func printDifferences(w io.Writer, st trust.Status, only []string) {
	for _, u := range st.Upstreams {
		if len(only) > 0 && !slices.Contains(only, u.Upstream) {
			continue
		}
		if u.ServerChanged && u.ApprovedServer != nil {
			fmt.Fprintf(w, "%s: server %s %s (approved: %s %s)\n", u.Upstream, u.Server.Name, u.Server.Version, u.ApprovedServer.Name, u.ApprovedServer.Version)
		}
		for _, it := range u.Items {
			if it.Pin == "" {
				continue
			}
			fmt.Fprintf(w, "%s: %s %s: %s\n", u.Upstream, it.Kind, it.Name, it.Pin)
			for _, ch := range it.Changes {
				fmt.Fprintf(w, "    %s\n", ch)
			}
		}
	}
}

// cmdScreen prints the screening findings of the upstreams' definitions.
func cmdScreen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("screen", stderr, &c)
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("screen", "takes no arguments (got %q)", pos)
	}
	v, _, startErr, stop, err := vetAll(ctx, &c, stderr)
	if err != nil {
		return err
	}
	defer stop()
	st := v.Status()
	type row struct {
		Upstream string          `json:"upstream"`
		Kind     trust.Kind      `json:"kind"`
		Name     string          `json:"name"`
		Findings []trust.Finding `json:"findings"`
	}
	rows := []row{}
	serious, accepted := 0, 0
	for _, u := range st.Upstreams {
		accepted += u.Accepted
		for _, it := range u.Items {
			if len(it.Findings) == 0 {
				continue
			}
			rows = append(rows, row{u.Upstream, it.Kind, it.Name, it.Findings})
			if slices.ContainsFunc(it.Findings, trust.Finding.Withholds) {
				serious++
			}
		}
	}
	if *asJSON {
		if err := writeIndented(stdout, rows); err != nil {
			return err
		}
	} else {
		for _, r := range rows {
			fmt.Fprintf(stdout, "%s: %s %s\n", r.Upstream, r.Kind, r.Name)
			for _, f := range r.Findings {
				fmt.Fprintf(stdout, "    %s\n", f)
			}
		}
		switch {
		case len(rows) == 0:
			fmt.Fprintln(stdout, "no findings")
		case accepted > 0:
			fmt.Fprintf(stdout, "%d finding(s) accepted by screen_allow (reported, never withheld)\n", accepted)
		}
	}
	if startErr != nil {
		return exitError{code: 1, msg: "some upstreams did not start: " + startErr.Error()}
	}
	if serious > 0 {
		return exitError{code: 1, msg: fmt.Sprintf("%d definitions have findings that screen = \"withhold\" withholds", serious)}
	}
	return nil
}
