// Package mcp holds the Model Context Protocol vocabulary the proxy routes on: method and
// notification names, protocol versions and their negotiation, error codes (the spec's
// and the proxy's own), and the reserved _meta keys.
//
// It is a leaf package: constants and small pure functions only, no I/O.
package mcp

// Methods a client sends to a server.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodResourcesList          = "resources/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodServerDiscover         = "server/discover"
	MethodTasksGet               = "tasks/get"
	MethodTasksResult            = "tasks/result"
	MethodTasksList              = "tasks/list"
	MethodTasksCancel            = "tasks/cancel"
	MethodSubscriptionsListen    = "subscriptions/listen"
)

// Methods a server sends to a client (legacy era).
const (
	MethodSamplingCreateMessage = "sampling/createMessage"
	MethodElicitationCreate     = "elicitation/create"
	MethodRootsList             = "roots/list"
)

// Notifications.
const (
	NotificationInitialized          = "notifications/initialized"
	NotificationCancelled            = "notifications/cancelled"
	NotificationProgress             = "notifications/progress"
	NotificationMessage              = "notifications/message"
	NotificationToolsListChanged     = "notifications/tools/list_changed"
	NotificationPromptsListChanged   = "notifications/prompts/list_changed"
	NotificationResourcesListChanged = "notifications/resources/list_changed"
	NotificationResourcesUpdated     = "notifications/resources/updated"
	NotificationRootsListChanged     = "notifications/roots/list_changed"
	NotificationTasksStatus          = "notifications/tasks/status"
	NotificationSubscriptionsAcked   = "notifications/subscriptions/acknowledged"
	// NotificationElicitationComplete (2025-11-25): the out-of-band interaction of a
	// url-mode elicitation (its elicitationId) completed.
	NotificationElicitationComplete = "notifications/elicitation/complete"
)

// Error codes defined by MCP (beyond JSON-RPC's standard ones).
const (
	// CodeResourceNotFound is the legacy (≤ 2025-11-25) resource-not-found code.
	CodeResourceNotFound = -32002
	// CodeURLElicitationRequired is the 2025-11-25 URL-mode elicitation error.
	CodeURLElicitationRequired = -32042
	// CodeHeaderMismatch, CodeMissingClientCapability and CodeUnsupportedVersion are the
	// 2026-07-28 codes.
	CodeHeaderMismatch          = -32020
	CodeMissingClientCapability = -32021
	CodeUnsupportedVersion      = -32022
)

// Proxy-local error codes. They lie outside -32768..-32000 so that a client can never
// mistake a failure inside the proxy for an answer from an upstream server; every such
// error also carries {"origin":"mcp-proxy"} in its data.
const (
	CodeUpstreamUnavailable = -31000 // the owning upstream is down or restarting
	CodeUpstreamTimeout     = -31001 // the upstream did not answer within its timeout
	CodeUpstreamFailed      = -31002 // the upstream exited or its connection broke mid-call
	CodeMessageTooLarge     = -31003 // a message exceeded the configured size limit
	CodeUpstreamProtocol    = -31004 // the upstream answered with something that is not MCP
	CodePolicyDenied        = -31005 // the proxy's policy does not allow this call
	CodeRateLimited         = -31006 // a rate or concurrency limit refused the call; data.retryAfterMs says when to retry
	CodePluginDenied        = -31007 // a plugin's before hook refused the call; data.plugin names it
	CodePluginFailed        = -31008 // a plugin failed (down, timed out, bad answer) and its failure mode is "closed"
	// CodeCredentialUnavailable: the calling principal has no usable credential for the
	// upstream (no secret, no token to exchange, no grant yet, or no principal at all), and
	// a call never falls back to another principal's or the upstream's shared one.
	CodeCredentialUnavailable = -31012
	// CodeCredentialFailed: obtaining the principal's credential failed (the token
	// exchange was refused, a refresh failed, the token store could not be read).
	CodeCredentialFailed = -31013
)

// MetaPrefix is the reverse-DNS prefix of the proxy's own _meta keys.
const MetaPrefix = "dev.mcp-proxy/"

// Reserved _meta keys.
const (
	MetaProgressToken      = "progressToken"
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	// W3C trace context of a request (traceparent, tracestate), as the OpenTelemetry
	// conventions for MCP carry it.
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// Result types of the modern era.
const (
	ResultTypeComplete      = "complete"
	ResultTypeInputRequired = "input_required"
)

// IsClientRequest reports whether method is a request a server may send its client
// (sampling, elicitation, roots): the only ones the proxy relays.
func IsClientRequest(method string) bool {
	switch method {
	case MethodSamplingCreateMessage, MethodElicitationCreate, MethodRootsList:
		return true
	}
	return false
}
