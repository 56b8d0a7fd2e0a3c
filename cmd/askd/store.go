package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/seal"
)

// storeConfig is the run registry's configuration from the environment:
//
//	DAS_ASK_STORE         "memory" (default: this process only) or redis://[user:pass@]host:port/db
//	                      (rediss:// for TLS): tickets, events and conversations in Redis, shared
//	                      by every replica configured with the same URL and prefix
//	DAS_ASK_LEASE_S       seconds a replica's lease on a run lasts unrenewed (Redis only; default 10):
//	                      a run whose replica died ends in error{interrupted} within about this long
//	DAS_ASK_REDIS_PREFIX  key prefix in Redis (default "ask:")
//	DAS_ASK_SEAL_KEYS     "kid1:base64key,kid2:base64key" (Redis only): seal the question at rest
//	                      (XChaCha20-Poly1305, 32-byte keys); the first key seals, all open. Required
//	                      when Redis persists (AOF or RDB: the durable mode); dropping a key
//	                      crypto-shreds what it sealed
type storeConfig struct {
	url    string // "" for memory
	lease  time.Duration
	prefix string
	seal   *seal.Keys
}

func storeConfigFrom(getenv func(string) string) (storeConfig, error) {
	var c storeConfig
	switch v := strings.TrimSpace(getenv("DAS_ASK_STORE")); {
	case v == "" || v == "memory":
	case strings.HasPrefix(v, "redis://") || strings.HasPrefix(v, "rediss://"):
		c.url = v
	default:
		// The value may hold a password: say what is wanted, not what was given.
		return c, fmt.Errorf(`DAS_ASK_STORE: want "memory" or a redis:// or rediss:// URL`)
	}
	if v := strings.TrimSpace(getenv("DAS_ASK_LEASE_S")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 3600 {
			return c, fmt.Errorf("DAS_ASK_LEASE_S=%q: want a whole number of seconds from 1 to 3600", v)
		}
		c.lease = time.Duration(n) * time.Second
	}
	c.prefix = strings.TrimSpace(getenv("DAS_ASK_REDIS_PREFIX"))
	if v := strings.TrimSpace(getenv("DAS_ASK_SEAL_KEYS")); v != "" {
		k, err := seal.ParseKeys(v)
		if err != nil {
			// seal's errors name the key id, never the key.
			return c, fmt.Errorf("DAS_ASK_SEAL_KEYS: %w", err)
		}
		c.seal = k
	}
	return c, nil
}

// openStore returns the store c selects, sized by the service's configuration, and its
// closer; nil for the in-memory store, which the server creates itself.
func (c storeConfig) open(ctx context.Context, svc server.Config, log *slog.Logger) (store.Store, func() error, error) {
	if c.url == "" {
		return nil, func() error { return nil }, nil
	}
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s, err := redisstore.New(dialCtx, redisstore.Options{
		URL: c.url, Prefix: c.prefix, TTL: svc.TTL, MaxEvents: svc.MaxEvents, Lease: c.lease, Logger: log, Seal: c.seal,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("DAS_ASK_STORE: %w", err)
	}
	log.Info("store: redis", "replica", s.Replica(), "lease", s.Lease().String())
	return s, s.Close, nil
}
