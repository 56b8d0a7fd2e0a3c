package server_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/server"
	"github.com/das-ask/ask/store/redis/redistest"
)

// TestFullRedis: Redis at its maxmemory with noeviction (docs/scale-out.md, "Sizing Redis")
// while one ask has finished and another runs. Reads go on: getAsk of both and the finished
// ask's whole stream, from a replica that had read nothing; the running ask's stream opens. A
// create is a 503 problem+json with Retry-After. The running ask's writes, refused for memory,
// are retried within its lease: once Redis has room again (before the lease) every event is
// there and the ask is answered; past the lease it ends error{interrupted} + done. Never a 500,
// never an ask given up at once. Found by a black-box audit: a full Redis answered every read
// 500 (EXECABORT: the reads were MULTIs), a create 500 (OOM), and gave running asks up.
func TestFullRedis(t *testing.T) {
	for _, pastLease := range []bool{false, true} {
		t.Run("past-lease="+strconv.FormatBool(pastLease), func(t *testing.T) {
			srv := redistest.Start(t)
			prefix := "full:" + rand.Text() + ":"
			lease := 5 * time.Second
			if pastLease {
				lease = 600 * time.Millisecond
			}
			mid, resume, stopped := make(chan string, 1), make(chan struct{}), make(chan string, 1)
			runner := ask.RunnerFunc(func(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
				if strings.HasPrefix(req.Question, "Finished:") {
					return answerRunner(2).Run(ctx, req, emit)
				}
				out := phasedRunner(3, 4, mid, resume).Run(ctx, req, emit)
				if pastLease {
					<-ctx.Done() // stopped once its writes were refused past the lease
					stopped <- req.Ticket
				}
				return out
			})
			a := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease), Runner: runner})
			b := newHarness(t, server.Options{Store: replicaStore(t, srv, prefix, lease)})
			finished := a.ask(alice, a.conv(alice), "Finished: how many sev1 incidents did we have in 2026-Q1?")
			checkLifecycle(t, a.events(alice, finished), gen.EventTypeAnswer)
			free := a.conv(alice)
			running := a.ask(alice, a.conv(alice), "How many sev1 incidents did we have in 2026-Q2?")
			within(t, mid, "the run's first steps")

			makeRoom := redistest.Fill(t, srv)
			rc := raw(t, srv)
			for _, tk := range []string{finished, running} {
				if r := b.status(alice, tk); r.StatusCode() != http.StatusOK {
					t.Fatalf("getAsk %s on a full Redis: %d %s", tk, r.StatusCode(), r.Body)
				}
			}
			checkLifecycle(t, b.events(alice, finished), gen.EventTypeAnswer)
			ctx, cancel := context.WithCancel(t.Context())
			resp := b.stream(ctx, alice, running, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the running ask's stream on a full Redis: %d", resp.StatusCode)
			}
			if f := newFrames(resp).next(t); f.Event != "accepted" {
				t.Errorf("the running ask's stream on a full Redis starts with %q", f.Event)
			}
			cancel()
			ra := a.askRaw(alice, free, "And in 2026-Q3?")
			pr := problemOf(t, ra.StatusCode(), ra.HTTPResponse.Header.Get("Content-Type"), ra.Body, http.StatusServiceUnavailable)
			if ra.HTTPResponse.Header.Get("Retry-After") == "" || pr.Detail == nil || strings.Contains(*pr.Detail, "internal") {
				t.Errorf("createAsk on a full Redis: Retry-After %q, detail %v", ra.HTTPResponse.Header.Get("Retry-After"), pr.Detail)
			}

			// The run goes on; Redis refuses its next write for memory (counted by Redis).
			refused := oomRefusals(t, rc)
			close(resume)
			redistest.Poll(t, "Redis refusing one of the run's writes", func() bool { return oomRefusals(t, rc) != refused })
			if pastLease {
				within(t, stopped, "the run stopping once its writes were refused past the lease")
			}
			makeRoom()
			frames := b.events(alice, running)
			if pastLease {
				terminal, done := checkLifecycle(t, frames, gen.EventTypeError)
				if terminal.Kind != string(gen.ErrorKindInterrupted) {
					t.Errorf("terminal kind %q, want interrupted", terminal.Kind)
				}
				if got := int64(countTypes(frames, "step")); done.Steps != got {
					t.Errorf("done.steps = %d, want the %d steps in the log", done.Steps, got)
				}
			} else {
				_, done := checkLifecycle(t, frames, gen.EventTypeAnswer)
				checkPhasedRun(t, frames, done, a)
			}
			for _, h := range []*harness{a, b} {
				logs := h.logs.String()
				if strings.Contains(logs, "giving the run up") || strings.Contains(logs, `"level":"ERROR"`) {
					t.Errorf("a run given up, or a 500: %s", logs)
				}
			}
			if r := a.askRaw(alice, free, "Finished: and in 2026-Q3, once there is room?"); r.StatusCode() != http.StatusAccepted {
				t.Errorf("createAsk once there is room: %d %s", r.StatusCode(), r.Body)
			}
		})
	}
}

// oomRefusals is how many commands c's Redis has refused for memory (INFO errorstats).
func oomRefusals(t *testing.T, c *goredis.Client) int {
	t.Helper()
	n, _ := strconv.Atoi(strings.TrimPrefix(redistest.Info(t, c, "errorstats", "errorstat_OOM"), "count="))
	return n
}
