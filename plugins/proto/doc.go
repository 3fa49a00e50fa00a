// Package proto is the versioned gRPC interface between mcp-proxy and its plugins,
// generated from plugin.proto (make proto; the generated code is committed). A plugin
// is a separate process that go-plugin starts and talks to over gRPC on a unix socket
// with mutual TLS: unary calls for Describe, Configure and Catalogue, and one Hooks
// stream per plugin that carries every request hook call, multiplexed by id.
//
// Plugin authors use plugins/sdk rather than this package. The handshake's protocol
// version changes only when a change here would break either side; fields are only
// ever added, never renumbered.
package proto
