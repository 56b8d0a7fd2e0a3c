package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// The chaos suite's Redis Cluster faults (-redis-cluster): each strikes the store under the
// load, where the runs' appends, the readers' reads and the sweeps' scripts are in flight.

// failoverEach fails every primary over to its replica in turn, with CLUSTER FAILOVER (the
// primary stops taking writes, the replica catches up and is promoted: nothing acknowledged
// is lost), 1.5 s apart.
func failoverEach(ctx context.Context, e *chaosEnv) (string, error) {
	ps, err := e.rc.Primaries(ctx)
	if err != nil {
		return "", err
	}
	var took []string
	for i, p := range ps {
		if i > 0 {
			sleepCtx(ctx, 1500*time.Millisecond)
		}
		start := time.Now()
		if _, err := e.rc.Failover(ctx, p); err != nil {
			return "", err
		}
		took = append(took, time.Since(start).Round(time.Millisecond).String())
	}
	return fmt.Sprintf("CLUSTER FAILOVER on each of the %d primaries, 1.5 s apart (settled in %s)", len(ps), strings.Join(took, ", ")), nil
}

// killPrimary SIGKILLs a primary: its slots refuse writes until the others mark it failed
// (cluster-node-timeout) and elect its replica. The dead node is restarted 1 s after the
// election and rejoins as the new primary's replica.
func killPrimary(ctx context.Context, e *chaosEnv) (string, error) {
	ps, err := e.rc.Primaries(ctx)
	if err != nil {
		return "", err
	}
	p := ps[mrand.IntN(len(ps))]
	start := time.Now()
	np, err := e.rc.FailoverByKill(ctx, p)
	if err != nil {
		return "", err
	}
	took := time.Since(start)
	sleepCtx(ctx, time.Second)
	if err := p.Restart(ctx); err != nil {
		return "", err
	}
	if err := e.rc.WaitOK(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("primary %s SIGKILLed; replica %s serving its slots %v later (node timeout %v); the old primary restarted as its replica",
		p.Addr, np.Addr, took.Round(time.Millisecond), redisserver.NodeTimeout), nil
}

// freezeSubscriptionPrimary SIGSTOPs, for 15 s, the primary on which the replicas' change
// notifications are subscribed (the one answering PUBSUB CHANNELS with the store's channels;
// another primary if none does): its replica is elected meanwhile, and what the others publish
// while it is frozen does not reach it. Then SIGCONT: it rejoins as its replica's replica.
func freezeSubscriptionPrimary(ctx context.Context, e *chaosEnv) (string, error) {
	ps, err := e.rc.Primaries(ctx)
	if err != nil {
		return "", err
	}
	p, which := ps[mrand.IntN(len(ps))], "a primary (none held the subscriptions)"
	for _, n := range ps {
		if chans, err := e.rc.Do(ctx, n, "PUBSUB", "CHANNELS"); err == nil {
			if l, ok := chans.([]any); ok && len(l) > 0 {
				p, which = n, "the primary holding the subscriptions"
				break
			}
		}
	}
	if err := p.Pause(); err != nil {
		return "", err
	}
	sleepCtx(context.WithoutCancel(ctx), 15*time.Second)
	if err := p.Resume(); err != nil {
		return "", err
	}
	if err := e.rc.WaitOK(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s, %s, SIGSTOPped 15s, then SIGCONT", which, p.Addr), nil
}

// migrateSlots moves every slot that holds the service's keys to the next primary, live, as
// redis-cli --cluster reshard would (MIGRATING/IMPORTING, MIGRATE ten keys at a time, SETSLOT
// NODE), holding 100 ms at each step so that the load meets ASK redirects and TRYAGAIN.
func migrateSlots(ctx context.Context, e *chaosEnv) (string, error) {
	keys, err := e.rc.Scan(ctx, "*")
	if err != nil {
		return "", err
	}
	// A slot per hash tag (the store tags every key); KeySlot once per tag.
	tags := map[string]string{}
	for k := range keys {
		tags[hashTag(k)] = k
	}
	slots := map[int]bool{}
	for _, k := range tags {
		s, err := e.rc.KeySlot(ctx, k)
		if err != nil {
			return "", err
		}
		slots[s] = true
	}
	if len(slots) == 0 {
		return "", errors.New("no key of the service in the cluster")
	}
	ps, err := e.rc.Primaries(ctx)
	if err != nil {
		return "", err
	}
	moved := 0
	for _, s := range slices.Sorted(maps.Keys(slots)) {
		owner, err := e.rc.SlotOwner(ctx, s)
		if err != nil {
			return "", err
		}
		to := ps[(slices.Index(ps, owner)+1)%len(ps)]
		if err := e.rc.MigrateSlot(ctx, s, to, 100*time.Millisecond); err != nil {
			return "", fmt.Errorf("migrating slot %d: %w", s, err)
		}
		moved++
	}
	return fmt.Sprintf("%d slots (%d keys at the start) migrated live, each to the next primary", moved, len(keys)), nil
}

// hashTag is the part of key Redis Cluster hashes: the first {…} with something inside, or
// the whole key.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}
