package admin

import (
	"fmt"
	"html/template"
	"sync"
	"time"
)

// page is what the HTML template shows: Status with its values formatted for a person.
type page struct {
	*Status
	Rows       []row
	ShortHash  string
	LoadedAgo  string
	UptimeText string
}

type row struct {
	UpstreamStatus
	Class     string // CSS class of the state: up, starting, restarting, down, stopped, disabled
	EraText   string
	P50, P99  string
	LastStart string
	ErrorAgo  string
}

func pageOf(st *Status) page {
	p := page{Status: st, ShortHash: short(st.Config.SHA256, 12), UptimeText: ago(st.Now.Sub(st.Started))}
	if !st.Config.LoadedAt.IsZero() {
		p.LoadedAgo = ago(st.Now.Sub(st.Config.LoadedAt)) + " ago"
	}
	for _, u := range st.Upstreams {
		r := row{UpstreamStatus: u, Class: u.State, EraText: "—", P50: "—", P99: "—", LastStart: "never"}
		if u.Era != "" {
			r.EraText = u.Era + " (" + u.ProtocolVersion + ")"
		}
		if u.Calls > 0 {
			r.P50, r.P99 = msText(u.P50Ms), msText(u.P99Ms)
		}
		if u.LastStart != nil {
			r.LastStart = ago(st.Now.Sub(*u.LastStart)) + " ago"
		}
		if u.LastErrorAt != nil {
			r.ErrorAgo = ago(st.Now.Sub(*u.LastErrorAt)) + " ago"
		}
		p.Rows = append(p.Rows, r)
	}
	return p
}

func short(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// msText formats milliseconds for a person: 0.42 ms, 12 ms, 1.5 s.
func msText(v float64) string {
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 1000:
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.1f s", v/1000)
}

// ago formats an age for a person, to the second (1h2m3s).
func ago(d time.Duration) string {
	return max(d, 0).Round(time.Second).String()
}

// statusPage is the HTML status page: plain server-rendered HTML, refreshed by the
// browser every 5 s, no script. Element ids and classes (upstream-NAME, state, ready)
// are what the browser test reads. It is parsed when first served, not at start-up:
// most proxies never serve it, and a parsed template stays on the heap (issue 17).
var statusPage = sync.OnceValue(func() *template.Template { return template.Must(template.New("status").Parse(statusHTML)) })

const statusHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="5">
<title>mcp-proxy status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { padding: .25em .7em; border-bottom: 1px solid #ddd; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.state { font-weight: 600; }
td.up { color: #17692f; } td.waiting { color: #555; } td.starting, td.restarting { color: #8a5a00; } td.down, td.stopped { color: #b00020; }
tr.disabled { color: #777; }
#ready.yes { color: #17692f; } #ready.no { color: #b00020; }
.err { color: #b00020; max-width: 40em; overflow-wrap: anywhere; }
small { color: #666; }
</style>
</head>
<body>
<h1>mcp-proxy status</h1>
<p id="ready" class="{{if .Ready}}yes{{else}}no{{end}}">{{if .Ready}}Ready{{else}}Not ready: {{range $i, $n := .NotReady}}{{if $i}}, {{end}}{{$n}}{{end}}{{end}}</p>
<p>Version <code>{{.Version}}</code>, up {{.UptimeText}}.
Configuration <code id="config-path">{{.Config.Path}}</code>, sha256 <code id="config-hash" title="{{.Config.SHA256}}">{{.ShortHash}}</code>{{if .LoadedAgo}}, loaded {{.LoadedAgo}}{{end}}.</p>
{{with .LastReload}}<p id="last-reload" class="{{if eq .Outcome "rejected"}}no{{else}}yes{{end}}">Last reload: {{.Summary}}</p>{{end}}

<h2>Upstreams</h2>
<table id="upstreams">
<thead><tr><th>Upstream</th><th>State</th><th>Required</th><th>Transport</th><th>Era</th><th>Tools</th><th>Prompts</th><th>Resources</th><th>Templates</th><th>Restarts</th><th>Last start</th><th>In flight</th><th>Calls</th><th>p50</th><th>p99</th><th>Last error</th></tr></thead>
<tbody>
{{range .Rows}}<tr id="upstream-{{.Name}}" class="upstream {{.Class}}">
<td class="name">{{.Name}}{{if .PerClient}} <small>(per client: {{.Sessions}})</small>{{end}}{{if .PerPrincipal}} <small>(per principal: {{.Sessions}})</small>{{end}}{{if .CredentialMode}} <small class="credentials">(credentials {{.CredentialMode}}{{with .Principals}}: {{.}} with one{{end}})</small>{{end}}</td>
<td class="state {{.Class}}">{{.State}}</td>
<td>{{if .Required}}yes{{else}}no{{end}}</td>
<td>{{.Transport}}</td>
<td>{{.EraText}}</td>
<td class="num tools">{{.Tools}}</td>
<td class="num">{{.Prompts}}</td>
<td class="num">{{.Resources}}</td>
<td class="num">{{.Templates}}</td>
<td class="num restarts">{{.Restarts}}</td>
<td>{{.LastStart}}</td>
<td class="num">{{.InFlight}}</td>
<td class="num">{{.Calls}}</td>
<td class="num">{{.P50}}</td>
<td class="num">{{.P99}}</td>
<td class="err">{{.LastError}}{{if .ErrorAgo}} <small>({{.ErrorAgo}})</small>{{end}}</td>
</tr>
{{end}}</tbody>
</table>
<p><small>Calls, p50 and p99: calls that ended in the last five minutes, as clients saw them.</small></p>

{{if .Endpoints}}<h2>Endpoints</h2>
<table id="endpoints">
<thead><tr><th>Endpoint</th><th>Path</th><th>Mode</th><th>Upstreams</th><th>Tools</th></tr></thead>
<tbody>
{{range .Endpoints}}<tr id="endpoint-{{.Name}}" class="endpoint">
<td>{{.Name}}</td>
<td>{{if .Path}}<code>{{.Path}}</code> <small>(HTTP+SSE <code>{{.Path}}/sse</code>)</small>{{else}}—{{end}}</td>
<td>{{.Mode}}{{if .Always}}<br><small>always: {{range $i, $n := .Always}}{{if $i}}, {{end}}{{$n}}{{end}}</small>{{end}}</td>
<td>{{range $i, $n := .Upstreams}}{{if $i}}, {{end}}{{$n}}{{end}}</td>
<td><details><summary>{{len .Tools}} tools</summary><small>{{range $i, $n := .Tools}}{{if $i}}, {{end}}{{$n}}{{end}}</small></details></td>
</tr>
{{end}}</tbody>
</table>
<p><small>In search mode a client lists search_tools and call_tool (and the always tools); the tools shown are what its search may find.</small></p>

{{end}}<h2>Client sessions</h2>
{{if .Sessions}}<table id="sessions">
<thead><tr><th>Era</th><th>Transport</th><th>Open</th></tr></thead>
<tbody>
{{range .Sessions}}<tr><td>{{.Era}}</td><td>{{.Transport}}</td><td class="num">{{.Open}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p id="sessions">None yet.</p>{{end}}
<p><small>Metrics: <a href="/metrics">/metrics</a> · <a href="/status?format=json">JSON</a> · <a href="/readyz">/readyz</a></small></p>
</body>
</html>
`
