# The mcp-proxy image's default configuration (/etc/mcp-proxy/proxy.hcl): the HTTP front
# end on port 8080 of the container, in front of one remote MCP server named by
# MCP_PROXY_UPSTREAM_URL. Mount your own file over this one for anything more
# (docs/container.md):
#
#   podman run -p 127.0.0.1:8080:8080 -e MCP_PROXY_UPSTREAM_URL=https://mcp.example.com/mcp IMAGE
#
# Without MCP_PROXY_UPSTREAM_URL the proxy still serves (initialize is answered, the tool
# list is empty) and logs that the upstream cannot be reached.

listen "http" {
  address = "0.0.0.0:8080"
  path    = "/mcp"
  # Every interface of the container, without authentication: the container's port is
  # reachable only where it is published (publish it on 127.0.0.1, as above). Anything
  # reachable by others needs an auth block (docs/policy.md) and insecure_no_auth removed.
  insecure_no_auth = true
}

# /metrics, /healthz, /readyz and /status on the container's loopback: `podman exec CONTAINER
# mcp-proxy status` reads it. Publishing it takes a config of your own (docs/container.md).
admin {
  address = "127.0.0.1:9090"
}

upstream "remote" {
  # Port 9 of the container's loopback: nothing listens there until you say where.
  url = env("MCP_PROXY_UPSTREAM_URL", "http://127.0.0.1:9/mcp")
}
