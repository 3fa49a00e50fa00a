package credential

import "context"

// A Store may be shared by several processes (the replicas of a cluster, over Redis),
// each caching the principals' credentials it has read, so that a call served from the
// cache touches no store. When a credential changes through one process (revoked, a
// secret set, an authorization completed), the others must drop what they cache of it
// at once: a Store that can tell them is a Broadcaster, and the proxy applies what it
// hears (Provider.Forget, closing the principal's sessions, notifying the clients that
// wait for an authorization).

// Kinds of Change.
const (
	// ChangeRevoked: the principal's grants were revoked (Upstream "": with every
	// upstream). Every process drops what it caches of them and closes the principal's
	// sessions with the upstream.
	ChangeRevoked = "revoked"
	// ChangeSecret: one of the principal's secrets was set. Every process drops the
	// principal's cached secrets (its next session reads them again).
	ChangeSecret = "secret"
	// ChangeAuthorized: the principal completed the authorization (mode "oauth") of the
	// link whose flow's FlowKey is Flow: the clients waiting for it are told.
	ChangeAuthorized = "authorized"
)

// Change is what changed of a principal's credential, as one process tells the others.
// It holds no secret: the principal's identity, the upstream, and for an authorization
// a hash of its flow's id (FlowKey), never the id.
type Change struct {
	Kind      string
	Upstream  string // "" for every upstream (ChangeRevoked)
	Principal string // the identity (principal.ID)
	Flow      string // ChangeAuthorized: FlowKey of the flow completed
}

// Broadcaster is a Store shared by several processes that can tell every one of them of
// a Change (cluster.RedisCredentials: Redis pub/sub). Hearing a change costs nothing on
// the call path: calls served from a cache still touch no store.
type Broadcaster interface {
	// Publish tells the other processes sharing the store of c (not this one: it
	// applies its own changes itself).
	Publish(ctx context.Context, c Change) error
	// Subscribe calls fn with each change the other processes publish, until ctx ends,
	// and returns then. resync is called when changes may have been missed (the
	// subscription was lost and made again): what is cached must then be dropped.
	Subscribe(ctx context.Context, fn func(Change), resync func())
}
