package plugins

import (
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/mcp-proxy/mcp-proxy/policy"
)

// Defaults for what a plugin block leaves out.
const (
	DefaultTimeout      = 250 * time.Millisecond
	DefaultStartTimeout = 30 * time.Second
)

// Spec is one configured plugin: the plugin "name" block.
type Spec struct {
	Name    string   // the block's label: names the plugin in logs, errors and audit records
	Command []string // the plugin's program and arguments; Command[0] is checked against SHA256
	Env     map[string]string
	Dir     string // the program's working directory; relative programs are found from it
	// SHA256 is the hex SHA-256 the program file must have, checked before every start;
	// "" starts it unverified (with a warning).
	SHA256 string
	// Match selects the calls the plugin's request hooks see and the items its
	// catalogue hook sees (principals and groups apply to requests only).
	Match policy.Match
	// FailOpen: an error, a timeout or a down plugin lets the call go on without it.
	// Otherwise (the default, "closed") the call is refused with -31008.
	FailOpen bool
	// Timeout bounds each hook call; default DefaultTimeout.
	Timeout time.Duration
	// StartTimeout bounds starting the process, the handshake, Describe and Configure.
	StartTimeout time.Duration
	// Config is the plugin's config block (nil: none), decoded against the schema the
	// plugin describes, with EvalContext (env() and the proxy's other functions).
	Config      hcl.Body
	EvalContext *hcl.EvalContext
	// Ranges of the block and of its attributes (command, sha256, config), for
	// diagnostics found when the plugin starts.
	DeclRange hcl.Range
	Ranges    map[string]hcl.Range
}

func (s *Spec) rangeOf(attr string) *hcl.Range {
	if r, ok := s.Ranges[attr]; ok {
		return &r
	}
	return &s.DeclRange
}
