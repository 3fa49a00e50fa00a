package policy

// An Observer is told each decision the policy's stages take, so that metrics count
// decisions by rule and refusals by limit whether or not an audit trail is configured.
// It is called synchronously on the call's path, once per decision: it must be quick,
// must not block and must not keep the event.
type Observer interface {
	PolicyDecision(d Decided)
}

// Stages of the policy, as Decided.Stage names them.
const (
	StageRules  = "rules"
	StageLimits = "limits"
)

// Decisions, as Decided.Decision and Record.Decision name them.
const (
	DecisionAllow       = "allow"
	DecisionDeny        = "deny"
	DecisionRateLimited = "rate_limited"
	// DecisionError: the limits could not be checked (the bucket store failed) and the
	// call was refused.
	DecisionError = "error"
	// DecisionInvalid: refused before routing, not taken as a request (Record only, see
	// Chain.Refused).
	DecisionInvalid = "invalid"
)

// Decided is one decision of a policy stage. The rules stage reports every call it
// decides on (allowed or denied, with the rule that decided: a rule's name, "default"
// or "visibility"); the limits stage reports only refusals (Rule is the limit's name,
// or "max_in_flight"). Principals are not part of it: they must never become metric
// labels.
type Decided struct {
	Stage    string // StageRules or StageLimits
	Method   string
	Upstream string
	Rule     string
	Decision string // DecisionAllow, DecisionDeny, DecisionRateLimited or DecisionError
}

// observe tells the chain's observer, if any, about d.
func (c *Chain) observe(d Decided) {
	if c.Observer != nil {
		c.Observer.PolicyDecision(d)
	}
}
