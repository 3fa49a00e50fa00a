package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mcp-proxy/mcp-proxy/admin"
)

// cmdCredentials lists or revokes the principals' per-user credentials of a running
// proxy, or stores a principal's secret, through its admin listener: `credentials list`,
// `credentials revoke` and `credentials set-secret` (the value on stdin). Who may do it
// is the admin listener's decision (an administrator anyone's, any other principal its
// own): its refusal (403) is printed with its reason.
func cmdCredentials(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	const name = "credentials"
	if len(args) == 0 || (args[0] != "list" && args[0] != "revoke" && args[0] != "set-secret" && !strings.HasPrefix(args[0], "-")) {
		return usageErrorf(name, "needs a subcommand: list, revoke or set-secret")
	}
	sub := "list"
	if !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	var c common
	fs := newFlagSet(name, stderr, &c)
	adminURL := fs.String("admin", "", "the admin listener's `URL` (default: the config's admin block, else "+defaultAdminURL+")")
	asJSON := fs.Bool("json", false, "print what the admin listener answers, as JSON")
	upstream := fs.String("upstream", "", "only this upstream's grants (`NAME`)")
	principal := fs.String("principal", "", "only this principal's grants (`NAME`): an identity as list shows it (api_key:alice, jwt:alice for the jwt block's issuer), "+
		"or a bare name when only one way of authenticating knows it; revoke and set-secret: whose (default: yours, the principal of "+adminKeyEnv+")")
	secretName := fs.String("name", "", "set-secret: the secret's `NAME`, as secret(\"NAME\") names it")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf(name, "takes no arguments after the subcommand (got %q)", pos)
	}
	if sub == "set-secret" && (*upstream == "" || *secretName == "") {
		return usageErrorf(name, "set-secret needs --upstream and --name (the value is read from stdin)")
	}
	url := *adminURL
	if url == "" {
		if url, err = adminURLOf(fs, c.config, stderr); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	key := os.Getenv(adminKeyEnv)
	if sub == "set-secret" {
		b, err := io.ReadAll(io.LimitReader(stdin, 64<<10+1))
		if err != nil {
			return exitError{code: 1, msg: "reading the secret from stdin: " + err.Error()}
		}
		value := strings.TrimRight(string(b), "\r\n")
		if value == "" {
			return exitError{code: 1, msg: "no secret on stdin"}
		}
		out, err := admin.PutSecret(rctx, nil, url, key, *upstream, *principal, *secretName, value)
		if err != nil {
			return exitError{code: 1, msg: err.Error()}
		}
		fmt.Fprintf(stdout, "stored secret %s of principal %s for %s (its next session uses it)\n", out.Name, out.Principal, out.Upstream)
		return nil
	}
	if sub == "revoke" {
		out, err := admin.PostRevoke(rctx, nil, url, key, *upstream, *principal)
		if err != nil {
			return exitError{code: 1, msg: err.Error()}
		}
		if *asJSON {
			return writeIndented(stdout, out)
		}
		if len(out.Upstreams) == 0 {
			fmt.Fprintf(stdout, "principal %s had no stored grant", out.Principal)
		} else {
			fmt.Fprintf(stdout, "revoked principal %s's grants for %s", out.Principal, strings.Join(out.Upstreams, ", "))
		}
		fmt.Fprintf(stdout, "; %d upstream session(s) closed\n", out.Sessions)
		if out.Warning != "" {
			fmt.Fprintln(stderr, "warning: "+out.Warning)
		}
		return nil
	}
	grants, err := admin.FetchCredentials(rctx, nil, url, key, *upstream, *principal)
	if err != nil {
		return exitError{code: 1, msg: err.Error()}
	}
	if *asJSON {
		return writeIndented(stdout, map[string]any{"grants": grants})
	}
	return admin.WriteGrants(stdout, grants, time.Now())
}
