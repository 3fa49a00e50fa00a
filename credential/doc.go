// Package credential is whom an upstream call acts as: the credential of one principal
// for one upstream, resolved per call below the router (docs/credentials.md). Its
// modes: "exchange" (the principal's validated access token exchanged for one whose
// audience is the upstream, RFC 8693, or an identity assertion grant), "oauth" (the
// principal authorizes the proxy at the upstream's own authorization server once, in a
// browser; the grant is refreshed), and "secret" (the principal's own secrets in a
// child's environment or the upstream's headers). Mode "shared" is the upstream's own
// configuration and needs nothing of this package.
//
// A Provider per upstream answers the router's per-principal pool (Admit: may this
// principal be served now?) and the principal's session (its Authorizer gives each HTTP
// request its Authorization). Credentials are cached per (principal, upstream) in this
// process and kept in a Store: in memory, in an encrypted file (one node), or encrypted
// in Redis (package cluster), so that every replica serves a principal's grant.
//
// It must not: give a call another principal's credential or the upstream's shared
// one; put a token in a log line, an error, an audit record, a metric or a status page
// (tokens are principal.Secret, and errors quote no response body); import the router
// or anything above it.
package credential
