package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// Fetch reads the status from the admin listener at baseURL (http://host:port); token,
// when set, is sent as a bearer token (an API key or a JWT, for a listener behind the
// auth block).
func Fetch(ctx context.Context, client *http.Client, baseURL, token string) (*Status, error) {
	status, body, err := exchange(ctx, client, http.MethodGet, baseURL, "/status?format=json", token, 16<<20)
	if err != nil {
		return nil, fmt.Errorf("asking %s for its status: %w", baseURL, err)
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s/status answered %d %s: %s", strings.TrimSuffix(baseURL, "/"), status, http.StatusText(status), firstLine(string(body)))
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return nil, fmt.Errorf("the status from %s is not what mcp-proxy serves: %w", baseURL, err)
	}
	return &st, nil
}

// exchange sends one request to the admin listener at baseURL (path after it) and reads
// at most limit bytes of the answer; token, when set, goes as a bearer token.
func exchange(ctx context.Context, client *http.Client, method, baseURL, path, token string, limit int64) (int, []byte, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(baseURL, "/")+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return 0, nil, fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, body, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// WriteText writes st as the terminal table of `mcp-proxy status`.
func WriteText(out io.Writer, st *Status) error {
	var b strings.Builder
	writeText(&b, st)
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(out, strings.Join(lines, "\n"))
	return err
}

func writeText(w *strings.Builder, st *Status) {
	ready := "ready"
	if len(st.Waiting) > 0 {
		ready += " (upstreams start with the first client: " + strings.Join(st.Waiting, ", ") + ")"
	}
	if !st.Ready {
		ready = "NOT READY (" + strings.Join(st.NotReady, ", ") + ")"
	}
	fmt.Fprintf(w, "mcp-proxy %s: %s, up %s\n", st.Version, ready, ago(st.Now.Sub(st.Started)))
	loaded := ""
	if !st.Config.LoadedAt.IsZero() {
		loaded = ", loaded " + st.Config.LoadedAt.Local().Format(time.DateTime)
	}
	fmt.Fprintf(w, "config %s (sha256 %s%s)\n", st.Config.Path, short(st.Config.SHA256, 12), loaded)
	if st.LastReload != nil {
		fmt.Fprintf(w, "last reload: %s\n", st.LastReload.Summary())
	}
	w.WriteString("\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tSTATE\tREQUIRED\tTRANSPORT\tERA\tTOOLS\tPROMPTS\tRESOURCES\tTEMPLATES\tRESTARTS\tCALLS\tP50\tP99\tLAST ERROR")
	for _, u := range st.Upstreams {
		req, era, p50, p99 := "no", "-", "-", "-"
		if u.Required {
			req = "yes"
		}
		if u.Era != "" {
			era = u.Era
		}
		if u.Calls > 0 {
			p50, p99 = msText(u.P50Ms), msText(u.P99Ms)
		}
		lastErr := firstLine(u.LastError)
		if len(lastErr) > 60 {
			lastErr = lastErr[:59] + "…"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", u.Name, u.State, req, u.Transport, era,
			u.Tools, u.Prompts, u.Resources, u.Templates, u.Restarts, u.Calls, p50, p99, lastErr)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(st.Endpoints) > 0 {
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENDPOINT\tPATH\tMODE\tUPSTREAMS\tTOOLS")
		for _, e := range st.Endpoints {
			path := e.Path
			if path == "" {
				path = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", e.Name, path, e.Mode, strings.Join(e.Upstreams, ","), len(e.Tools))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	if len(st.Sessions) == 0 {
		fmt.Fprintln(w, "no client sessions")
		return
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSIONS\tERA\tTRANSPORT\tOPEN")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "\t%s\t%s\t%d\n", s.Era, s.Transport, s.Open)
	}
	tw.Flush()
}
