package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// RunOptions configure Run. Zero values mean defaults.
type RunOptions struct {
	// Out is where REPORT.md and report.json go; "" means "docs/bench". FINDINGS.md there, when it
	// exists, is embedded in REPORT.md.
	Out string
	// Exe is the askbench binary to re-execute for the server side; "" means this process's.
	Exe string
	// ModuleDir is the module root, for git and the microbenchmarks; "" means ".".
	ModuleDir string
	// Quick uses small sizes, for iterating; the report says so.
	Quick bool
	// NoMicro skips the Go microbenchmarks.
	NoMicro bool
	// KeepAlive is the service's keep-alive interval in the idle workload and the idle window
	// measured; 0 means the service's default (10 s).
	KeepAlive time.Duration
	// Only, when not empty, names the workloads to run (time-to-ticket, ask-end-to-end, ask-phase2,
	// stream-delivery, replay, peer-mcp, idle-streams, micro); the report has only their figures.
	Only []string
	// Redis runs time to ticket, stream delivery and replay once more against a child whose
	// store is Redis, on a redis-server the run starts (loopback, persistence off) and stops;
	// when redis-server is not on PATH the report says they were skipped.
	Redis bool
	// RedisCluster runs the same workloads once more on a Redis Cluster of three primaries
	// the run starts (redis-server --cluster-enabled yes, joined with redis-cli) and stops;
	// when redis-server or redis-cli is not on PATH the report says they were skipped.
	RedisCluster bool
	// RedisNice is the nice value (-20..19) each redis-server's main thread is given for the
	// run; 0 leaves the default, and a negative value needs CAP_SYS_NICE (refused, the run
	// says so and goes on at the default). RedisRun.Nice records it.
	RedisNice int
	// Logger receives progress; nil discards.
	Logger *slog.Logger

	// inProcess serves in this process instead of a child, and sizes replaces the sizes
	// (tests only).
	inProcess bool
	sizes     *sizes
}

// sizes of one run.
type sizes struct {
	ticket   ticketOptions
	delivery deliveryOptions
	e2e      e2eOptions
	idle     []int
	window   time.Duration // the idle window; 0 means the keep-alive interval
	replay   int
	peer     int
	phase2   int // rounds of the phase-2 workload: one phase-1 and one phase-2 ask each
}

func sizesFor(quick bool) sizes {
	if quick {
		return sizes{
			ticket:   ticketOptions{Levels: []int{1, 16, 64}, Requests: 200, Rounds: 2},
			delivery: deliveryOptions{Readers: []int{1, 100}, Events: func(r int) int { return max(100, 2000/r) }, Rounds: 1},
			e2e:      e2eOptions{Serial: 5, Concurrency: 4, Duration: time.Second},
			idle:     []int{100, 500, 1000},
			replay:   20,
			peer:     5,
			phase2:   5,
		}
	}
	return sizes{
		ticket:   ticketOptions{Levels: []int{1, 16, 64}, Requests: 2000, Rounds: 7},
		delivery: deliveryOptions{Readers: []int{1, 100}, Events: func(r int) int { return max(2000, 20000/r) }, Rounds: 5},
		e2e:      e2eOptions{Serial: 40, Concurrency: 8, Duration: 8 * time.Second},
		idle:     []int{1000, 5000, 10000},
		replay:   200,
		peer:     200, // nearest-rank p99 of 200 is the third largest, not the largest
		phase2:   40,
	}
}

// Run runs the suite and writes the report. A workload that fails is recorded in the report's
// Errors and the rest still run; Run fails only when the report cannot be written.
func Run(ctx context.Context, o RunOptions) (*Report, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Out == "" {
		o.Out = "docs/bench"
	}
	if o.ModuleDir == "" {
		o.ModuleDir = "."
	}
	if o.Exe == "" && !o.inProcess {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Exe = exe
	}
	keepAlive := o.KeepAlive
	if keepAlive <= 0 {
		keepAlive = 10 * time.Second
	}
	if o.Quick && o.KeepAlive <= 0 {
		keepAlive = time.Second
	}
	profDir, err := filepath.Abs(filepath.Join(o.Out, "profiles"))
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(profDir, 0o755); err != nil {
		return nil, err
	}
	nofile, err := RaiseNoFile()
	if err != nil {
		log.Warn("RLIMIT_NOFILE not raised", "err", err)
	}

	started := time.Now()
	sz := sizesFor(o.Quick)
	if o.sizes != nil {
		sz = *o.sizes
	}
	r := &Report{Machine: machine(ctx, o.ModuleDir), Quick: o.Quick}
	fail := func(workload string, err error) {
		log.Error("workload failed", "workload", workload, "err", err)
		r.Errors = append(r.Errors, workload+": "+err.Error())
	}
	start := func(so ServeOptions) (*child, error) {
		if o.inProcess {
			return startInProcess(ctx, so)
		}
		return startChild(ctx, o.Exe, so)
	}
	selected := func(name string) bool { return len(o.Only) == 0 || slices.Contains(o.Only, name) }
	// with runs one workload on a fresh child, under a CPU profile. With a store, the workload
	// is named "<name>-redis" in the log, the failures and the profiles.
	with := func(name string, so ServeOptions, f func(*child) error) {
		if !selected(name) {
			return
		}
		label := name
		switch {
		case strings.HasPrefix(so.Store, "redis+cluster://"):
			label += "-redis-cluster"
		case so.Store != "":
			label += "-redis"
		}
		log.Info("workload", "name", label)
		ch, err := start(so)
		if err != nil {
			fail(label, err)
			return
		}
		if !o.inProcess {
			ch.cpuFile = filepath.Join(profDir, label+".cpu.pprof")
		}
		err = f(ch) // f starts the profile (startCPU) when its setup is done
		if ch.stopCPU(ctx) {
			r.Profiles = append(r.Profiles, Profile{Workload: label, Kind: "cpu", File: ch.cpuFile})
		}
		err = errors.Join(err, ch.stop())
		if err != nil {
			fail(label, err)
		}
	}
	synth := ServeOptions{Mode: ModeSynthetic}

	with("time-to-ticket", synth, func(ch *child) (err error) {
		r.TimeToTicket, err = timeToTicket(ctx, ch, sz.ticket, nil, nil)
		return err
	})
	with("ask-end-to-end", ServeOptions{Mode: ModeStack}, func(ch *child) error {
		e, err := e2e(ctx, ch, sz.e2e)
		if err == nil {
			r.E2E = &e
		}
		return err
	})
	// What phase 2 costs per ask: a phase-1 and a phase-2 stack side by side, asked in turns.
	with("ask-phase2", ServeOptions{Mode: ModeStack, Phase: 1}, func(p1 *child) error {
		p2, err := start(ServeOptions{Mode: ModeStack, Phase: 2})
		if err != nil {
			return err
		}
		p1.startCPU(ctx)
		c, err := phase2(ctx, p1, p2, sz.phase2)
		if err == nil {
			r.Phase2 = &c
		}
		return errors.Join(err, p2.stop())
	})
	with("stream-delivery", synth, func(ch *child) (err error) {
		r.Delivery, err = delivery(ctx, ch, sz.delivery)
		return err
	})
	with("replay", synth, func(ch *child) error {
		rp, err := replay(ctx, ch, 1000, sz.replay)
		if err == nil {
			r.Replay = &rp
		}
		return err
	})
	with("peer-mcp", synth, func(ch *child) error {
		pe, err := peer(ctx, ch, 1000, sz.peer)
		if err == nil {
			r.Peer = &pe
		}
		return err
	})
	// The idle workload profiles its own idle window (not the setup) and the heap at its
	// largest level.
	if !selected("idle-streams") {
		// skipped
	} else if ch, err := start(ServeOptions{Mode: ModeSynthetic, KeepAlive: keepAlive}); err != nil {
		fail("idle-streams", err)
	} else {
		log.Info("workload", "name", "idle-streams")
		window := keepAlive
		if sz.window > 0 {
			window = sz.window
		}
		io := idleOptions{Levels: sz.idle, Window: window, KeepAlive: keepAlive}
		if !o.inProcess {
			io.CPUProfile = filepath.Join(profDir, "idle-streams.cpu.pprof")
			io.HeapProfile = filepath.Join(profDir, "idle-streams.heap.pprof")
		}
		id, err := idle(ctx, ch, io, nofile)
		if err == nil {
			r.Idle = &id
			if io.CPUProfile != "" {
				r.Profiles = append(r.Profiles,
					Profile{Workload: "idle-streams", Kind: "cpu", File: io.CPUProfile},
					Profile{Workload: "idle-streams", Kind: "heap", File: io.HeapProfile})
			}
		}
		if err = errors.Join(err, ch.stop()); err != nil {
			fail("idle-streams", err)
		}
	}

	// besideMemory is time to ticket on a Redis child with an in-memory child beside it, whose
	// ours is a third side of every round: the Redis rows' in-memory figure.
	besideMemory := func(ch *child, o ticketOptions, storeCPU func(context.Context) (time.Duration, error)) ([]TicketLevel, error) {
		mem, err := start(synth)
		if err != nil {
			return nil, fmt.Errorf("the in-memory child beside it: %w", err)
		}
		levels, err := timeToTicket(ctx, ch, o, storeCPU, mem)
		return levels, errors.Join(err, mem.stop())
	}
	// The Redis rows: the same workloads once more, each child's store a Redis of this run's.
	if o.Redis && slices.ContainsFunc(redisWorkloads, selected) {
		rr, srv, stopRedis, err := startRedis(ctx, o.RedisNice)
		r.Redis = rr
		if err != nil {
			fail("redis", err)
		}
		if srv != nil {
			log.Info("redis", "server", rr.Server, "addr", srv.Addr)
			withRedis := ServeOptions{Mode: ModeSynthetic, Store: srv.URL}
			with("time-to-ticket", withRedis, func(ch *child) (err error) {
				rr.TimeToTicket, err = besideMemory(ch, sz.ticket, redisCPU(srv.URL))
				return err
			})
			with("stream-delivery", withRedis, func(ch *child) (err error) {
				rr.Delivery, err = delivery(ctx, ch, redisDelivery(sz.delivery))
				return err
			})
			with("replay", withRedis, func(ch *child) error {
				rp, err := replay(ctx, ch, 1000, sz.replay)
				if err == nil {
					rr.Replay = &rp
				}
				return err
			})
			stopRedis()
		}
	}
	// The Redis Cluster's rows: the same once more, on three primaries.
	if o.RedisCluster && slices.ContainsFunc(redisWorkloads, selected) {
		rr, url, stopCluster, err := startRedisCluster(ctx, o.RedisNice)
		r.RedisCluster = rr
		if err != nil {
			fail("redis-cluster", err)
		}
		if url != "" {
			log.Info("redis cluster", "server", rr.Server, "primaries", rr.Primaries)
			csz := redisClusterSizes(sz)
			withCluster := ServeOptions{Mode: ModeSynthetic, Store: url}
			with("time-to-ticket", withCluster, func(ch *child) (err error) {
				rr.TimeToTicket, err = besideMemory(ch, csz.ticket, redisCPU(url))
				return err
			})
			with("stream-delivery", withCluster, func(ch *child) (err error) {
				rr.Delivery, err = delivery(ctx, ch, redisDelivery(csz.delivery))
				return err
			})
			with("replay", withCluster, func(ch *child) error {
				rp, err := replay(ctx, ch, 1000, csz.replay)
				if err == nil {
					rr.Replay = &rp
				}
				return err
			})
			stopCluster()
		}
	}

	if !o.NoMicro && selected("micro") {
		log.Info("microbenchmarks")
		benchtime := "300ms"
		if o.Quick {
			benchtime = "50ms"
		}
		ms, out, err := micro(ctx, o.ModuleDir, benchtime)
		r.Micro = ms
		if err != nil {
			fail("microbenchmarks", fmt.Errorf("%w: %s", err, lastLines(out, 20)))
		}
	}
	for i := range r.Profiles {
		pr := &r.Profiles[i]
		pr.Top = topOf(ctx, pr.File, pr.Kind, 12)
		pr.Ours = topOf(ctx, pr.File, pr.Kind, 14, "-cum", "-show=^github.com/das-ask/ask/")
		if rel, err := filepath.Rel(filepath.Dir(profDir), pr.File); err == nil {
			pr.File = rel // relative to Out: the report does not name this machine's paths
		}
	}
	r.Machine.LoadAfter = loadavg()
	r.DurationS = time.Since(started).Seconds()
	r.Targets = targets(r)
	findings, _ := os.ReadFile(filepath.Join(o.Out, "FINDINGS.md"))
	return r, r.write(o.Out, string(findings))
}

// RaiseNoFile raises this process's RLIMIT_NOFILE soft limit to its hard limit (children
// inherit it) and returns the limit in force.
func RaiseNoFile() (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, err
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			return l.Cur, err
		}
	}
	return l.Cur, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Render rewrites REPORT.md in dir from its report.json and FINDINGS.md, measuring nothing:
// for when the hand-written findings change after a run.
func Render(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("bench: %s: %w", filepath.Join(dir, "report.json"), err)
	}
	findings, _ := os.ReadFile(filepath.Join(dir, "FINDINGS.md"))
	return os.WriteFile(filepath.Join(dir, "REPORT.md"), []byte(r.markdown(string(findings))), 0o644)
}
