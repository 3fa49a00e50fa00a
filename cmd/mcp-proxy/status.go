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
)

// defaultAdminURL is where `status` looks without --admin or an admin block.
const defaultAdminURL = "http://" + config.DefaultAdminAddress

// adminKeyEnv names the variable `status` reads an API key (or JWT) from, for an admin
// listener behind the auth block; never a flag, which other users could read in ps.
const adminKeyEnv = "MCP_PROXY_API_KEY"

// cmdStatus prints the status of a running proxy, read from its admin listener.
func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := newFlagSet("status", stderr, &c)
	adminURL := fs.String("admin", "", "the admin listener's `URL` (default: the config's admin block, else "+defaultAdminURL+")")
	asJSON := fs.Bool("json", false, "print the status as JSON (what /status serves)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("status", "takes no arguments (got %q)", pos)
	}
	url := *adminURL
	if url == "" {
		if url, err = adminURLOf(fs, c.config, stderr); err != nil {
			return err
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := admin.Fetch(fctx, nil, url, os.Getenv(adminKeyEnv))
	if err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
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
	cfg, err := loadConfig(path, stderr)
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
	var c common
	fs := newFlagSet("reload", stderr, &c)
	adminURL := fs.String("admin", "", "the admin listener's `URL` (default: the config's admin block, else "+defaultAdminURL+")")
	asJSON := fs.Bool("json", false, "print the outcome as JSON (what /reload answers)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("reload", "takes no arguments (got %q)", pos)
	}
	url := *adminURL
	if url == "" {
		if url, err = adminURLOf(fs, c.config, stderr); err != nil {
			return err
		}
	}
	// New upstreams start before the reload answers: give them their start-up time.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	out, err := admin.PostReload(rctx, nil, url, os.Getenv(adminKeyEnv))
	if err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
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
