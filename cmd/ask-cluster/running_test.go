package main

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// runningTickets counts the main group's tickets the store still holds as running: the
// members of its running sets (one per key prefix, or one per bucket when the keys are spread
// over buckets), on the single redis-server or on every primary of the Redis Cluster.
func runningTickets(ctx context.Context, c *Cluster) (int64, error) {
	mine := func(k string) bool { return strings.HasPrefix(k, "ask:") || strings.HasPrefix(k, "{ask:") }
	if rc := c.RedisCluster(); rc != nil {
		keys, err := rc.Scan(ctx, "*running")
		if err != nil {
			return 0, err
		}
		rdb := rc.Client()
		defer rdb.Close()
		var n int64
		for k := range keys {
			if !mine(k) {
				continue
			}
			m, err := rdb.ZCard(ctx, k).Result()
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	}
	rdb := goredis.NewClient(&goredis.Options{Addr: strings.TrimPrefix(strings.TrimSuffix(c.RedisURL, "/0"), "redis://")})
	defer rdb.Close()
	var n int64
	iter := rdb.Scan(ctx, 0, "*running", 1000).Iterator()
	for iter.Next(ctx) {
		if !mine(iter.Val()) {
			continue
		}
		m, err := rdb.ZCard(ctx, iter.Val()).Result()
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, iter.Err()
}
