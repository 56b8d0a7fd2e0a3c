package redis_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	"github.com/das-ask/ask/store/redis/redistest"
)

// BenchmarkReadsPerEvent counts the Redis reads (XRANGE and HGET, from INFO commandstats) per
// appended event on one replica that runs a ticket and serves its readers, as a replica of the
// service does: readers follow the log as the SSE loop does, and the run's lease watch waits
// for the log's end (by the finished flag where the store has it, else by reading the log as
// the service did before). Reported as xrange/event and hget/event.
//
//	go test ./store/redis -run '^$' -bench ReadsPerEvent -benchtime 1x
func BenchmarkReadsPerEvent(b *testing.B) {
	for _, readers := range []int{1, 10, 100} {
		b.Run("readers="+strconv.Itoa(readers), func(b *testing.B) {
			srv := redistest.Start(b)
			rc := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
			b.Cleanup(func() { _ = rc.Close() })
			const events = 500
			var xr, hg int
			for b.Loop() {
				s := benchStore(b, srv, 0, 1)
				ctx := context.Background()
				x0, h0 := cmdCalls(b, rc, "xrange"), cmdCalls(b, rc, "hget")
				var wg sync.WaitGroup
				for range readers {
					wg.Go(func() {
						after := int64(0)
						for {
							bt, err := s.Read(ctx, "t", after)
							if err != nil {
								b.Error(err)
								return
							}
							if n := len(bt.Events); n > 0 {
								after = bt.Events[n-1].Seq
							}
							if bt.Finished {
								return
							}
							<-bt.Changed
						}
					})
				}
				wg.Go(func() { watchEnd(ctx, s) })
				for seq := int64(2); seq < 2+events; seq++ {
					if err := s.Append(ctx, "t", benchEvent(seq)); err != nil {
						b.Fatal(err)
					}
				}
				tail := []store.Event{
					{Seq: 2 + events, Type: gen.EventTypeAnswer, Data: []byte(`{}`)},
					{Seq: 3 + events, Type: gen.EventTypeDone, Data: []byte(`{}`)},
				}
				if err := s.Finish(ctx, "t", tail, ask.Turn{}); err != nil {
					b.Fatal(err)
				}
				wg.Wait()
				xr += cmdCalls(b, rc, "xrange") - x0
				hg += cmdCalls(b, rc, "hget") - h0
			}
			n := float64(b.N * (events + 2))
			b.ReportMetric(float64(xr)/n, "xrange/event")
			b.ReportMetric(float64(hg)/n, "hget/event")
		})
	}
}

// watchEnd waits for the ticket's end as the run's lease goroutine does.
func watchEnd(ctx context.Context, s store.Store) {
	type watcher interface {
		WatchFinished(ctx context.Context, ticket string) (bool, <-chan struct{}, error)
	}
	if w, ok := s.(watcher); ok {
		for {
			fin, ch, err := w.WatchFinished(ctx, "t")
			if err != nil || fin {
				return
			}
			<-ch
		}
	}
	after := int64(0)
	for {
		bt, err := s.Read(ctx, "t", after)
		if err != nil || bt.Finished {
			return
		}
		if n := len(bt.Events); n > 0 {
			after = bt.Events[n-1].Seq
		}
		<-bt.Changed
	}
}

func cmdCalls(b *testing.B, rc *goredis.Client, cmd string) int {
	b.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			return n
		}
	}
	return 0
}
