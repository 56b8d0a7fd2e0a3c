package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/internal/faultproxy"
	"github.com/das-ask/ask/internal/redisserver"
)

// The chaos suite (`make chaos`; CI runs `-short`): the cluster through nginx under a bounded
// load, one fault per scenario, and a checker of every ticket (chaos_check.go). It prints one
// table.

// chaosScript is the llm-stub's script for the load: four tool calls, each after a model turn
// of 700 ms, so every run lasts about three seconds and faults land in the middle of runs.
const chaosScript = `models: [llm-stub]
fallback: "I can't answer that question with the tools I have."
on_error: "I'm sorry, I couldn't answer that: the {{.Failed.Tool}} call failed."
rules:
  - name: chaos-sev1
    pattern: '^\s*chaos \d+: how many sev1 incidents did we have in (?P<quarter>\d{4}-Q[1-4])\s*\?\s*$'
    steps:
      - tool: search_catalog
        args: {query: incident}
        delay: 700ms
      - tool: define_term
        args: {term: incident}
        delay: 700ms
      - tool: describe_table
        args: {table: incidents}
        delay: 700ms
      - tool: run_query
        args:
          sql: "SELECT COUNT(*) AS sev1_incidents FROM incidents WHERE severity = 'sev1' AND quarter = {{sqlquote .Match.quarter}}"
        delay: 700ms
    final: "We had {{index .Last.rows 0 0}} sev1 incidents in {{.Match.quarter}}."
`

// chaosScriptPhase2 is chaosScript in goal mode, for the load with -phase2: each branch makes
// the calls its tools allow (the source branch all four, the withheld branch, which has no
// catalog tool, the table's description and the query), and the supervisor's reconciliation,
// which sees every call made, answers without another.
var chaosScriptPhase2 = strings.Replace(chaosScript, "\n    steps:\n", "\n    mode: goal\n    steps:\n", 1)

// The chaos cluster's settings.
const (
	chaosLease     = 2 * time.Second
	chaosKeepAlive = 2 * time.Second
	chaosDeadline  = 90 * time.Second
	// chaosTicketBound is how long the load follows one ticket before calling it hung: the run's
	// deadline, a lease to notice a dead runner, and room.
	chaosTicketBound = chaosDeadline + 30*time.Second
	// durableSealEnv is the durable mode's key setting, which the Redis-restart scenario gives
	// every replica.
	durableSealEnv = "DAS_ASK_SEAL_KEYS"
)

type chaosOpts struct {
	short      bool
	asks       int
	workers    int
	only       string
	out        string
	dir        string
	forceEvery int
	verbose    bool
	// rcluster runs the scenarios on a Redis Cluster of three primaries, each with a replica:
	// those that need no single redis-server, and the cluster's own.
	rcluster bool
	// phase2 runs the replicas in phase 2 (ASK_PHASE=2: a branch per source and the withheld
	// branch, concurrent), so that every fault lands in the middle of branches.
	phase2 bool
}

// scenario is one fault under load.
type scenario struct {
	name string
	// fault runs once the load is under way and returns when the fault is over, describing
	// what it did; nil for none.
	fault func(ctx context.Context, e *chaosEnv) (string, error)
	// cancel makes the load cancel every ask at a random moment.
	cancel bool
	// durable runs in a cluster whose Redis keeps an AOF and whose replicas run durable mode.
	durable bool
	// short: part of the CI run.
	short bool
	// single needs the one redis-server (CLIENT PAUSE ALL on it, the fault proxy in front of
	// it, its AOF); rcluster needs the Redis Cluster (-redis-cluster). A scenario with
	// neither runs in both.
	single, rcluster bool
}

// chaosEnv is what a fault acts on.
type chaosEnv struct {
	c     *Cluster
	proxy *faultproxy.Proxy    // between replica 1 and Redis
	rdb   *goredis.Client      // the one redis-server; nil on a Redis Cluster
	rc    *redisserver.Cluster // the Redis Cluster; nil on one redis-server
	log   *slog.Logger
}

func scenarios() []scenario {
	pause := func(d time.Duration) func(context.Context, *chaosEnv) (string, error) {
		return func(ctx context.Context, e *chaosEnv) (string, error) {
			if err := e.rdb.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
				return "", err
			}
			sleepCtx(ctx, d+time.Second)
			return fmt.Sprintf("CLIENT PAUSE %v ALL", d), nil
		}
	}
	return []scenario{
		{name: "baseline (no fault)", short: true},
		{name: "replica SIGKILL + restart", short: true, fault: func(ctx context.Context, e *chaosEnv) (string, error) {
			i := mrand.IntN(len(e.c.ReplicaURLs))
			before := e.c.Restarts(i)
			e.c.Kill(i)
			for e.c.Restarts(i) == before && ctx.Err() == nil {
				sleepCtx(ctx, 50*time.Millisecond)
			}
			if err := e.c.WaitReplicaReady(ctx, i); err != nil {
				return "", err
			}
			return fmt.Sprintf("askd-%d killed, restarted by the cluster", i+1), nil
		}},
		{name: "replica SIGSTOP past the lease", short: true, fault: func(ctx context.Context, e *chaosEnv) (string, error) {
			i := mrand.IntN(len(e.c.ReplicaURLs))
			d := 3*chaosLease + time.Second
			if err := e.c.Freeze(i); err != nil {
				return "", err
			}
			sleepCtx(context.WithoutCancel(ctx), d)
			if err := e.c.Thaw(i); err != nil {
				return "", err
			}
			return fmt.Sprintf("askd-%d stopped %v (lease %v)", i+1, d, chaosLease), nil
		}},
		{name: "Redis CLIENT PAUSE 15 s", short: true, single: true, fault: pause(15 * time.Second)},
		{name: "Redis CLIENT PAUSE 30 s", single: true, fault: pause(30 * time.Second)},
		{name: "redis-server SIGSTOP 15 s", single: true, fault: func(ctx context.Context, e *chaosEnv) (string, error) {
			// Frozen, not paused: Redis answers nothing, the subscriptions' connections included.
			pid := e.c.redis.Pid()
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				return "", err
			}
			sleepCtx(context.WithoutCancel(ctx), 15*time.Second)
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				return "", err
			}
			return "redis-server SIGSTOPped 15s, then SIGCONT", nil
		}},
		{name: "lost replies, askd-1 ↔ Redis", short: true, single: true, fault: func(ctx context.Context, e *chaosEnv) (string, error) {
			// Every 300 ms for 12 s, the reply to the next script call (evalsha: appends,
			// admission, finish, cancel, leases) from askd-1 is lost after Redis ran it.
			start := e.proxy.Stats().RepliesDropped
			for end := time.Now().Add(12 * time.Second); time.Now().Before(end) && ctx.Err() == nil; {
				e.proxy.DropReplies(1, "evalsha", faultproxy.Close) // go-redis sends the command lower-case
				sleepCtx(ctx, 300*time.Millisecond)
			}
			e.proxy.Disarm()
			return fmt.Sprintf("%d replies lost", e.proxy.Stats().RepliesDropped-start), nil
		}},
		{name: "cancel storm", short: true, cancel: true},
		{name: "Redis SIGKILL + restart (durable mode)", durable: true, short: true, single: true, fault: func(ctx context.Context, e *chaosEnv) (string, error) {
			if err := e.c.KillRedis(); err != nil {
				return "", err
			}
			sleepCtx(ctx, time.Second)
			if err := e.c.RestartRedis(ctx); err != nil {
				return "", err
			}
			return "redis-server SIGKILLed, restarted on its AOF 1 s later", nil
		}},
		{name: "Redis Cluster: every primary failed over (CLUSTER FAILOVER)", short: true, rcluster: true, fault: failoverEach},
		{name: "Redis Cluster: a primary SIGKILLed, its replica elected", short: true, rcluster: true, fault: killPrimary},
		{name: "Redis Cluster: the replicas' subscription primary SIGSTOPped 15 s", rcluster: true, fault: freezeSubscriptionPrimary},
		{name: "Redis Cluster: the service's slots migrated live", short: true, rcluster: true, fault: migrateSlots},
	}
}

func runChaos(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ask-cluster chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o chaosOpts
	fs.BoolVar(&o.short, "short", false, "the CI version: fewer asks, the scenarios marked short")
	fs.IntVar(&o.asks, "asks", 0, "asks per scenario (default 200, -short 36)")
	fs.IntVar(&o.workers, "workers", 0, "concurrent clients, each its own identity (default 12, -short 6)")
	fs.StringVar(&o.only, "run", "", "only the scenarios whose name contains this")
	fs.StringVar(&o.out, "out", "", "also write the table (and the first anomalies) to this file")
	fs.StringVar(&o.dir, "dir", "", "keep the cluster's files here (default a temporary directory)")
	fs.IntVar(&o.forceEvery, "force-reconnect", 4, "drop each stream after about every N events and resume with Last-Event-ID (0: never)")
	fs.BoolVar(&o.verbose, "v", false, "echo every process's output")
	fs.BoolVar(&o.phase2, "phase2", false, "run the replicas in phase 2 (a branch per source, and the withheld branch): every scenario's faults land in the middle of branches, and every ticket's branches are checked too")
	fs.BoolVar(&o.rcluster, "redis-cluster", false, "on a Redis Cluster of three primaries with a replica each: the scenarios that need no single redis-server, and the cluster's own: failovers, a primary SIGKILLed, the subscription's primary frozen, slots migrated (with -short: the cluster's own only, the freeze left out)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.asks <= 0 {
		o.asks = map[bool]int{false: 200, true: 36}[o.short]
	}
	if o.workers <= 0 {
		o.workers = map[bool]int{false: 12, true: 6}[o.short]
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var plain, durable []scenario
	for _, s := range scenarios() {
		if (o.short && !s.short) || (o.only != "" && !strings.Contains(s.name, o.only)) {
			continue
		}
		switch {
		case o.rcluster && s.single, !o.rcluster && s.rcluster:
			continue
		case o.rcluster && o.short && !s.rcluster && (s.fault != nil || s.cancel):
			// The CI run of the cluster: its own faults (the rest run on one redis-server in
			// the other CI step), beside the baseline.
			continue
		}
		if s.durable {
			durable = append(durable, s)
		} else {
			plain = append(plain, s)
		}
	}
	started := time.Now()
	var rows []row
	if len(plain) > 0 {
		r, err := runGroup(ctx, o, log, plain, false)
		rows = append(rows, r...)
		if err != nil {
			return err
		}
	}
	for _, s := range durable {
		r, err := runGroup(ctx, o, log, []scenario{s}, true)
		rows = append(rows, r...)
		if err != nil {
			return err
		}
	}
	var b bytes.Buffer
	store := "one redis-server"
	if o.rcluster {
		store = fmt.Sprintf("a Redis Cluster of %d primaries with a replica each (node timeout %v)", clusterPrimaries, redisserver.NodeTimeout)
	}
	phase := ""
	if o.phase2 {
		phase = ", phase 2 (a branch per source, and the withheld branch)"
	}
	fmt.Fprintf(&b, "chaos: %d asks per scenario, %d clients, lease %v, forced reconnect every ~%d events, the store on %s%s; %v in all\n\n",
		o.asks, o.workers, chaosLease, o.forceEvery, store, phase, time.Since(started).Round(time.Second))
	writeTable(&b, rows)
	anomalies := 0
	for _, r := range rows {
		anomalies += r.Anomalies()
		if len(r.Examples) > 0 {
			fmt.Fprintf(&b, "\n%s, first findings:\n", r.Scenario)
			for _, ex := range r.Examples {
				fmt.Fprintf(&b, "  - %s\n", ex)
			}
		}
	}
	_, _ = stdout.Write(b.Bytes())
	if o.out != "" {
		if err := os.WriteFile(o.out, b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	if anomalies > 0 {
		return fmt.Errorf("chaos: %d broken promises (see the table)", anomalies)
	}
	return nil
}

// runGroup starts one cluster and runs the scenarios against it in turn.
func runGroup(ctx context.Context, o chaosOpts, log *slog.Logger, list []scenario, durable bool) ([]row, error) {
	dir := o.dir
	if dir != "" {
		dir = filepath.Join(dir, map[bool]string{false: "plain", true: "durable"}[durable])
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	} else {
		d, err := os.MkdirTemp("", "ask-chaos-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	script, body, phase := filepath.Join(dir, "chaos-script.yaml"), chaosScript, 0
	if o.phase2 {
		body, phase = chaosScriptPhase2, 2
	}
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		return nil, err
	}
	var proxy *faultproxy.Proxy
	var proxyErr error
	opts := Options{
		Root: ".", Dir: dir, KeepDir: true, Lease: chaosLease, KeepAlive: chaosKeepAlive, Deadline: chaosDeadline,
		GatewayReadTimeout: 10 * time.Second, StubScript: script, Logger: log, DurableRedis: durable, Phase: phase,
		RedisCluster: o.rcluster, RedisClusterReplicas: 1,
		ReplicaStore: func(i int, redisURL string) string {
			if o.rcluster {
				// A cluster client follows the nodes' own addresses (MOVED): no proxy fits.
				return redisURL
			}
			if i != 0 {
				return redisURL
			}
			u, err := url.Parse(redisURL)
			if err != nil {
				proxyErr = err
				return redisURL
			}
			if proxy, proxyErr = faultproxy.New(u.Host); proxyErr != nil {
				return redisURL
			}
			u.Host = proxy.Addr()
			return u.String()
		},
	}
	if o.verbose {
		opts.Echo = os.Stderr
	}
	if durable {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		opts.ReplicaEnv = []string{durableSealEnv + "=k1:" + base64.StdEncoding.EncodeToString(key)}
	}
	c, err := Start(ctx, opts)
	if proxy != nil {
		defer proxy.Close()
	}
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	if proxyErr != nil {
		return nil, proxyErr
	}
	env := &chaosEnv{c: c, proxy: proxy, rc: c.RedisCluster(), log: log}
	if env.rc == nil {
		env.rdb = goredis.NewClient(&goredis.Options{Addr: strings.TrimPrefix(strings.TrimSuffix(c.RedisURL, "/0"), "redis://")})
		defer env.rdb.Close()
	}
	ld, err := newLoad(ctx, c, o.workers, o.forceEvery)
	if err != nil {
		return nil, err
	}
	exp, err := ld.calibrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("chaos: the calibration ask: %w", err)
	}
	exp.MaxEvents = 1000
	if o.phase2 && len(exp.Branches) == 0 {
		return nil, errors.New("chaos: -phase2, but the calibration ask opened no branch below the supervisor's")
	}
	log.Info("chaos: calibrated", "steps", exp.Steps, "milestones", exp.Milestones, "branches", exp.Branches)
	var rows []row
	for _, s := range list {
		log.Info("chaos: scenario", "name", s.name, "asks", o.asks)
		r := ld.run(ctx, env, s, o.asks, exp)
		log.Info("chaos: scenario done", "name", s.name, "tickets", r.Tickets, "anomalies", r.Anomalies(), "client_errors", r.ClientErrs, "took", r.Duration.Round(time.Second))
		rows = append(rows, r)
		// The next scenario starts on a whole cluster.
		for i := range c.ReplicaURLs {
			_ = c.Thaw(i)
			if err := c.WaitReplicaReady(ctx, i); err != nil {
				return rows, err
			}
		}
	}
	return rows, nil
}

// load is the chaos load: workers, each an identity with its Go client (idempotent creates
// and retries) and a raw stream reader.
type load struct {
	c       *Cluster
	workers []*worker
	force   int
	retries atomic.Int64
}

type worker struct {
	id     int
	cl     *client.Client
	reader streamReader
	conv   string
	turns  int
}

func newLoad(ctx context.Context, c *Cluster, n, force int) (*load, error) {
	ld := &load{c: c, force: force}
	counter := &countingHandler{n: &ld.retries}
	for i := range n {
		tok, err := mintToken(ctx, c.IdPURL, fmt.Sprintf("chaos-%d", i+1))
		if err != nil {
			return nil, err
		}
		cl, err := client.New(c.GatewayURL, client.Options{
			Token: client.StaticToken(tok), Logger: slog.New(counter),
			Retry: client.Retry{Attempts: 12, Max: 4 * time.Second},
		})
		if err != nil {
			return nil, err
		}
		ld.workers = append(ld.workers, &worker{id: i, cl: cl, reader: streamReader{
			base: c.GatewayURL, token: tok, idle: 4 * chaosKeepAlive,
			http: &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 15 * time.Second, MaxIdleConnsPerHost: 4}},
		}})
	}
	return ld, nil
}

// calibrate makes one ask with no fault and takes what it carried as what an answer carries.
func (ld *load) calibrate(ctx context.Context) (expectation, error) {
	tr := ld.workers[0].ask(ctx, ld, 0, false)
	if tr.CreateErr != nil || !tr.LiveDone {
		return expectation{}, errors.Join(tr.CreateErr, tr.LiveErr, errors.New("no done"))
	}
	var exp expectation
	for _, e := range tr.Live {
		switch e.Type {
		case "step":
			exp.Steps++
		case "milestone":
			exp.Milestones++
		case "branch":
			if b := eventBody(e); b["state"] == "open" && b["role"] != "supervisor" {
				role, _ := b["role"].(string)
				src, _ := b["source"].(string)
				exp.Branches = append(exp.Branches, role+"/"+src)
			}
		case "error":
			return exp, errors.New("the calibration ask ended in an error")
		}
	}
	return exp, nil
}

// run makes asks asks spread over the workers while the scenario's fault strikes, then checks
// every ticket.
func (ld *load) run(ctx context.Context, env *chaosEnv, s scenario, asks int, exp expectation) row {
	r := row{Scenario: s.name}
	start := time.Now()
	retries := ld.retries.Load()
	var next atomic.Int64
	var mu sync.Mutex
	var runs []ticketRun
	var wg sync.WaitGroup
	for _, w := range ld.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := next.Add(1)
				if n > int64(asks) || ctx.Err() != nil {
					return
				}
				tr := w.ask(ctx, ld, int(n), s.cancel)
				mu.Lock()
				runs = append(runs, tr)
				mu.Unlock()
			}
		}()
	}
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		if s.fault == nil {
			return
		}
		// Strike once the load is under way: some runs in the middle of their work.
		sleepCtx(ctx, 4*time.Second)
		what, err := s.fault(ctx, env)
		if err != nil {
			what = "the fault failed: " + err.Error()
		}
		mu.Lock()
		r.Fault = what
		mu.Unlock()
	}()
	wg.Wait()
	<-faultDone
	for _, tr := range runs {
		r.add(tr, check(tr, exp))
	}
	r.Retries = int(ld.retries.Load() - retries)
	if r.Retries > 0 {
		r.Fault = strings.TrimSpace(r.Fault + fmt.Sprintf("; %d client retries", r.Retries))
	}
	r.Fault = strings.TrimPrefix(r.Fault, "; ")
	r.Duration = time.Since(start)
	return r
}

// ask makes one ask and follows it: the stream with forced reconnects, getAsk, and a replay.
func (w *worker) ask(ctx context.Context, ld *load, n int, cancel bool) ticketRun {
	var tr ticketRun
	if w.conv == "" || w.turns >= 40 {
		conv, err := w.cl.CreateConversation(ctx)
		if err != nil {
			tr.CreateErr = fmt.Errorf("createConversation: %w", err)
			return tr
		}
		w.conv, w.turns = conv.Id, 0
	}
	q := fmt.Sprintf("chaos %d: how many sev1 incidents did we have in 2026-Q2?", n)
	tk, err := w.cl.Ask(ctx, w.conv, q)
	if err != nil {
		tr.CreateErr = err
		if errors.Is(err, client.ErrConflict) || errors.Is(err, client.ErrNotFound) {
			w.conv = "" // a conversation the service no longer lets us use: start another
		}
		return tr
	}
	w.turns++
	tr.Ticket = tk.Ticket
	var cancelled sync.WaitGroup
	if cancel {
		tr.Cancelled = true
		cancelled.Add(1)
		go func() {
			defer cancelled.Done()
			sleepCtx(ctx, time.Duration(mrand.Int64N(int64(3500*time.Millisecond))))
			if _, err := w.cl.Cancel(ctx, tk.Ticket); err != nil {
				tr.CancelErr = err
			}
		}()
	}
	tctx, stop := context.WithTimeout(ctx, chaosTicketBound)
	tr.Live, tr.LiveDone, tr.Reconnects, tr.LiveErr = w.reader.read(tctx, tk.Ticket, 0, ld.force)
	tr.TimedOut = tctx.Err() != nil && ctx.Err() == nil
	stop()
	cancelled.Wait()
	if st, err := w.cl.Status(ctx, tk.Ticket, 0); err != nil {
		tr.StatusErr = err
	} else {
		tr.StatusState, tr.StatusDone, tr.StatusLast = string(st.State), st.Done != nil, st.LastSeq
	}
	if tr.LiveDone {
		rctx, stop := context.WithTimeout(ctx, time.Minute)
		tr.Replay, tr.ReplayDone, _, tr.ReplayErr = w.reader.read(rctx, tk.Ticket, 0, 0)
		stop()
	}
	return tr
}

// mintToken asks the dev IdP for a token for oid.
func mintToken(ctx context.Context, idp, oid string) (string, error) {
	body, _ := json.Marshal(map[string]any{"oid": oid, "ttl_s": 4 * 3600})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, idp+"/token", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("the dev IdP gave no token for %s (%d)", oid, resp.StatusCode)
	}
	return tr.AccessToken, nil
}

// countingHandler counts the Go client's retries (its "request retrying" lines) and drops
// every log line.
type countingHandler struct{ n *atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "request retrying" {
		h.n.Add(1)
	}
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
