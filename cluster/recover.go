package cluster

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// What a replica does when Redis has lost the shared state (a restart without
// persistence, a failover to a replica that had not had the writes): the replicas that
// hold something write it again from memory (restorers, when a registration finds the
// replica's entry gone), and a replica that looks for something Redis does not have
// while Redis may just have lost it waits for it to be written again (awaitRecovery)
// instead of answering that it is gone.

// restorer is what holds, in this replica's memory, shared state it can write to Redis
// again: the held sessions (Sessions), the tasks recorded here (RedisTasks).
type restorer interface {
	// restoreAll writes again what Redis does not have, never overwriting what another
	// replica wrote, and returns how many entries it wrote.
	restoreAll(ctx context.Context) (int, error)
	// pending reports that a write failed: restoreAll is due when Redis answers again.
	pending() bool
	// kind names what it restores, for the log ("sessions", "tasks").
	kind() string
}

// addRestorer makes r's state written again when Redis has lost it.
func (f *Forwarder) addRestorer(r restorer) {
	f.restorersMu.Lock()
	f.restorers = append(f.restorers, r)
	f.restorersMu.Unlock()
}

// restoreLost runs, after a registration that succeeded, the restorers that are due:
// every one when lost (Redis had lost this replica's entry, or did not answer before),
// else those with a failed write pending. Failures are logged; the next registration
// tries again.
func (f *Forwarder) restoreLost(lost bool) {
	f.restorersMu.Lock()
	rs := append([]restorer(nil), f.restorers...)
	f.restorersMu.Unlock()
	for _, r := range rs {
		if !lost && !r.pending() {
			continue
		}
		n, err := r.restoreAll(context.Background())
		if err != nil {
			f.log.Warn().Err(err).Int("restored", n).Str("state", r.kind()).
				Msg("cluster: cannot write this replica's shared state to redis again; trying at the next registration")
			continue
		}
		if n > 0 {
			f.log.Warn().Int("restored", n).Str("state", r.kind()).
				Msg("cluster: wrote again the shared state this replica holds, which redis had lost")
		}
	}
}

// recovering reports whether Redis may just have lost the shared state of live sessions
// and tasks: this replica found its registry entry gone, or registered again after Redis
// did not answer, within recoverFor; or its entry is missing now (it registers at once
// then); or Redis itself started less than recoverFor ago. It costs a round trip or two,
// and is asked only when Redis lacks what a request names.
func (f *Forwarder) recovering(ctx context.Context) bool {
	if at := f.lostAt.Load(); at != 0 && time.Since(time.Unix(0, at)) < recoverFor {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	n, err := f.redis.Exists(ctx, f.key).Result()
	if err != nil {
		return false
	}
	if n == 0 {
		select {
		case f.kick <- struct{}{}:
		default:
		}
		return true
	}
	// Registered already (this replica may have started as Redis did): Redis's uptime
	// tells whether it has just restarted.
	info, err := f.redis.Info(ctx, "server").Result()
	if err != nil {
		return false
	}
	_, v, ok := strings.Cut(info, "uptime_in_seconds:")
	if !ok {
		return false
	}
	v, _, _ = strings.Cut(v, "\r\n")
	up, err := strconv.Atoi(strings.TrimSpace(v))
	return err == nil && time.Duration(up)*time.Second < recoverFor
}

// awaitRecovery polls try every awaitEvery for at most awaitFor when Redis may just have
// lost the shared state (recovering), until try reports it found what it waits for
// (written again by the replica that holds it). It returns nil when found or when Redis
// is not recovering (the caller tells them apart by what try kept), the context's error
// when it ended, and try's last error at the deadline.
func (f *Forwarder) awaitRecovery(ctx context.Context, try func(context.Context) (bool, error)) error {
	if !f.recovering(ctx) {
		return nil
	}
	deadline := time.Now().Add(awaitFor)
	t := time.NewTicker(awaitEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		found, err := try(ctx)
		if found {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// registered reads replica id's address from the registry, past the cache, and caches
// what it found (an address, never "gone": the caller decides that).
func (f *Forwarder) registered(ctx context.Context, id string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	addr, err := f.redis.Get(ctx, f.keyPre+id).Result()
	if err != nil {
		return "", false, err
	}
	f.alive(id, addr)
	return addr, true, nil
}

// awaitRegistered is what a request for replica id, which the registry does not name,
// waits for while Redis recovers (awaitRecovery): the replica registered again (a live
// replica does within a second of Redis answering again). It returns the replica's
// address, or false when it did not register in time or Redis is not recovering (the
// replica is gone).
func (f *Forwarder) awaitRegistered(ctx context.Context, id string) (string, bool) {
	var addr string
	_ = f.awaitRecovery(ctx, func(ctx context.Context) (bool, error) {
		a, ok, err := f.registered(ctx, id)
		addr = a
		return ok, err
	})
	return addr, addr != ""
}

// restoreBatch is how many scripts restoreInBatches sends in one pipeline.
const restoreBatch = 512

// restoreInBatches calls eval for the items 0 to n-1 in pipelines of restoreBatch, each
// under a timeout of base plus 10 µs an item, and counts the scripts that answered 1
// (they wrote). It stops at the first pipeline that fails. (EVAL, not EVALSHA: a Redis
// that restarted has no scripts, and a pipeline cannot load one on NOSCRIPT.)
func restoreInBatches(ctx context.Context, c redis.Cmdable, base time.Duration, n int, eval func(ctx context.Context, p redis.Pipeliner, i int)) (int, error) {
	wrote := 0
	for start := 0; start < n; {
		k := min(n-start, restoreBatch)
		cctx, cancel := context.WithTimeout(ctx, base+time.Duration(k)*10*time.Microsecond)
		cmds, err := c.Pipelined(cctx, func(p redis.Pipeliner) error {
			for i := start; i < start+k; i++ {
				eval(cctx, p, i)
			}
			return nil
		})
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			return wrote, err
		}
		for _, cmd := range cmds {
			if v, _ := cmd.(*redis.Cmd).Int(); v == 1 {
				wrote++
			}
		}
		start += k
	}
	return wrote, nil
}
