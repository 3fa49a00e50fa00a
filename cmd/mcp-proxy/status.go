package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/mcp-proxy/mcp-proxy/admin"
	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/proxy"
)

// defaultAdminURL is where `status` looks without --admin or an admin block.
const defaultAdminURL = "http://" + config.DefaultAdminAddress

// adminKeyEnv names the variable `status` reads an API key (or JWT) from, for an admin
// listener behind the auth block; never a flag, which other users could read in ps.
const adminKeyEnv = "MCP_PROXY_API_KEY"

// cmdStatus prints the status of a running proxy, read from its admin listener.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	url, asJSON, err := adminFlags("status", "print the status as JSON (what /status serves)", args, stderr)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := admin.Fetch(fctx, nil, url, os.Getenv(adminKeyEnv))
	if err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	if asJSON {
		if err := writeIndented(stdout, st); err != nil {
			return err
		}
	} else if err := admin.WriteText(stdout, st); err != nil {
		return err
	}
	if !st.Ready {
		return exitError{code: 1} // the table says what is not ready
	}
	return nil
}

// adminURLOf is the admin listener's URL from the configuration's admin block: the
// --config file, or ./proxy.hcl when it exists. A listener on every interface is asked
// on loopback. Without a file or an admin block, defaultAdminURL.
func adminURLOf(fs *flag.FlagSet, path string, stderr io.Writer) (string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "config" })
	if _, err := os.Stat(path); !given && errors.Is(err, os.ErrNotExist) {
		return defaultAdminURL, nil
	}
	cfg, err := proxy.Load(path, stderr)
	if err != nil {
		return "", err
	}
	if cfg.Admin == nil {
		return defaultAdminURL, nil
	}
	host, port, err := net.SplitHostPort(cfg.Admin.Address)
	if err != nil { // validated by the config: not expected
		return "", exitError{code: 1, msg: err.Error()}
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// cmdReload asks a running proxy to reload its configuration and prints the outcome.
func cmdReload(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	url, asJSON, err := adminFlags("reload", "print the outcome as JSON (what /reload answers)", args, stderr)
	if err != nil {
		return err
	}
	// New upstreams start before the reload answers: give them their start-up time.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	out, err := admin.PostReload(rctx, nil, url, os.Getenv(adminKeyEnv))
	if err != nil {
		return exitError{code: 1, msg: err.Error() + "\n(a proxy without an admin block reloads on SIGHUP: kill -HUP <pid>)"}
	}
	if asJSON {
		if err := writeIndented(stdout, out); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "reload %s in %.0f ms\n", out.Outcome, out.TookMs)
		for _, ch := range out.Changes {
			fmt.Fprintf(stdout, "  changed: %s\n", ch)
		}
		for _, r := range out.RestartRequired {
			fmt.Fprintf(stdout, "  needs a restart to change: %s\n", r)
		}
		for _, e := range out.Errors {
			fmt.Fprintf(stdout, "  %s\n", e)
		}
	}
	if out.Outcome == admin.ReloadRejected {
		return exitError{code: 1}
	}
	return nil
}

// adminFlags parses the flags of a command that asks the admin listener (status,
// reload) and finds the listener's URL: --admin, else the config's admin block.
func adminFlags(name, jsonHelp string, args []string, stderr io.Writer) (url string, asJSON bool, err error) {
	var c common
	fs := newFlagSet(name, stderr, &c)
	adminURL := fs.String("admin", "", "the admin listener's `URL` (default: the config's admin block, else "+defaultAdminURL+")")
	j := fs.Bool("json", false, jsonHelp)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return "", false, err
	}
	if len(pos) > 0 {
		return "", false, usageErrorf(name, "takes no arguments (got %q)", pos)
	}
	if url = *adminURL; url == "" {
		if url, err = adminURLOf(fs, c.config, stderr); err != nil {
			return "", false, err
		}
	}
	return url, *j, nil
}

// writeIndented writes v as indented JSON, as the admin listener serves it.
func writeIndented(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
