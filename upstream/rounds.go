package upstream

import "context"

// A RoundHook is told of each extra round one call takes with a modern upstream for a
// client that cannot answer input_required itself: the proxy asks the client for the
// inputs and sends the call again (round 1, 2, …). It returns the context the round
// runs in (the client's input requests and the retried request are made with it) and a
// function the upstream calls once, with the round's error or nil, when the retried
// request is answered. It must be quick; tracing makes a span of each round with it.
type RoundHook func(ctx context.Context, method string, round int) (context.Context, func(err error))

type roundHookKey struct{}

// WithRoundHook returns ctx carrying h: the calls sent with it report their rounds to
// h. A caller that traces sets it on the calls it records, and only on those.
func WithRoundHook(ctx context.Context, h RoundHook) context.Context {
	return context.WithValue(ctx, roundHookKey{}, h)
}

// startRound tells the hook in ctx, if any, that a round begins.
func startRound(ctx context.Context, method string, round int) (context.Context, func(error)) {
	if h, ok := ctx.Value(roundHookKey{}).(RoundHook); ok && h != nil {
		return h(ctx, method, round)
	}
	return ctx, func(error) {}
}
