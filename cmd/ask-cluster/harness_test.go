package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/client"
	"github.com/das-ask/ask/conformance"
	"github.com/das-ask/ask/gen"
)

// testLease is the replicas' lease in these tests: short, so the chaos test is quick.
const testLease = 2 * time.Second

// skipWithoutCluster skips t unless ASK_CLUSTER_TEST=1 and the processes the cluster runs are
// installed (redis-cli too for a Redis Cluster).
func skipWithoutCluster(t *testing.T, redisCluster bool) {
	t.Helper()
	script, bins, pkgs := "scripts/cluster-check.sh", []string{"redis-server", "nginx"}, "redis-server nginx-light"
	if redisCluster {
		script, bins, pkgs = "scripts/cluster-check-rediscluster.sh", []string{"redis-server", "redis-cli", "nginx"}, "redis-server redis-tools nginx-light"
	}
	if os.Getenv("ASK_CLUSTER_TEST") != "1" {
		t.Skipf("set ASK_CLUSTER_TEST=1 (%s does) to build and start the cluster's processes", script)
	}
	for _, bin := range bins {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install -y %s): the cluster runs the real processes", bin, pkgs)
		}
	}
}

// startCluster starts the cluster o says (Root, Dir and Lease, when unset, the repository's
// root, a directory of t's and testLease), or skips t as skipWithoutCluster does. Every process
// is stopped when t ends, after each one's log is shown if t failed.
func startCluster(t *testing.T, ctx context.Context, o Options) *Cluster {
	t.Helper()
	skipWithoutCluster(t, o.RedisCluster)
	if o.Root == "" {
		o.Root = "../.."
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Lease == 0 {
		o.Lease = testLease
	}
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
		c.Stop()
	})
	return c
}

// startSuiteCluster starts the cluster the whole conformance suite runs against: o's store,
// phase and Env, plus a keep-alive of 1 s, nginx's read timeout of 2 s, an overflow group and
// a limits group of two replicas each, the limits group with the suite's limits for a store of
// buckets buckets, and every replica admitting and signing for the suite's webhook receiver.
func startSuiteCluster(t *testing.T, buckets int, o Options) (*Cluster, suiteTargets) {
	t.Helper()
	skipWithoutCluster(t, o.RedisCluster) // before the receiver starts
	st := newSuiteTargets(t, buckets)
	o.KeepAlive, o.GatewayReadTimeout = time.Second, 2*time.Second
	o.OverflowReplicas, o.LimitsReplicas, o.LimitsEnv = 2, 2, st.limitsEnv
	o.Env = append(o.Env, st.webhookEnv...)
	return startCluster(t, t.Context(), o), st
}

// suiteConfig is the suite's configuration for every target c and st give it, behaviour checks
// included.
func suiteConfig(c *Cluster, st suiteTargets) conformance.Config {
	return conformance.Config{
		BaseURL:     c.GatewayURL,
		OverflowURL: c.OverflowURL,
		LimitsURL:   c.LimitsURL,
		Limits:      st.limits,
		Webhooks:    st.hooks,
		AuditURL:    c.SourceURL,
		Tokens:      conformance.IdPTokens{URL: c.IdPURL},
		Behaviour:   true,
		KeepAlive:   time.Second,
	}
}

// runSuite runs the suite with cfg and logs its report; a check that failed or was skipped
// (the cluster gives the suite every target it needs) fails t.
func runSuite(t *testing.T, cfg conformance.Config) {
	t.Helper()
	start := time.Now()
	rep, err := conformance.Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	_ = rep.WriteText(&out)
	t.Logf("\n%s(the suite took %v)", out.String(), time.Since(start).Round(100*time.Millisecond))
	what := "conformance"
	if cfg.Phase2 {
		what = "phase-2 conformance"
	}
	if rep.Failed() {
		t.Errorf("%s through the gateway failed: %s", what, rep.Summary())
	}
	for _, r := range rep.Results {
		if r.Status == conformance.Skip {
			t.Errorf("%s skipped: %s (the cluster gives the suite every target it needs)", r.Name, r.Detail)
		}
	}
}

// streamRead is what a test read of one ticket's stream: each event's seq and kind (an
// error's with its kind, error{interrupted}), and how many terminal events and dones came.
type streamRead struct {
	seqs             []int64
	kinds            []string
	terminals, dones int
}

// add notes ev.
func (r *streamRead) add(ev client.Event) {
	r.seqs = append(r.seqs, ev.Seq)
	kind := string(ev.Type)
	switch e := ev.Value.(type) {
	case gen.ErrorEvent:
		kind += "{" + string(e.Kind) + "}"
		r.terminals++
	case gen.AnswerEvent, gen.AbstentionEvent, gen.RefusalEvent:
		r.terminals++
	}
	r.kinds = append(r.kinds, kind)
	if ev.IsDone() {
		r.dones++
	}
}

// gapless reports whether the seqs read are 1, 2, … with no gap and no duplicate.
func (r *streamRead) gapless() bool {
	for i, s := range r.seqs {
		if s != int64(i+1) {
			return false
		}
	}
	return true
}

// String is the kinds read, in order.
func (r *streamRead) String() string { return strings.Join(r.kinds, " ") }

// askSlow asks the slow question (the first model turn is silent for 3 s) in a new
// conversation of cl's: the conversation, and the ask's ticket.
func askSlow(t *testing.T, ctx context.Context, cl *client.Client) (conv, ticket string) {
	t.Helper()
	cv, err := cl.CreateConversation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := cl.Ask(ctx, cv.Id, "Take your time: how many sev1 incidents did we have in 2026-Q2?")
	if err != nil {
		t.Fatal(err)
	}
	return cv.Id, tk.Ticket
}
