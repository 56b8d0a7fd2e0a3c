package redis

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/internal/redisserver"
)

// pipelines counts the pipelines of scripts a client sends and the scripts in them (a new
// connection's set-up is a pipeline too, of other commands).
type pipelines struct{ sent, cmds atomic.Int64 }

func (p *pipelines) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (p *pipelines) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return next
}
func (p *pipelines) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		var scripts int64
		for _, c := range cmds {
			if n := c.Name(); n == "eval" || n == "evalsha" {
				scripts++
			}
		}
		if scripts > 0 {
			p.sent.Add(1)
			p.cmds.Add(scripts)
		}
		return next(ctx, cmds)
	}
}

func batcherOn(t *testing.T) (*batcher, *pipelines, *goredis.Client, *redisserver.Server) {
	t.Helper()
	srv, err := redisserver.Run(t.Context(), t.TempDir())
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr, Protocol: 2, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	p := &pipelines{}
	c.AddHook(p)
	return newBatcher(c), p, c, srv
}

// TestBatcherSendsALoneCallAtOnce: a call with nothing else in flight is a pipeline of one,
// a script goes through Script.Run's NOSCRIPT fallback (EVALSHA, then EVAL) the same way, and
// a batch that fails leaves nothing in flight.
func TestBatcherSendsALoneCallAtOnce(t *testing.T) {
	b, p, _, srv := batcherOn(t)
	echo := goredis.NewScript(`return ARGV[1] .. KEYS[1]`)
	for i := range 3 {
		got, err := echo.Run(t.Context(), b, []string{"k"}, strconv.Itoa(i)).Text()
		if err != nil || got != strconv.Itoa(i)+"k" {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
	}
	// the first call: EVALSHA (NOSCRIPT), then EVAL; the next two: EVALSHA
	if s, c := p.sent.Load(), p.cmds.Load(); s != 4 || c != 4 {
		t.Errorf("%d pipelines of %d commands in all, want 4 of one each", s, c)
	}
	// A batch that fails fails its calls, and the next call is sent again (nothing stays in
	// flight): with Redis gone, each call errs on its own.
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := echo.Run(t.Context(), b, []string{"k"}, "x").Err(); err == nil {
			t.Fatalf("call %d with Redis stopped: no error", i)
		}
	}
}

// TestBatcherBatchesConcurrentCalls: calls made at once share pipelines, each gets its own
// reply, and one that fails (a script error) fails alone.
func TestBatcherBatchesConcurrentCalls(t *testing.T) {
	b, p, c, _ := batcherOn(t)
	incr := goredis.NewScript(`if ARGV[1] == 'fail' then return redis.error_reply('ERR asked to') end
return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	if err := incr.Load(t.Context(), c).Err(); err != nil {
		t.Fatal(err)
	}
	const callers, each = 64, 50
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range callers {
		wg.Go(func() {
			key := "n" + strconv.Itoa(w)
			for i := range each {
				arg := "1"
				if i == 7 {
					arg = "fail"
				}
				n, err := incr.Run(t.Context(), b, []string{key}, arg).Int64()
				switch {
				case arg == "fail" && err != nil:
					failed.Add(1)
				case arg == "fail":
					t.Errorf("%s: the failing script answered %d", key, n)
				case err != nil:
					t.Errorf("%s: %v", key, err)
				}
			}
		})
	}
	wg.Wait()
	for w := range callers {
		if n, err := c.Get(t.Context(), "n"+strconv.Itoa(w)).Int64(); err != nil || n != each-1 {
			t.Errorf("n%d = %d, %v; want %d: a call lost or run twice", w, n, err, each-1)
		}
	}
	if failed.Load() != callers {
		t.Errorf("%d failing calls failed, want %d", failed.Load(), callers)
	}
	s, n := p.sent.Load(), p.cmds.Load()
	if n != callers*each {
		t.Errorf("%d commands sent, want %d", n, callers*each)
	}
	if s >= n {
		t.Errorf("%d pipelines for %d commands: concurrent calls were not batched", s, n)
	}
	t.Logf("%d calls in %d pipelines (%.1f a pipeline)", n, s, float64(n)/float64(s))
}
