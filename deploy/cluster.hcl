# The replicas' configuration of deploy/compose.yaml: three replicas of the image behind
# HAProxy (round-robin, no stickiness), sharing rate limits and sessions through Redis,
# the topology the cluster tests run (internal/testing/topology; docs/cluster.md). Each replica
# reads the same file; the environment says who it is.

listen "http" {
  address = "0.0.0.0:8080"
  path    = "/mcp"
  # Reachable only on the Compose network (HAProxy, the other replicas); HAProxy is what
  # is published. Anything others reach needs an auth block (docs/policy.md).
  insecure_no_auth = true
}

cluster {
  redis     = env("MCP_PROXY_REDIS_URL")   # redis://redis:6379/0
  advertise = env("MCP_PROXY_ADVERTISE")   # this replica's name on the network: proxy1:8080
  # Shared secret (32+ bytes): cursors are good at every replica, and a replica's
  # sessions are adopted by the others when it stops (a rolling restart keeps them).
  key = env("MCP_PROXY_CLUSTER_KEY")
}

# On the network, for health checks and Prometheus: /metrics, /healthz, /readyz, /status.
admin {
  address          = "0.0.0.0:9090"
  insecure_no_auth = true
}

upstream "remote" {
  url = env("MCP_PROXY_UPSTREAM_URL", "http://127.0.0.1:9/mcp")
}
