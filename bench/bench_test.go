package bench

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSSECounter(t *testing.T) {
	in := ": ask events\nretry: 2000\n\n" +
		"id: 1\nevent: accepted\ndata: {\"seq\":1}\n\n" +
		": keepalive\n\n" +
		"id: 2\nevent: step\ndata: {\"seq\":2}\n\n" +
		"id: 3\nevent: done\ndata: {\"seq\":3}\n\n" +
		"id: 4\nevent: step\ndata: {}\n"
	s := newSSECounter(strings.NewReader(in))
	if err := s.untilComment(); err != nil {
		t.Fatal(err)
	}
	var ids, types []string
	err := s.until(func(f frame) bool {
		ids, types = append(ids, string(f.ID)), append(types, string(f.Event))
		return isDone(f)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(ids, ","), "1,2,3"; got != want {
		t.Errorf("ids = %s, want %s", got, want)
	}
	if got, want := strings.Join(types, ","), "accepted,step,done"; got != want {
		t.Errorf("types = %s, want %s", got, want)
	}
	if got, want := s.Frames, 3; got != want {
		t.Errorf("Frames = %d, want %d", got, want)
	}
	if got, want := s.Comments, 2; got != want {
		t.Errorf("Comments = %d, want %d", got, want)
	}
	// The last event has no blank line: the stream ends before it is dispatched.
	if err := s.until(isDone); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("until past the end = %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestIsRPCResult(t *testing.T) {
	for _, tc := range []struct {
		data string
		want bool
	}{
		{`{"jsonrpc":"2.0","method":"notifications/progress","params":{"message":"{\"result\":1}"}}`, false},
		{`{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`, true},
		{``, false},
	} {
		if got := isRPCResult(frame{Data: []byte(tc.data)}); got != tc.want {
			t.Errorf("isRPCResult(%s) = %v, want %v", tc.data, got, tc.want)
		}
	}
}

func TestSummarise(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarise(ds)
	want := Latency{N: 100, P50: 50, P99: 99, Mean: 50.5, Max: 100}
	if got != want {
		t.Errorf("summarise = %+v, want %+v", got, want)
	}
	if got := summarise(nil); got != (Latency{}) {
		t.Errorf("summarise(nil) = %+v, want zero", got)
	}
	if got, want := median([]float64{3, 1, 2, 10}), 2.5; got != want {
		t.Errorf("median = %v, want %v", got, want)
	}
}

func TestParseMicro(t *testing.T) {
	out := `goos: linux
pkg: github.com/das-ask/ask/store
BenchmarkAppend/retained-2         	 1000000	       380.3 ns/op	     269 B/op	       0 allocs/op
BenchmarkRead/after-0-2            	    5899	     43394 ns/op	   49152 B/op	       1 allocs/op
PASS
pkg: github.com/das-ask/ask/server
BenchmarkFrame/frame-2   	 7900432	        30.19 ns/op	11594.39 MB/s	       0 B/op	       0 allocs/op
`
	got := parseMicro(out)
	want := []Micro{
		{Package: "github.com/das-ask/ask/store", Name: "BenchmarkAppend/retained", NsPerOp: 380.3, BytesPerOp: 269},
		{Package: "github.com/das-ask/ask/store", Name: "BenchmarkRead/after-0", NsPerOp: 43394, BytesPerOp: 49152, AllocsPerOp: 1},
		{Package: "github.com/das-ask/ask/server", Name: "BenchmarkFrame/frame", NsPerOp: 30.19},
	}
	if len(got) != len(want) {
		t.Fatalf("parseMicro = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("parseMicro[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestTargets(t *testing.T) {
	r := &Report{
		TimeToTicket: []TicketLevel{{Concurrency: 64, RatioP50: 1.2, CPURatio: Spread{Median: 1.6}, Ours: Latency{P50: 4}}},
		Delivery:     []DeliveryLevel{{Readers: 1, Ratio: 0.9, Ours: 1000}, {Readers: 100, Ratio: 0.7, Ours: 10000}},
		Idle:         &Idle{Levels: []IdleLevel{{Streams: 10000, PerStreamBytes: 39 * kb}}},
		Replay:       &Replay{Events: 1000, Ours: Latency{P50: 6}},
		Redis: &RedisRun{
			// 1.98× section 1's in-memory p50, but 2.1× the in-memory side of its own rounds,
			// which is what is judged.
			TimeToTicket: []TicketLevel{{Concurrency: 64, Ours: Latency{P50: 7.9}, VsMemory: &VsMemory{Memory: Latency{P50: 3.8}, RatioP50: Spread{Median: 2.1}}}},
			Delivery:     []DeliveryLevel{{Readers: 1, Ours: 199}, {Readers: 100, Ours: 5000}},
			Replay:       &Replay{Events: 1000, Ours: Latency{P50: 13}},
		},
	}
	want := map[string]*bool{
		"time to ticket":                   met(false), // the p50 ratio is met, the CPU ratio is not
		"stream delivery":                  met(true),  // one reader judged; 100 readers shown only
		"idle streams":                     met(true),
		"replay":                           met(false),
		"peer":                             nil, // no figure
		"redis: time to ticket":            met(false),
		"redis: delivery to 1 reader(s)":   met(false),
		"redis: delivery to 100 reader(s)": met(true),
		"redis: replay":                    met(false),
	}
	ts := targets(r)
	if len(ts) != len(want) {
		t.Fatalf("%d targets, want %d", len(ts), len(want))
	}
	for _, tg := range ts {
		w, ok := want[tg.Name]
		if !ok {
			t.Errorf("unexpected target %q", tg.Name)
			continue
		}
		switch {
		case w == nil && tg.Met != nil:
			t.Errorf("%s: met = %v, want no figure", tg.Name, *tg.Met)
		case w != nil && (tg.Met == nil || *tg.Met != *w):
			t.Errorf("%s: met = %v, want %v", tg.Name, tg.Met, *w)
		}
	}
	r.Targets = ts
	md := r.markdown("a finding")
	for _, s := range []string{"| time to ticket |", "**not met**", "| peer |", "no figure", "## Findings\n\n", "a finding"} {
		if !strings.Contains(md, s) {
			t.Errorf("the Markdown report lacks %q", s)
		}
	}
}

// TestRunInProcess runs every workload at tiny sizes against servers in this process and
// checks that each produced its figures and the report files.
func TestRunInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts every server of the suite")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "FINDINGS.md"), []byte("hand-written"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Run(t.Context(), RunOptions{
		Out: dir, ModuleDir: "..", NoMicro: true, KeepAlive: 50 * time.Millisecond, inProcess: true,
		sizes: &sizes{
			ticket:   ticketOptions{Levels: []int{1, 4}, Requests: 40, Rounds: 2},
			delivery: deliveryOptions{Readers: []int{1, 3}, Events: func(int) int { return 50 }, Rounds: 1},
			e2e:      e2eOptions{Serial: 1, Concurrency: 2, Duration: 100 * time.Millisecond},
			idle:     []int{5, 10},
			window:   120 * time.Millisecond,
			replay:   2,
			peer:     1,
			phase2:   1,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) > 0 {
		t.Fatalf("workloads failed: %v", r.Errors)
	}
	if got := len(r.TimeToTicket); got != 2 {
		t.Errorf("%d time-to-ticket levels, want 2", got)
	}
	for _, l := range r.TimeToTicket {
		if l.Ours.N == 0 || l.Bare.N == 0 || l.RatioP50 <= 0 || l.RatioP50Spread.Rounds != 2 ||
			l.OursCPUUS <= 0 || l.BareCPUUS <= 0 || l.CPURatio.Median <= 0 || l.CPURatio.Min > l.CPURatio.Max {
			t.Errorf("time to ticket at %d: %+v", l.Concurrency, l)
		}
	}
	if r.E2E == nil || r.E2E.Outcomes["answer"] == 0 || len(r.E2E.Outcomes) != 1 {
		t.Errorf("end to end: %+v, want answers only", r.E2E)
	}
	for _, l := range r.Delivery {
		if l.Ours <= 0 || l.Bare <= 0 || l.BareBatched <= 0 || l.RatioSpread.Rounds != 1 || l.Ratio != l.RatioSpread.Median {
			t.Errorf("delivery to %d: %+v", l.Readers, l)
		}
	}
	if r.Idle == nil || len(r.Idle.Levels) != 2 || r.Idle.Levels[1].Goroutines <= r.Idle.BaselineGoroutines {
		t.Errorf("idle: %+v", r.Idle)
	} else if r.Idle.Levels[1].KeepAlives == 0 {
		t.Errorf("idle: no keep-alive reached a reader in the window")
	}
	if r.Replay == nil || r.Replay.Events != 1000 || r.Replay.Ours.N != 2 {
		t.Errorf("replay: %+v", r.Replay)
	}
	if r.Peer == nil || r.Peer.PeerReplay.N != 1 || r.Peer.LiveSpeedup <= 0 {
		t.Errorf("peer: %+v", r.Peer)
	}
	if p := r.Phase2; p == nil || p.Phase1.Outcomes["answer"] != 1 || p.Phase2.Outcomes["answer"] != 1 || p.Divergences != 1 ||
		p.Phase2.ModelCalls <= p.Phase1.ModelCalls || p.Ratio.ModelCalls <= 1 {
		t.Errorf("phase 2: %+v, want one answer each, a divergence, and more model calls in phase 2", p)
	}
	if r.Machine.GoVersion == "" || r.Machine.Date == "" {
		t.Errorf("machine: %+v", r.Machine)
	}
	md, err := os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "hand-written") {
		t.Error("REPORT.md does not embed FINDINGS.md")
	}
	if _, err := os.Stat(filepath.Join(dir, "report.json")); err != nil {
		t.Error(err)
	}

	// Render rewrites the Markdown from report.json with the findings as they are now.
	if err := os.WriteFile(filepath.Join(dir, "FINDINGS.md"), []byte("revised"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Render(dir); err != nil {
		t.Fatal(err)
	}
	md, err = os.ReadFile(filepath.Join(dir, "REPORT.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "revised") || !strings.Contains(string(md), "| time to ticket |") {
		t.Error("Render did not rewrite REPORT.md from report.json and FINDINGS.md")
	}
}

// TestBareBatch drives the batching baseline through a real server: every step frame in
// order, encoded as the service encodes a step, then the done.
func TestBareBatch(t *testing.T) {
	srv := httptest.NewServer(&bareStream{gates: newGates()})
	defer srv.Close()
	for _, mode := range []string{"batch", "end"} {
		resp, err := http.Get(srv.URL + "/?n=500&flush=" + mode)
		if err != nil {
			t.Fatal(err)
		}
		s := newSSECounter(resp.Body)
		seq := 0
		err = s.until(func(f frame) bool {
			seq++
			if string(f.ID) != strconv.Itoa(seq) {
				t.Fatalf("%s: frame %d has id %q", mode, seq, f.ID)
			}
			if string(f.Event) == "done" {
				return true
			}
			var ev struct {
				Seq  int    `json:"seq"`
				Type string `json:"type"`
				Tool string `json:"tool"`
			}
			if err := json.Unmarshal(f.Data, &ev); err != nil || ev.Seq != seq || ev.Type != "step" || ev.Tool != "run_query" {
				t.Fatalf("%s: frame %d: %+v, %v: %s", mode, seq, ev, err, f.Data)
			}
			return false
		})
		resp.Body.Close()
		if err != nil || seq != 501 {
			t.Fatalf("%s: %d frames, %v", mode, seq, err)
		}
	}
	resp, err := http.Get(srv.URL + "/?n=5&flush=each")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("flush=each: %s, want 400", resp.Status)
	}
}

// TestBareBatchShared: readers of one gate share one run, and each receives all of it.
func TestBareBatchShared(t *testing.T) {
	g := newGates()
	srv := httptest.NewServer(&bareStream{gates: g})
	defer srv.Close()
	var counters []*sseCounter
	for range 3 {
		resp, err := http.Get(srv.URL + "/?n=300&flush=batch&gate=k")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		s := newSSECounter(resp.Body)
		if err := s.untilComment(); err != nil {
			t.Fatal(err)
		}
		counters = append(counters, s)
	}
	g.release("k")
	for i, s := range counters {
		if err := s.until(isDone); err != nil || s.Frames != 301 {
			t.Errorf("reader %d: %d frames, %v", i, s.Frames, err)
		}
	}
}

// TestQuietWaitsForTheRuns: the child's /quiet answers only once the service holds no ask, so a
// burst's CPU reading waits for its runs' ends (a held run is one whose ticket was answered).
func TestQuietWaitsForTheRuns(t *testing.T) {
	ctx := t.Context()
	ch, err := startInProcess(ctx, ServeOptions{Mode: ModeSynthetic})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := ch.stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := ch.debug(ctx, "/quiet"); err != nil {
		t.Fatalf("quiet with no ask: %v", err)
	}
	tok, err := ch.token(ctx, "quiet")
	if err != nil {
		t.Fatal(err)
	}
	api, err := newAskAPI(ch.ep.Ask, ch.hc, tok)
	if err != nil {
		t.Fatal(err)
	}
	cid, err := api.conversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ticket, err := api.ask(ctx, cid, questionEmit(3, true)) // its run waits for the gate
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.debug(ctx, "/quiet?timeout=0"); err == nil || !strings.Contains(err.Error(), "1 asks still held") {
		t.Fatalf("quiet while a run is held: %v, want 1 ask still held", err)
	}
	quiet := make(chan error, 1)
	go func() { quiet <- ch.debug(ctx, "/quiet") }() // waits for the run
	if err := ch.release(ctx, ticket); err != nil {
		t.Fatal(err)
	}
	if err := <-quiet; err != nil {
		t.Fatalf("quiet after the run ended: %v", err)
	}
}
