package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// batcher is what the run's scripts (creation, appends, the end) go through: it sends the calls
// that many runs make at once as one pipeline, one write and one read of replies for a whole
// batch, where a call on its own pays a write and a read syscall on both sides (measured: at
// concurrency 64 in TestRedisLoadCost, 1.7 write syscalls per ask on the service's side, about
// 10 µs each).
//
// The batches are group commits without a timer: the first call finds no batch in flight and
// sends itself at once (a lone call still takes one round trip, nothing held back for
// stragglers); calls that arrive while a batch is in flight queue, and the whole queue goes as
// the next batch the moment the one in flight is answered. So a batch is as large as the calls
// that arrived during one round trip, and the load sizes it. No goroutine of its own: the call
// that starts a batch sends it, completes the others and hands the next batch to the first call
// queued meanwhile, which sends it in turn (no caller ever sends a batch but the one it is in,
// so none waits on others' load).
//
// A batch is a go-redis pipeline, retried whole by the client when its connection fails; every
// script is idempotent (scripts.go), so a retried batch answers as its first run did. On Redis
// Cluster the client's pipeline splits a batch by node and follows MOVED and ASK. A call's own
// context does not reach its batch once queued (the batch is shared): a stalled Redis fails the
// batch at the client's read timeout, and the service's retries go on from there, as before.
type batcher struct {
	c goredis.UniversalClient

	mu    sync.Mutex
	queue []*batched
	busy  bool // a batch is in flight; the calls queued meanwhile wait for the next
	spare []*batched
}

// batched is one call in a batch: ch receives false when its command is answered, or true when
// its caller is to send the next batch.
type batched struct {
	cmd *goredis.Cmd
	ch  chan bool
}

var _ goredis.Scripter = (*batcher)(nil)

func newBatcher(c goredis.UniversalClient) *batcher { return &batcher{c: c} }

func (b *batcher) Eval(ctx context.Context, script string, keys []string, args ...any) *goredis.Cmd {
	return b.do(ctx, "eval", script, keys, args)
}

func (b *batcher) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *goredis.Cmd {
	return b.do(ctx, "evalsha", sha1, keys, args)
}

func (b *batcher) EvalRO(ctx context.Context, script string, keys []string, args ...any) *goredis.Cmd {
	return b.do(ctx, "eval_ro", script, keys, args)
}

func (b *batcher) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *goredis.Cmd {
	return b.do(ctx, "evalsha_ro", sha1, keys, args)
}

func (b *batcher) ScriptExists(ctx context.Context, hashes ...string) *goredis.BoolSliceCmd {
	return b.c.ScriptExists(ctx, hashes...)
}

func (b *batcher) ScriptLoad(ctx context.Context, script string) *goredis.StringCmd {
	return b.c.ScriptLoad(ctx, script)
}

// do makes the command as go-redis's own Eval family does (the first key's position is what a
// cluster client routes it by) and runs it in a batch.
func (b *batcher) do(ctx context.Context, name, script string, keys []string, args []any) *goredis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := goredis.NewCmd(ctx, a...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	b.run(ctx, cmd)
	return cmd
}

// run queues cmd and returns once it is answered, sending the batch it is in when that falls
// to it.
func (b *batcher) run(ctx context.Context, cmd *goredis.Cmd) {
	me := &batched{cmd: cmd, ch: make(chan bool, 1)}
	b.mu.Lock()
	b.queue = append(b.queue, me)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !lead && !<-me.ch {
		return // answered in a batch another call sent
	}
	b.mu.Lock()
	batch := b.queue
	b.queue, b.spare = b.spare[:0], nil
	b.mu.Unlock()

	pipe := b.c.Pipeline()
	for _, c := range batch {
		_ = pipe.Process(ctx, c.cmd)
	}
	// Each command carries its own reply or error; Exec's is the first of them.
	_, _ = pipe.Exec(context.WithoutCancel(ctx))

	for _, c := range batch {
		if c != me {
			c.ch <- false
		}
	}
	clear(batch)
	b.mu.Lock()
	if b.spare == nil {
		b.spare = batch[:0]
	}
	if len(b.queue) == 0 {
		b.busy = false
	} else {
		b.queue[0].ch <- true // it sends the next batch, itself in it
	}
	b.mu.Unlock()
}
