package config

import "github.com/hashicorp/hcl/v2"

// The raw* types are the gohcl schemas. They have no "remain" field, so gohcl
// decodes strictly: unknown arguments and block types are reported by HCL
// itself, with "Did you mean" suggestions for near misses.
//
// Attributes are captured as *hcl.Attribute (nil when absent) rather than
// typed values. That keeps their source ranges, lets an explicit `x = ""` be
// told apart from a missing x, and lets eval.go convert each value exactly
// once with its own located diagnostic and hint.

// rawFile is the top level of a configuration file.
type rawFile struct {
	Proxies   []rawProxy     `hcl:"proxy,block"`
	Upstreams []rawUpstream  `hcl:"upstream,block"`
	Listens   []rawListen    `hcl:"listen,block"`
	Auths     []rawAuth      `hcl:"auth,block"`
	Policies  []rawPolicy    `hcl:"policy,block"`
	Audits    []rawAudit     `hcl:"audit,block"`
	Plugins   []rawPlugin    `hcl:"plugin,block"`
	Telemetry []rawTelemetry `hcl:"telemetry,block"` // see telemetry.go
	Admins    []rawAdmin     `hcl:"admin,block"`     // see admin.go
	Clusters  []rawCluster   `hcl:"cluster,block"`   // see cluster.go
	Endpoints []rawEndpoint  `hcl:"endpoint,block"`  // see endpoint.go

	Stores []rawTokenStore `hcl:"token_store,block"` // see tokenstore.go
}

// rawProxy is one proxy block. Several are decoded so that a duplicate can be
// reported alongside the problems inside either block.
type rawProxy struct {
	Name          *hcl.Attribute `hcl:"name,optional"`
	Version       *hcl.Attribute `hcl:"version,optional"`
	Separator     *hcl.Attribute `hcl:"separator,optional"`
	PageSize      *hcl.Attribute `hcl:"page_size,optional"`
	MaxNameLength *hcl.Attribute `hcl:"max_name_length,optional"`
	Instructions  *hcl.Attribute `hcl:"instructions,optional"`
	Principal     *hcl.Attribute `hcl:"principal,optional"`
	Groups        *hcl.Attribute `hcl:"principal_groups,optional"`
	Watch         *hcl.Attribute `hcl:"watch,optional"`

	MaxClientBuffer   *hcl.Attribute `hcl:"max_client_buffer,optional"`
	MaxClientInFlight *hcl.Attribute `hcl:"max_client_in_flight,optional"`
	ReadyGrace        *hcl.Attribute `hcl:"ready_grace,optional"`

	Pin      *hcl.Attribute `hcl:"pin,optional"`
	LockFile *hcl.Attribute `hcl:"lock_file,optional"`
	Screen   *hcl.Attribute `hcl:"screen,optional"`
	// ScreenAllow lists the checks whose findings are accepted for every upstream.
	ScreenAllow *hcl.Attribute `hcl:"screen_allow,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}

// rawUpstream is one upstream "label" block.
type rawUpstream struct {
	Name           string         `hcl:"name,label"`
	Command        *hcl.Attribute `hcl:"command,optional"` // required; checked in upstream.go with a located error
	Env            *hcl.Attribute `hcl:"env,optional"`
	Cwd            *hcl.Attribute `hcl:"cwd,optional"`
	Namespace      *hcl.Attribute `hcl:"namespace,optional"`
	Timeout        *hcl.Attribute `hcl:"timeout,optional"`
	StartupTimeout *hcl.Attribute `hcl:"startup_timeout,optional"`
	MaxMessageSize *hcl.Attribute `hcl:"max_message_size,optional"`
	Disabled       *hcl.Attribute `hcl:"disabled,optional"`
	Screen         *hcl.Attribute `hcl:"screen,optional"`
	ScreenAllow    *hcl.Attribute `hcl:"screen_allow,optional"`
	Protocol       *hcl.Attribute `hcl:"protocol,optional"`
	URL            *hcl.Attribute `hcl:"url,optional"`
	Headers        *hcl.Attribute `hcl:"headers,optional"`
	Transport      *hcl.Attribute `hcl:"transport,optional"`
	Session        *hcl.Attribute `hcl:"session,optional"`
	MaxSessions    *hcl.Attribute `hcl:"max_sessions,optional"`
	IdleTimeout    *hcl.Attribute `hcl:"idle_timeout,optional"`
	MaxInFlight    *hcl.Attribute `hcl:"max_in_flight,optional"`
	Required       *hcl.Attribute `hcl:"required,optional"`
	OAuth          []rawOAuth     `hcl:"oauth,block"`
	Tools          []rawSelection `hcl:"tools,block"`   // see filters.go
	ToolBlocks     []rawOverride  `hcl:"tool,block"`    // see filters.go
	Prompts        []rawSelection `hcl:"prompts,block"` // see filters.go
	PromptBlocks   []rawOverride  `hcl:"prompt,block"`  // see filters.go
	Sandboxes      []rawSandbox   `hcl:"sandbox,block"` // see sandbox.go

	Credentials []rawCredentials `hcl:"credentials,block"` // see credentials.go

	NameRange hcl.Range `hcl:"name,label_range"`
	DefRange  hcl.Range `hcl:",def_range"`
}

// rawOAuth is an upstream's oauth block: how the proxy authorizes itself with an HTTP
// upstream that answers 401. Every attribute is optional.
type rawOAuth struct {
	Disabled             *hcl.Attribute `hcl:"disabled,optional"`
	ClientID             *hcl.Attribute `hcl:"client_id,optional"`
	ClientSecret         *hcl.Attribute `hcl:"client_secret,optional"`
	Issuer               *hcl.Attribute `hcl:"issuer,optional"`
	ClientMetadataURL    *hcl.Attribute `hcl:"client_metadata_url,optional"`
	Scopes               *hcl.Attribute `hcl:"scopes,optional"`
	RedirectPort         *hcl.Attribute `hcl:"redirect_port,optional"`
	Grant                *hcl.Attribute `hcl:"grant,optional"`
	AuthorizationTimeout *hcl.Attribute `hcl:"authorization_timeout,optional"`
	TokenFile            *hcl.Attribute `hcl:"token_file,optional"`
	OpenBrowser          *hcl.Attribute `hcl:"open_browser,optional"`

	DefRange hcl.Range `hcl:",def_range"`
}
