package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// Grant is what the admin listener shows of one principal's credential for one
// upstream (docs/credentials.md): never a token or a secret's value.
type Grant struct {
	Upstream  string    `json:"upstream"`
	Principal string    `json:"principal"`
	Mode      string    `json:"mode"`
	Subject   string    `json:"subject,omitempty"` // whom the upstream knows it as, when known
	Scopes    []string  `json:"scopes,omitempty"`
	Issuer    string    `json:"issuer,omitempty"`
	Expiry    time.Time `json:"expiry,omitzero"`
	Refresh   bool      `json:"refresh"`           // it has a refresh token
	Secrets   []string  `json:"secrets,omitempty"` // the names of a principal's secrets
	Created   time.Time `json:"created,omitzero"`
	Updated   time.Time `json:"updated,omitzero"`
}

// Revoked is the outcome of a revocation.
type Revoked struct {
	Principal string   `json:"principal"`
	Upstreams []string `json:"upstreams"` // those where the principal had a grant
	// Sessions are the principal's upstream sessions closed (by this replica), so that
	// nothing keeps using what was revoked.
	Sessions int `json:"sessions_closed"`
	// Warning, when set, says what went wrong beside the revocation, which applied
	// (the other replicas could not be told at once).
	Warning string `json:"warning,omitempty"`
}

// Credentials lists and revokes the principals' per-user credentials, for GET
// /credentials and POST /credentials/revoke.
type Credentials interface {
	// List returns the grants of upstream ("" for all) and principal ("" for all).
	List(ctx context.Context, upstream, principal string) ([]Grant, error)
	// Revoke ends principal's grants with upstream ("" for every upstream).
	Revoke(ctx context.Context, upstream, principal string) (*Revoked, error)
	// Summary says, per upstream with per-user credentials, its mode and how many
	// principals have a credential for it (for /status).
	Summary(ctx context.Context) map[string]CredentialSummary
	// SetSecret stores principal's secret name for upstream (mode "secret" without a
	// secrets file); an *InputError when the request is wrong.
	SetSecret(ctx context.Context, upstream, principal, name, value string) error
	// Resolve is the identity (principal.ID) a request means by name: an identity as
	// it is, or a bare name the configuration makes unambiguous; an *InputError
	// otherwise. The principals of List, Revoke and SetSecret are identities.
	Resolve(name string) (string, error)
}

// InputError is a request the admin listener refuses as the caller's mistake (400).
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// maxSecret bounds a secret's value.
const maxSecret = 64 << 10

// credentialsOf begins a credentials request: the principal whose credentials it may
// verb (whose, from ?principal=), required when need is set; false once it has
// answered (no per-user upstream, refused, no principal).
func (s *Server) credentialsOf(w http.ResponseWriter, r *http.Request, verb string, need bool) (string, bool) {
	if s.opts.Credentials == nil {
		http.Error(w, "no upstream has per-user credentials", http.StatusNotFound)
		return "", false
	}
	who, ok := s.whose(w, r, s.callerOf(r), r.URL.Query().Get("principal"), verb)
	if ok && need && who == "" {
		http.Error(w, "principal is required", http.StatusBadRequest)
		return "", false
	}
	return who, ok
}

// serveSetSecret stores the request's body as ?principal='s secret ?name for ?upstream
// (the caller's own without ?principal=; another's for an administrator only).
func (s *Server) serveSetSecret(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	who, ok := s.credentialsOf(w, r, "set", true)
	if !ok {
		return
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxSecret+1))
	if err != nil || len(b) > maxSecret {
		http.Error(w, "the secret is unreadable or larger than 64 KiB", http.StatusBadRequest)
		return
	}
	err = s.opts.Credentials.SetSecret(r.Context(), q.Get("upstream"), who, q.Get("name"), string(b))
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		http.Error(w, ie.Msg, http.StatusBadRequest)
		return
	case err != nil:
		s.opts.Log.Warn().Err(err).Msg("admin: storing a secret")
		http.Error(w, "storing the secret failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	s.opts.Log.Info().Str("upstream", q.Get("upstream")).Str("principal", who).Str("name", q.Get("name")).
		Msg("admin: a principal's secret stored")
	writeJSON(w, http.StatusOK, StoredSecret{Upstream: q.Get("upstream"), Principal: who, Name: q.Get("name")})
}

// StoredSecret is what PUT /credentials/secret answers: whose secret was stored (never
// its value).
type StoredSecret struct {
	Upstream  string `json:"upstream"`
	Principal string `json:"principal"` // the identity
	Name      string `json:"name"`
}

// PutSecret stores principal's secret name for upstream through the admin listener at
// baseURL (`mcp-proxy credentials set-secret`; principal "" is the caller's own), and
// returns whose it stored.
func PutSecret(ctx context.Context, client *http.Client, baseURL, token, upstream, principal, name, value string) (*StoredSecret, error) {
	if client == nil {
		client = http.DefaultClient
	}
	u := strings.TrimSuffix(baseURL, "/") + "/credentials/secret?" + url.Values{"upstream": {upstream}, "principal": {principal}, "name": {name}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, strings.NewReader(value))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s to store the secret: %w", baseURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/credentials/secret answered %d %s: %s", strings.TrimSuffix(baseURL, "/"), resp.StatusCode, http.StatusText(resp.StatusCode), firstLine(string(body)))
	}
	var out StoredSecret
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("the answer from %s is not what mcp-proxy serves: %w", baseURL, err)
	}
	return &out, nil
}

// CredentialSummary is one per-user upstream's credentials in the status.
type CredentialSummary struct {
	Mode       string
	Principals int
}

// serveCredentials lists the grants: ?upstream= and ?principal= narrow the list; a
// principal that is not an administrator sees its own only.
func (s *Server) serveCredentials(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	who, ok := s.credentialsOf(w, r, "list", false)
	if !ok {
		return
	}
	l, err := s.opts.Credentials.List(r.Context(), q.Get("upstream"), who)
	if err != nil {
		s.opts.Log.Warn().Err(err).Msg("admin: listing credentials")
		http.Error(w, "listing the credentials failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if l == nil {
		l = []Grant{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"grants": l})
}

// serveRevoke revokes ?principal='s grants (with ?upstream= only, when given): the
// caller's own without ?principal=; another's for an administrator only.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, ok := s.credentialsOf(w, r, "revoke", true)
	if !ok {
		return
	}
	out, err := s.opts.Credentials.Revoke(r.Context(), q.Get("upstream"), p)
	if err != nil {
		s.opts.Log.Warn().Err(err).Msg("admin: revoking credentials")
		http.Error(w, "revoking failed: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	s.opts.Log.Info().Str("principal", p).Strs("upstreams", out.Upstreams).Int("sessions_closed", out.Sessions).Msg("admin: credentials revoked")
	writeJSON(w, http.StatusOK, out)
}

// FetchCredentials reads the grants from the admin listener at baseURL (`mcp-proxy
// credentials list`).
func FetchCredentials(ctx context.Context, client *http.Client, baseURL, token, upstream, principal string) ([]Grant, error) {
	path := "/credentials?" + url.Values{"upstream": {upstream}, "principal": {principal}}.Encode()
	status, body, err := exchange(ctx, client, http.MethodGet, baseURL, path, token, 16<<20)
	if err != nil {
		return nil, fmt.Errorf("asking %s for the credentials: %w", baseURL, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s/credentials answered %d %s: %s", strings.TrimSuffix(baseURL, "/"), status, http.StatusText(status), firstLine(string(body)))
	}
	var out struct {
		Grants []Grant `json:"grants"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("the credentials from %s are not what mcp-proxy serves: %w", baseURL, err)
	}
	return out.Grants, nil
}

// PostRevoke revokes principal's grants through the admin listener at baseURL
// (`mcp-proxy credentials revoke`).
func PostRevoke(ctx context.Context, client *http.Client, baseURL, token, upstream, principal string) (*Revoked, error) {
	path := "/credentials/revoke?" + url.Values{"upstream": {upstream}, "principal": {principal}}.Encode()
	status, body, err := exchange(ctx, client, http.MethodPost, baseURL, path, token, 1<<20)
	if err != nil {
		return nil, fmt.Errorf("asking %s to revoke: %w", baseURL, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s/credentials/revoke answered %d %s: %s", strings.TrimSuffix(baseURL, "/"), status, http.StatusText(status), firstLine(string(body)))
	}
	var out Revoked
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("the answer from %s is not what mcp-proxy serves: %w", baseURL, err)
	}
	return &out, nil
}

// WriteGrants writes grants as the table of `mcp-proxy credentials list`.
func WriteGrants(out io.Writer, grants []Grant, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tPRINCIPAL\tMODE\tSUBJECT\tEXPIRES\tREFRESH\tSCOPES/SECRETS\tUPDATED")
	for _, g := range grants {
		exp, upd := "-", "-"
		if !g.Expiry.IsZero() {
			if d := g.Expiry.Sub(now); d > 0 {
				exp = "in " + ago(d)
			} else {
				exp = "expired"
			}
		}
		if !g.Updated.IsZero() {
			upd = ago(now.Sub(g.Updated)) + " ago"
		}
		refresh := "no"
		if g.Refresh {
			refresh = "yes"
		}
		what := strings.Join(g.Scopes, " ")
		if len(g.Secrets) > 0 {
			what = strings.Join(g.Secrets, ", ")
		}
		if what == "" {
			what = "-"
		}
		sub := g.Subject
		if sub == "" {
			sub = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Upstream, g.Principal, g.Mode, sub, exp, refresh, what, upd)
	}
	return tw.Flush()
}
