package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// acquireScript takes the lock and draws its fencing token in one step, so
// that no other client can take the lock between the two and no token is
// drawn for a grant that did not happen: SET NX PX, then INCR of the key's
// own counter, which is never deleted (tokens per key only go up).
// KEYS[1] the lock, KEYS[2] its counter; ARGV[1] the owner, ARGV[2] the TTL
// in ms. Returns the token, or 0 when the lock is held.
var acquireScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0`)

// releaseScript deletes the lock only if this owner still holds it (its
// TTL may have run out and another owner taken it). Returns 1 when deleted.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// errNotHeld: the release found the lock gone or held by another owner.
var errNotHeld = errors.New("lock no longer held by this owner (TTL expired?)")

// errWaitOver: the key stayed held for the whole wait.
var errWaitOver = errors.New("lock still held when the wait ran out")

// redisLock is the lock recipe over one shared go-redis client. Redis has
// no queue of waiters: a held key is polled again after a short random
// delay until the wait runs out, as lock libraries over Redis do.
type redisLock struct {
	rdb        *redis.Client
	ttl        time.Duration
	wait       time.Duration
	retryDelay time.Duration // mean delay between polls of a held key
	ownerBase  string
	seq        atomic.Uint64
}

func newRedisLock(rdb *redis.Client, ttl, wait, retryDelay time.Duration) *redisLock {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return &redisLock{rdb: rdb, ttl: ttl, wait: wait, retryDelay: retryDelay, ownerBase: hex.EncodeToString(b[:]) + ":"}
}

// keys returns the lock key and its counter's; the hash tag keeps both in
// one slot, as a Redis Cluster would need for the script.
func keys(key string) []string {
	return []string{"lock:{" + key + "}", "fence:{" + key + "}"}
}

// Acquire implements benchkit.Lock.
func (l *redisLock) Acquire(ctx context.Context, key string) (uint64, func(context.Context) error, error) {
	ks := keys(key)
	owner := l.ownerBase + strconv.FormatUint(l.seq.Add(1), 10)
	ttl := strconv.FormatInt(l.ttl.Milliseconds(), 10)
	deadline := time.Now().Add(l.wait)
	for {
		tok, err := acquireScript.Run(ctx, l.rdb, ks, owner, ttl).Uint64()
		if err != nil {
			return 0, nil, fmt.Errorf("acquire script: %w", err)
		}
		if tok > 0 {
			release := func(ctx context.Context) error {
				n, err := releaseScript.Run(ctx, l.rdb, ks[:1], owner).Int()
				if err != nil {
					return fmt.Errorf("release script: %w", err)
				}
				if n != 1 {
					return errNotHeld
				}
				return nil
			}
			return tok, release, nil
		}
		// Held: poll again after a jittered delay, within the wait.
		d := l.retryDelay/2 + rand.N(l.retryDelay+1)
		if !time.Now().Add(d).Before(deadline) {
			return 0, nil, errWaitOver
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, ctx.Err()
		case <-t.C:
		}
	}
}
