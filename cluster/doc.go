// Package cluster is what several replicas of the proxy share through Redis when the
// configuration has a cluster block: the rate limits' token buckets (RedisBuckets, one
// server-side script per call) and what a replica does while Redis cannot be reached
// (Buckets: refuse, or check in its own memory, until Redis answers again); the replica
// registry and the forwarding of requests to the replica that holds what they need
// (Forwarder: a legacy session, a modern call parked for its client, a task); the task
// store (RedisTasks). The client is of one server, a Sentinel-managed master or a Redis
// Cluster, by the URL's scheme (NewClient). docs/cluster.md has the design.
//
// It must not be on the path of anything when there is no cluster block: nothing here is
// made then, and nothing connects anywhere. It never logs or reports the Redis URL (it
// may hold a password). It does not know the policy's limits: policy.Limiter decides
// which buckets a call takes; this package only keeps them.
package cluster
