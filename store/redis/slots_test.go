package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
	"github.com/das-ask/ask/store/storetest"
)

// TestEveryScriptOneSlot runs the store contract, the outbox's and the lease's calls with the
// keys spread over 16 buckets, through a client hook that computes the Redis Cluster slot
// (CRC16 of the hash tag, as CLUSTER KEYSLOT does) of every key of every script invocation and
// of every MULTI: each must touch one slot, or Redis Cluster would refuse it (CROSSSLOT).
func TestEveryScriptOneSlot(t *testing.T) {
	srv := redistest.Start(t)
	var h slotHook
	factory := func(t *testing.T, o storetest.Options) store.Store {
		c := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
		c.AddHook(&h)
		t.Cleanup(func() { _ = c.Close() })
		s, err := redisstore.New(t.Context(), redisstore.Options{Client: c, Prefix: "slots:" + rand.Text() + ":", Buckets: 16, MaxEvents: o.MaxEvents})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	storetest.Run(t, factory)
	ob := factory(t, storetest.Options{}).(*redisstore.Store)
	storetest.Outbox(t, ob)
	if _, err := ob.Lapsed(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.scripts < 50 {
		t.Fatalf("the hook saw %d script calls: it is not watching the store", h.scripts)
	}
	for _, e := range h.errs {
		t.Error(e)
	}
	if len(h.buckets) < 8 {
		t.Errorf("the calls touched %d of 16 buckets: the homed ids are not spread", len(h.buckets))
	}
}

// slotHook records every command that would touch more than one slot.
type slotHook struct {
	mu      sync.Mutex
	scripts int
	errs    []string
	buckets map[string]bool
}

func (h *slotHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *slotHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.check([]goredis.Cmder{cmd}, false)
		return next(ctx, cmd)
	}
}

func (h *slotHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		tx := len(cmds) > 0 && cmds[0].Name() == "multi"
		if tx {
			h.check(cmds, true)
		} else {
			for _, c := range cmds {
				h.check([]goredis.Cmder{c}, false)
			}
		}
		return next(ctx, cmds)
	}
}

// check records an error unless the keys of cmds (one transaction when tx) share one slot.
func (h *slotHook) check(cmds []goredis.Cmder, tx bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buckets == nil {
		h.buckets = map[string]bool{}
	}
	slots := map[int]bool{}
	var keys []string
	for _, c := range cmds {
		args := c.Args()
		switch name := c.Name(); name {
		case "eval", "evalsha", "eval_ro", "evalsha_ro":
			h.scripts++
			n, _ := strconv.Atoi(fmt.Sprint(args[2]))
			for _, k := range args[3 : 3+n] {
				keys = append(keys, fmt.Sprint(k))
			}
		case "multi", "exec", "ping", "subscribe", "publish", "config", "hello", "client", "script", "info", "select":
		default:
			// Every other command the store sends names its keys from args[1] on; the
			// multi-key ones (DEL) list only keys.
			if len(args) > 1 {
				keys = append(keys, fmt.Sprint(args[1]))
			}
			if name == "del" {
				for _, k := range args[2:] {
					keys = append(keys, fmt.Sprint(k))
				}
			}
		}
	}
	for _, k := range keys {
		slots[keySlot(k)] = true
		if i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}'); i == 0 && j > 0 {
			h.buckets[k[:j+1]] = true
		}
	}
	if len(slots) > 1 {
		h.errs = append(h.errs, fmt.Sprintf("%d slots in one call (tx %v): %q", len(slots), tx, keys))
	}
}

// keySlot is Redis Cluster's slot of key: CRC16 (XMODEM) of its hash tag (the part between the
// first { and the next }, when not empty), else of the whole key, modulo 16384.
func keySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}

// TestKeySlot checks keySlot against values CLUSTER KEYSLOT answers (from the Redis Cluster
// specification's examples and a real server).
func TestKeySlot(t *testing.T) {
	for k, want := range map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363} {
		if got := keySlot(k); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", k, got, want)
		}
	}
}
