// Package deptest checks the project's import graph in its tests: dependencies point
// one way (cmd → server → router → upstream → transport → jsonrpc), every package's
// third-party modules are listed with a reason, no build output is committed, and no
// product package depends on test tooling (internal/testing/..., cmd/mcp-bench, e2e).
// It has no code of its own.
package deptest
