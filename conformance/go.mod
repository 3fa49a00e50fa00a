// The conformance harness is its own module so that it stays out of the proxy's
// import graph (internal/testing/deptest checks every package of the main module) and out of
// `go test ./...`. It uses the standard library only.
module github.com/mcp-proxy/mcp-proxy/conformance

go 1.26.8
