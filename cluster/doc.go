// Package cluster is what several replicas of the proxy share through Redis when the
// configuration has a cluster block: for now, the rate limits' token buckets
// (RedisBuckets, one server-side script per call) and what a replica does while Redis
// cannot be reached (Buckets: refuse, or check in its own memory, until Redis answers
// again). docs/cluster.md has the design, including what is still to come (legacy
// sessions served by any replica).
//
// It must not be on the path of anything when there is no cluster block: nothing here is
// made then, and nothing connects anywhere. It never logs or reports the Redis URL (it
// may hold a password). It does not know the policy's limits: policy.Limiter decides
// which buckets a call takes; this package only keeps them.
package cluster
