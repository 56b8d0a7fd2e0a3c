package redis_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
	redisstore "github.com/das-ask/ask/store/redis"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestAskCycleCost measures what a trivial ask's two scripts (creation, then the end) cost
// under load, the store alone: 64 owners, each asking in turn in conversations made
// beforehand, as askbench's time to ticket does. It reports redis-server's CPU per ask (INFO
// cpu), this process's (getrusage: the store's client side, go-redis included) and INFO
// commandstats per ask. It is a measurement, not a check: it runs only with ASK_REDIS_COST set
// (to the asks per owner per round; e.g. ASK_REDIS_COST=100 go test ./store/redis -run
// TestAskCycleCost -v; ASK_REDIS_COST_PROFILE=file writes a CPU profile of the rounds).
//
// With ASK_REDIS_COST_CALLGRIND=1 it runs redis-server under callgrind and also reports the
// instructions it executed per ask over the rounds: a count that repeats to about 0.1% from
// run to run, where CPU time varies by tens of percent on this machine, so that a change to
// the scripts can be measured by itself (ASK_REDIS_COST=20 is enough; valgrind slows the
// server fifty-fold). ASK_REDIS_COST_CALLGRIND=file keeps callgrind's count in file, for
// callgrind_annotate. ASK_REDIS_COST_CONFIG="name value" sets a server setting first (CONFIG
// SET), to measure its effect: "zset-max-listpack-entries 16", say (docs/scale-out.md).
func TestAskCycleCost(t *testing.T) {
	per, _ := strconv.Atoi(os.Getenv("ASK_REDIS_COST"))
	if per <= 0 {
		t.Skip("a measurement: set ASK_REDIS_COST to the asks per owner per round")
	}
	const owners, rounds = 64, 5
	ctx := context.Background()
	var srv *redistest.Server
	var cg *redistest.Callgrind
	if os.Getenv("ASK_REDIS_COST_CALLGRIND") != "" {
		cg = redistest.StartCallgrind(t)
		srv = cg.Server
	} else {
		srv = redistest.Start(t)
	}
	s, err := redisstore.New(ctx, redisstore.Options{URL: srv.URL, Prefix: "cost:" + rand.Text() + ":"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	info := goredis.NewClient(&goredis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = info.Close() })
	redistest.Configure(t, info, os.Getenv("ASK_REDIS_COST_CONFIG"))
	limits := store.Limits{MaxInFlightPerOwner: 1 << 20, MaxTickets: 1 << 22, MaxConversationsPerOwner: 1 << 22,
		MaxRetainedPerOwner: 1 << 22, MaxTurns: 50}
	convs := make([][]string, owners)
	ownerOf := func(i int) store.Owner { return store.Owner{Tenant: "bench", OID: fmt.Sprintf("bench-w%d", i)} }
	for i := range owners {
		for range per * rounds {
			id := "c_" + rand.Text() + "-" + s.Home(ownerOf(i))
			if err := s.CreateConversation(ctx, store.Conversation{ID: id, Owner: ownerOf(i), CreatedAt: time.Now()}, limits); err != nil {
				t.Fatal(err)
			}
			convs[i] = append(convs[i], id)
		}
	}
	next := make([]int, owners)
	defer redistest.ProfileCPU(t, os.Getenv("ASK_REDIS_COST_PROFILE"))() // a CPU profile of the rounds alone
	if cg != nil {
		cg.Zero(t)
		defer func() {
			n, path := cg.Dump(t)
			t.Logf("redis-server under callgrind: %.0f instructions per ask over the %d rounds",
				float64(n)/float64(owners*per*rounds), rounds)
			if keep := os.Getenv("ASK_REDIS_COST_CALLGRIND"); keep != "1" {
				b, err := os.ReadFile(path)
				if err == nil {
					err = os.WriteFile(keep, b, 0o600)
				}
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for r := range rounds {
		cpu0, stats0, self0 := redistest.CPU(t, info), redistest.CommandStats(t, info), redistest.SelfCPU()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range owners {
			wg.Go(func() {
				for range per {
					cid := convs[i][next[i]]
					next[i]++
					tid := "t_" + rand.Text() + "-" + s.Home(ownerOf(i))
					now := time.Now()
					env := func(seq int, typ string, body string) store.Event {
						return store.Event{Seq: int64(seq), Type: gen.EventType(typ), Data: []byte(`{"seq":` + strconv.Itoa(seq) +
							`,"ticket":"` + tid + `","conversation_id":"` + cid + `","ts":"` + now.Format(time.RFC3339Nano) + `","type":"` + typ + `"` + body + `}`)}
					}
					nt := store.NewTicket{ID: tid, ConversationID: cid, Owner: ownerOf(i), CreatedAt: now,
						Accepted: env(1, "accepted", `,"question":"How many sev1 incidents did we have in 2026-Q2?"`),
						Question: "How many sev1 incidents did we have in 2026-Q2?",
						Then:     []store.Event{env(2, "branch", `,"branch":"supervisor","op":"open"`)}}
					if _, err := s.CreateTicket(ctx, nt, limits); err != nil {
						t.Error(err)
						return
					}
					tail := []store.Event{env(3, "branch", `,"branch":"supervisor","op":"close"`),
						env(4, "answer", `,"text":"There were 3 sev1 incidents in 2026-Q2.","citations":[]`),
						env(5, "done", `,"steps":0,"model_calls":1,"input_tokens":120,"output_tokens":30,"elapsed_ms":1`)}
					if _, err := s.FinishCounted(ctx, tid, tail, ask.Turn{Question: nt.Question, Outcome: gen.EventTypeAnswer, Text: "There were 3."}); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		took := time.Since(start)
		n := float64(owners * per)
		cpu1, stats1, self1 := redistest.CPU(t, info), redistest.CommandStats(t, info), redistest.SelfCPU()
		var calls float64
		var lines []string
		for name, v := range stats1 {
			d := [2]float64{v[0] - stats0[name][0], v[1] - stats0[name][1]}
			if d[0] <= 0 || name == "info" {
				continue
			}
			calls += d[0]
			lines = append(lines, fmt.Sprintf("%-10s %5.2f calls %6.2f µs", name, d[0]/n, d[1]/n))
		}
		sort.Strings(lines)
		t.Logf("round %d: %.0f asks/s; redis-server %.1f µs/ask, this process %.1f µs/ask, %.1f commands/ask",
			r, n/took.Seconds(), float64((cpu1-cpu0).Microseconds())/n, float64((self1-self0).Microseconds())/n, calls/n)
		if r == rounds-1 {
			t.Log("per ask (INFO commandstats): " + strings.Join(lines, "; "))
		}
	}
}
