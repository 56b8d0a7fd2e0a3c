package redisserver_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/das-ask/ask/internal/redisserver"
)

// startCluster starts a cluster for t, stopped (and checked stopped) when t ends.
func startCluster(t *testing.T, primaries, replicas int) *redisserver.Cluster {
	t.Helper()
	for _, bin := range []string{redisserver.Binary, redisserver.CLI} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install -y redis-server, which brings redis-tools): the cluster is the real thing", bin)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := redisserver.RunCluster(ctx, t.TempDir(), primaries, replicas)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
		for _, n := range c.Nodes {
			if n.Running() {
				t.Errorf("node %s still running after Stop", n.Addr)
			}
			if conn, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
				conn.Close()
				t.Errorf("node %s still accepts connections after Stop", n.Addr)
			}
		}
	})
	return c
}

// keyOn returns a key whose slot primary p owns.
func keyOn(t *testing.T, ctx context.Context, c *redisserver.Cluster, p *redisserver.Node) string {
	t.Helper()
	for i := range 10000 {
		k := fmt.Sprintf("k%d", i)
		slot, err := c.KeySlot(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if o, err := c.SlotOwner(ctx, slot); err == nil && o == p {
			return k
		}
	}
	t.Fatalf("no key on %s", p.Addr)
	return ""
}

func TestRunClusterThreePrimaries(t *testing.T) {
	c := startCluster(t, 3, 0)
	ctx := t.Context()
	if got := len(c.Nodes); got != 3 {
		t.Fatalf("nodes %d, want 3", got)
	}
	ps, err := c.Primaries(ctx)
	if err != nil || len(ps) != 3 {
		t.Fatalf("primaries %v, %v; want 3", ps, err)
	}
	// The slots are spread: each primary owns about a third, and together all of them.
	covered := 0
	for _, n := range c.Nodes {
		view, err := c.View(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(view) != 3 {
			t.Errorf("%s knows %d nodes, want 3", n.Addr, len(view))
		}
		for _, ni := range view {
			if ni.Has("myself") {
				for _, r := range ni.Slots {
					covered += r[1] - r[0] + 1
				}
			}
		}
	}
	if covered != redisserver.Slots {
		t.Errorf("slots covered %d, want %d", covered, redisserver.Slots)
	}
	// A cluster client reaches every primary through the seeds, following MOVED.
	rdb := c.Client()
	defer rdb.Close()
	want := map[string]*redisserver.Node{}
	for _, p := range ps {
		k := keyOn(t, ctx, c, p)
		if err := rdb.Set(ctx, k, p.Addr, 0).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := c.Do(ctx, p, "GET", k)
		if err != nil || got != p.Addr {
			t.Errorf("GET %s on its owner %s: %v, %v", k, p.Addr, got, err)
		}
		want[k] = p
	}
	// Scan finds each key on the primary that holds it.
	found, err := c.Scan(ctx, "k*")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != len(want) {
		t.Errorf("Scan found %d keys, want %d", len(found), len(want))
	}
	for k, p := range want {
		if found[k] != p {
			t.Errorf("Scan: %s on %v, want %s", k, found[k], p.Addr)
		}
	}
	// The URL names every node, in the service's redis+cluster:// form.
	if got, want := c.URL(), "redis+cluster://"+strings.Join(c.Addrs(), ","); got != want || len(c.Addrs()) != 3 {
		t.Errorf("URL %s, want %s", got, want)
	}
}

func TestRunClusterRefusesFewerThanThreePrimaries(t *testing.T) {
	if _, err := redisserver.RunCluster(t.Context(), t.TempDir(), 2, 0); err == nil || !strings.Contains(err.Error(), "at least 3") {
		t.Errorf("RunCluster with 2 primaries: %v, want an error saying at least 3", err)
	}
}

// TestClusterFaults drives the faults the service's tests use on a cluster with a replica per
// primary: a manual failover, a replica killed and restarted, a primary killed and replaced by
// its replica then restarted as a replica, and a slot migrated live; the data written before
// each stays readable through a cluster client.
func TestClusterFaults(t *testing.T) {
	c := startCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if len(c.Nodes) != 6 {
		t.Fatalf("nodes %d, want 6", len(c.Nodes))
	}
	ps, err := c.Primaries(ctx)
	if err != nil || len(ps) != 3 {
		t.Fatalf("primaries %v, %v", ps, err)
	}
	for _, p := range ps {
		rs, err := c.ReplicasOf(ctx, p)
		if err != nil || len(rs) != 1 {
			t.Fatalf("replicas of %s: %v, %v; want 1", p.Addr, rs, err)
		}
	}
	rdb := c.Client()
	defer rdb.Close()
	// write puts k on its primary and waits until the replica has it too (WAIT 1).
	write := func(t *testing.T, k, v string) {
		t.Helper()
		if err := rdb.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		slot, _ := c.KeySlot(ctx, k)
		owner, err := c.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := c.Do(ctx, owner, "WAIT", 1, 5000); err != nil || n != int64(1) {
			t.Fatalf("WAIT 1 on %s: %v, %v", owner.Addr, n, err)
		}
	}
	read := func(t *testing.T, k, want string) {
		t.Helper()
		got, err := rdb.Get(ctx, k).Result()
		if err != nil || got != want {
			t.Errorf("GET %s: %q, %v; want %q", k, got, err, want)
		}
	}

	t.Run("ManualFailover", func(t *testing.T) {
		old := ps[0]
		k := keyOn(t, ctx, c, old)
		write(t, k, "before the failover")
		rs, _ := c.ReplicasOf(ctx, old)
		np, err := c.Failover(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		if np != rs[0] {
			t.Errorf("new primary %s, want its replica %s", np.Addr, rs[0].Addr)
		}
		if now, _ := c.ReplicasOf(ctx, np); len(now) != 1 || now[0] != old {
			t.Errorf("replicas of the new primary %v, want the old primary %s", now, old.Addr)
		}
		read(t, k, "before the failover")
	})

	t.Run("ReplicaKilledAndRestarted", func(t *testing.T) {
		ps, _ := c.Primaries(ctx)
		rs, _ := c.ReplicasOf(ctx, ps[1])
		r := rs[0]
		if err := r.Kill(); err != nil {
			t.Fatal(err)
		}
		if r.Running() {
			t.Fatal("killed replica still running")
		}
		if err := r.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitOK(ctx); err != nil {
			t.Fatal(err)
		}
		if again, _ := c.ReplicasOf(ctx, ps[1]); len(again) != 1 || again[0] != r {
			t.Errorf("after the restart the replicas of %s are %v, want %s", ps[1].Addr, again, r.Addr)
		}
	})

	t.Run("PrimaryKilled", func(t *testing.T) {
		ps, _ := c.Primaries(ctx)
		old := ps[2]
		k := keyOn(t, ctx, c, old)
		write(t, k, "before the crash")
		rs, _ := c.ReplicasOf(ctx, old)
		start := time.Now()
		np, err := c.FailoverByKill(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("replica %s elected %v after the kill (node timeout %v)", np.Addr, time.Since(start).Round(time.Millisecond), redisserver.NodeTimeout)
		if np != rs[0] {
			t.Errorf("new primary %s, want the replica %s", np.Addr, rs[0].Addr)
		}
		read(t, k, "before the crash")
		if err := old.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitOK(ctx); err != nil {
			t.Fatal(err)
		}
		if now, _ := c.ReplicasOf(ctx, np); len(now) != 1 || now[0] != old {
			t.Errorf("the restarted primary is not the new primary's replica: %v", now)
		}
		read(t, k, "before the crash")
		// The old primary, now a replica, holds what its primary holds.
		write(t, k+"-after", "after the restart")
		want, _ := c.Do(ctx, np, "DBSIZE")
		if got, err := c.Do(ctx, old, "DBSIZE"); err != nil || got != want || want == int64(0) {
			t.Errorf("the restarted old primary holds %v keys (%v), its primary %v", got, err, want)
		}
	})

	t.Run("SlotMigratedLive", func(t *testing.T) {
		ps, _ := c.Primaries(ctx)
		from, to := ps[0], ps[1]
		k := keyOn(t, ctx, c, from)
		write(t, k, "before the move")
		slot, _ := c.KeySlot(ctx, k)
		done := make(chan error, 1)
		go func() { done <- c.MigrateSlot(ctx, slot, to, 200*time.Millisecond) }()
		// Writes to a new key of the slot during the migration go to the target (ASK), and
		// the client follows.
		tag := "{" + k + "}"
		for i := 0; ; i++ {
			if err := rdb.Set(ctx, tag+fmt.Sprint(i), i, 0).Err(); err != nil {
				t.Fatalf("a write during the migration: %v", err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				if owner, _ := c.SlotOwner(ctx, slot); owner != to {
					t.Errorf("slot %d owned by %v after the migration, want %s", slot, owner, to.Addr)
				}
				read(t, k, "before the move")
				for j := 0; j <= i; j++ {
					read(t, tag+fmt.Sprint(j), fmt.Sprint(j))
				}
				if got, _ := c.Do(ctx, to, "CLUSTER", "COUNTKEYSINSLOT", slot); got != int64(i+2) {
					t.Errorf("keys in slot %d on the target: %v, want %d", slot, got, i+2)
				}
				return
			default:
			}
		}
	})

	t.Run("PausedPrimaryIsReplaced", func(t *testing.T) {
		ps, err := c.Primaries(ctx)
		if err != nil || len(ps) == 0 {
			t.Fatalf("primaries: %v, %v", ps, err)
		}
		p := ps[0]
		// Its replica is read before the pause: once the primary is frozen, a view may come
		// from the frozen node only after its timeout, and by then the replica may be elected
		// already and replicate nothing.
		rs, err := c.ReplicasOf(ctx, p)
		if err != nil || len(rs) == 0 {
			t.Fatalf("replicas of %s: %v, %v", p.Addr, rs, err)
		}
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		deadline, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		for {
			if now, _ := c.Primaries(deadline); slices.Contains(now, rs[0]) {
				break
			}
			select {
			case <-deadline.Done():
				t.Fatalf("the replica of the frozen primary %s was not elected", p.Addr)
			case <-time.After(25 * time.Millisecond):
			}
		}
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := c.WaitOK(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestClusterWritesNothingToDisk: persistence is off on every node, replicas included: no node
// keeps a snapshot (by default a syncing replica saves its primary's to dump.rdb and keeps it),
// and after each replica is killed and restarted (a full sync of its primary's data) no file
// under any node's directory holds a value written to the cluster, and the replica holds its
// primary's keys.
func TestClusterWritesNothingToDisk(t *testing.T) {
	c := startCluster(t, 3, 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	rdb := c.Client()
	defer rdb.Close()
	const marker = "a question nobody may find on a disk"
	for i := range 60 {
		if err := rdb.Set(ctx, fmt.Sprintf("q%d", i), fmt.Sprintf("%s #%d", marker, i), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ps, err := c.Primaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		rs, err := c.ReplicasOf(ctx, p)
		if err != nil || len(rs) != 1 {
			t.Fatalf("replicas of %s: %v, %v", p.Addr, rs, err)
		}
		if err := rs[0].Kill(); err != nil {
			t.Fatal(err)
		}
		if err := rs[0].Restart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.WaitOK(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		rs, _ := c.ReplicasOf(ctx, p)
		// The restarted replica holds its primary's keys again (it synced them, from memory).
		want, _ := c.Do(ctx, p, "DBSIZE")
		if got, err := c.Do(ctx, rs[0], "DBSIZE"); err != nil || got != want {
			t.Errorf("replica %s holds %v keys (%v), its primary %v", rs[0].Addr, got, err, want)
		}
	}
	for _, n := range c.Nodes {
		ents, err := os.ReadDir(n.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join(n.Dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(b), marker) {
				t.Errorf("%s holds a value written to the cluster", filepath.Join(n.Dir, e.Name()))
			}
			if strings.HasSuffix(e.Name(), ".rdb") || strings.HasSuffix(e.Name(), ".aof") {
				t.Errorf("%s: a snapshot on disk (a replica's sync wrote it)", filepath.Join(n.Dir, e.Name()))
			}
		}
	}
}
