package redisserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// CLI is the tool that joins the nodes into a cluster (redis-cli --cluster create), looked up
// on PATH. Debian's redis-server package depends on redis-tools, which has it.
const CLI = "redis-cli"

// NodeTimeout is the cluster's cluster-node-timeout: how long a primary may be unreachable
// before the others mark it failed and its replica is elected. Small, so that a failover in a
// test or the dev cluster takes a second or two, not the 15 s default.
const NodeTimeout = 1000 * time.Millisecond

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// Cluster is a running Redis Cluster: Debian's redis-server started once per node with
// --cluster-enabled yes on loopback (persistence off), joined with redis-cli --cluster create.
// Its methods are safe for concurrent use; a node's role changes with failovers, so ask
// Primaries and ReplicasOf rather than remembering.
type Cluster struct {
	// Nodes are every node, in the order started: the first `primaries` were created as the
	// primaries, the rest as their replicas.
	Nodes []*Node

	dir   string
	admin sync.Map // addr → *goredis.Client, one small admin client per node
}

// Node is one redis-server of a Cluster. Its address (and so its cluster bus port, port+10000)
// and its directory, which holds its nodes.conf, stay the same across Kill and Restart, so a
// restarted node rejoins as the same node.
type Node struct {
	// Addr is 127.0.0.1:port; Port its port. The cluster bus listens on Port+10000.
	Addr string
	Port int
	// Dir is the node's working directory (its nodes.conf and log).
	Dir string

	bin  string
	args []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan error // receives the process's exit once; re-sent so that every waiter sees it
}

// RunCluster starts primaries×(1+replicasPer) nodes under dir (a directory each), joins them
// into a cluster whose first `primaries` nodes own the 16384 slots in equal ranges, each with
// replicasPer replicas, and returns once every node reports cluster_state:ok, agrees on who
// owns which slot, and every replica is in sync with its primary. On error every node started
// is stopped. Stop ends the cluster.
func RunCluster(ctx context.Context, dir string, primaries, replicasPer int) (c *Cluster, err error) {
	if primaries < 3 {
		return nil, fmt.Errorf("redisserver: a Redis Cluster needs at least 3 primaries, not %d", primaries)
	}
	if replicasPer < 0 {
		return nil, fmt.Errorf("redisserver: replicasPer %d < 0", replicasPer)
	}
	bin, err := exec.LookPath(Binary)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s not installed (apt-get install -y redis-server): %w", Binary, err)
	}
	cli, err := exec.LookPath(CLI)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %s not installed (apt-get install -y redis-tools): %w", CLI, err)
	}
	// Each node runs in its directory and is told --dir with it: a relative dir would name
	// itself below itself.
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	c = &Cluster{dir: dir}
	defer func() {
		if err != nil {
			_ = c.Stop()
			c = nil
		}
	}()
	n := primaries * (1 + replicasPer)
	ports, err := clusterPorts(n)
	if err != nil {
		return c, err
	}
	for i, port := range ports {
		node, err := c.startNode(ctx, bin, i, port)
		if err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, node)
	}
	args := []string{"--cluster", "create"}
	for _, node := range c.Nodes {
		args = append(args, node.Addr)
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPer), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return c, fmt.Errorf("redisserver: redis-cli --cluster create: %w: %s", err, strings.TrimSpace(string(out)))
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitOK(wctx); err != nil {
		return c, err
	}
	// redis-cli makes the first nodes given the primaries; say so if it ever does otherwise.
	ps, err := c.Primaries(ctx)
	if err != nil {
		return c, err
	}
	if len(ps) != primaries {
		return c, fmt.Errorf("redisserver: the cluster has %d primaries, want %d", len(ps), primaries)
	}
	return c, nil
}

// startNode starts node i on port, retrying on other free ports when the port was taken
// meanwhile (the bus port may be taken by another process between the check and the bind).
func (c *Cluster) startNode(ctx context.Context, bin string, i, port int) (*Node, error) {
	dir := filepath.Join(c.dir, "node-"+strconv.Itoa(i+1))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	for attempt := 0; ; attempt++ {
		n := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, Dir: dir, bin: bin, log: filepath.Join(dir, "redis.log")}
		n.args = []string{
			"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout / time.Millisecond)),
			// A replica may always be elected, however long its link was down: a test's
			// failover must not hang on data age (there is no data worth protecting).
			"--cluster-replica-validity-factor", "0",
			// A replica (re)joining syncs at once, not after the default 5 s wait for others.
			"--repl-diskless-sync-delay", "0",
			// No snapshot kept on disk, replicas included: the primary streams its snapshot to
			// a syncing replica (repl-diskless-sync, the default); the replica writes it to a
			// file, loads it, and with rdb-del-sync-files deletes it (by default it keeps it,
			// which would leave the question text on its disk). Loading from the socket instead
			// (repl-diskless-load swapdb or on-empty-db) would skip the file, but on Debian's
			// 7.0.15 in cluster mode a replica so synced holds no keys afterwards (its log says
			// it loaded them): promoted, it would have lost everything.
			"--repl-diskless-sync", "yes", "--rdb-del-sync-files", "yes",
			"--save", "", "--appendonly", "no",
			"--daemonize", "no", "--protected-mode", "yes", "--loglevel", "warning",
		}
		n.args = append(n.args, Tuning...)
		err := n.start(ctx)
		if err == nil || attempt == 3 {
			return n, err
		}
		ports, perr := clusterPorts(1)
		if perr != nil {
			return nil, errors.Join(err, perr)
		}
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		port = ports[0]
	}
}

// clusterPorts picks n loopback ports p, each with p+10000 (its cluster bus port) free too,
// all distinct: every listener is held until all are chosen.
func clusterPorts(n int) ([]int, error) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries > 200 {
			return nil, errors.New("redisserver: found no free port pair (p, p+10000) for the cluster")
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redisserver: %w", err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		held = append(held, bus)
		ports = append(ports, p)
	}
	return ports, nil
}

// start starts the node's process and returns once it answers PING.
func (n *Node) start(ctx context.Context) error {
	logf, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redisserver: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, n.args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = n.Dir, logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redisserver: start %s: %w", n.bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	err = waitFor(ctx, 10*time.Second, func() error { return Ping(n.Addr) }, done)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errExited):
		out, _ := os.ReadFile(n.log)
		return fmt.Errorf("redisserver: node %s %w: %s", n.Addr, err, tailLines(string(out), 5))
	case ctx.Err() != nil:
		return errors.Join(ctx.Err(), n.Kill())
	}
	return errors.Join(fmt.Errorf("redisserver: node %s did not answer: %w", n.Addr, err), n.Kill())
}

// Running reports whether the node's process is alive (started and not exited).
func (n *Node) Running() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case err := <-done:
		done <- err
		return false
	default:
		return true
	}
}

// Pid is the node's process, or 0 when it is not started.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// signal sends sig to the node's process; wait says whether to wait for it to exit.
func (n *Node) signal(sig os.Signal, wait bool) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisserver: signal node %s: %w", n.Addr, err)
	}
	if wait {
		err := <-done
		done <- err
	}
	return nil
}

// Kill ends the node with SIGKILL, as a crash would, and waits for it to exit. Its data is
// gone (persistence is off); its nodes.conf stays, so Restart brings the same node back.
func (n *Node) Kill() error { return n.signal(syscall.SIGKILL, true) }

// Stop ends the node with SIGTERM (a clean shutdown) and waits for it to exit.
func (n *Node) Stop() error { return n.signal(syscall.SIGTERM, true) }

// Pause freezes the node with SIGSTOP: it keeps its sockets and answers nothing, as a hung
// host does; past NodeTimeout the others mark it failed. Resume sends SIGCONT.
func (n *Node) Pause() error  { return n.signal(syscall.SIGSTOP, false) }
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT, false) }

// Restart starts a node that was killed or stopped again, on the same port and directory, and
// returns once it answers PING; it rejoins the cluster as the same node (a primary whose
// slots a replica took over meanwhile comes back as that replica's replica). Cluster.WaitOK
// waits until the cluster has taken it back.
func (n *Node) Restart(ctx context.Context) error {
	if n.Running() {
		return fmt.Errorf("redisserver: node %s is running", n.Addr)
	}
	return n.start(ctx)
}

// Stop kills every node and waits for each to exit.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.Nodes {
		if n.Running() {
			errs = append(errs, n.Kill())
		}
	}
	c.admin.Range(func(k, v any) bool {
		_ = v.(*goredis.Client).Close()
		c.admin.Delete(k)
		return true
	})
	return errors.Join(errs...)
}

// Addrs are the seed addresses, every node's: a cluster client needs one that answers.
func (c *Cluster) Addrs() []string {
	var a []string
	for _, n := range c.Nodes {
		a = append(a, n.Addr)
	}
	return a
}

// URL is the cluster as the service's DAS_ASK_STORE names a Redis Cluster:
// redis+cluster://host:port,host:port,…, every node a seed.
func (c *Cluster) URL() string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// Client returns a go-redis cluster client seeded with every node; the caller closes it. It
// reloads the slot map every 200 ms while in use: go-redis otherwise reloads it only on a
// MOVED or ASK, or once a minute (ClusterStateReloadInterval), and a primary that died answers
// no MOVED, so for up to a minute after its replica took over the client would keep dialling
// the dead address.
func (c *Cluster) Client() *goredis.ClusterClient {
	return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ClusterStateReloadInterval: 200 * time.Millisecond})
}

// node returns the node at addr, or nil.
func (c *Cluster) node(addr string) *Node {
	for _, n := range c.Nodes {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}

// adminOf is the admin client of node n (one connection, short timeouts, no retries: the
// caller polls).
func (c *Cluster) adminOf(n *Node) *goredis.Client {
	if v, ok := c.admin.Load(n.Addr); ok {
		return v.(*goredis.Client)
	}
	cl := goredis.NewClient(&goredis.Options{
		Addr: n.Addr, PoolSize: 2, MaxRetries: -1, Protocol: 2,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: time.Second,
	})
	if v, loaded := c.admin.LoadOrStore(n.Addr, cl); loaded {
		_ = cl.Close()
		return v.(*goredis.Client)
	}
	return cl
}

// Do runs a command on node n itself (no redirects): CLUSTER, INFO, CLIENT PAUSE….
func (c *Cluster) Do(ctx context.Context, n *Node, args ...any) (any, error) {
	return c.adminOf(n).Do(ctx, args...).Result()
}

// NodeInfo is one line of CLUSTER NODES: one node as another sees it.
type NodeInfo struct {
	ID, Addr string
	// Flags are the node's flags: myself, master, slave, fail?, fail, handshake, noaddr….
	Flags []string
	// Primary is the ID of the node's primary, for a replica; "" for a primary.
	Primary string
	// Slots are the slot ranges it owns, [first, last] each.
	Slots [][2]int
}

// Has reports whether the node carries flag.
func (ni NodeInfo) Has(flag string) bool { return slices.Contains(ni.Flags, flag) }

// View is CLUSTER NODES as node n sees the cluster.
func (c *Cluster) View(ctx context.Context, n *Node) ([]NodeInfo, error) {
	s, err := c.adminOf(n).ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	return parseNodes(s)
}

// parseNodes parses CLUSTER NODES output.
func parseNodes(s string) ([]NodeInfo, error) {
	var out []NodeInfo
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return nil, fmt.Errorf("redisserver: CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		ni := NodeInfo{ID: f[0], Addr: addr, Flags: strings.Split(f[2], ",")}
		if f[3] != "-" {
			ni.Primary = f[3]
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated or imported
				continue
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redisserver: CLUSTER NODES slots %q", r)
			}
			ni.Slots = append(ni.Slots, [2]int{a, b})
		}
		out = append(out, ni)
	}
	return out, nil
}

// myself is the entry flagged myself in a view.
func myself(view []NodeInfo) (NodeInfo, bool) {
	for _, ni := range view {
		if ni.Has("myself") {
			return ni, true
		}
	}
	return NodeInfo{}, false
}

// WaitOK waits until every running node reports cluster_state:ok with all 16384 slots ok,
// every running node sees the same layout (who owns which slot, which running node is a
// primary and which replicates whom) and marks no running node as failing, and every running
// replica's link to its primary is up. It polls until ctx is done.
func (c *Cluster) WaitOK(ctx context.Context) error {
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		why := c.notOK(ctx)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: cluster not ok: %s: %w", why, ctx.Err())
		case <-tick.C:
		}
	}
}

// notOK says why the cluster is not settled, "" when it is.
func (c *Cluster) notOK(ctx context.Context) string {
	var layout string
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		info, err := c.adminOf(n).ClusterInfo(ctx).Result()
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:" + strconv.Itoa(Slots)} {
			if !strings.Contains(info, want+"\r\n") {
				return n.Addr + ": not " + want
			}
		}
		view, err := c.View(ctx, n)
		if err != nil {
			return n.Addr + ": " + err.Error()
		}
		// The layout as n sees it: who owns which slots, and what every running node is
		// (a primary, or whose replica), which every node must see alike.
		addrOf := map[string]string{}
		for _, ni := range view {
			addrOf[ni.ID] = ni.Addr
		}
		var owners []string
		for _, ni := range view {
			peer := c.node(ni.Addr)
			running := peer != nil && peer.Running()
			if running && (ni.Has("fail") || ni.Has("fail?") || ni.Has("handshake") || ni.Has("noaddr")) {
				return n.Addr + " sees " + ni.Addr + " as " + strings.Join(ni.Flags, ",")
			}
			if len(ni.Slots) > 0 && ni.Has("master") {
				owners = append(owners, fmt.Sprint(ni.Addr, ni.Slots))
			}
			switch {
			case !running:
			case ni.Has("slave"):
				owners = append(owners, ni.Addr+" replicates "+addrOf[ni.Primary])
			case ni.Has("master"):
				owners = append(owners, ni.Addr+" primary")
			}
		}
		slices.Sort(owners)
		if l := strings.Join(owners, "; "); layout == "" {
			layout = l
		} else if l != layout {
			return n.Addr + " disagrees on the layout: " + l + " | " + layout
		}
		if me, ok := myself(view); ok && me.Has("slave") {
			repl, err := c.adminOf(n).Info(ctx, "replication").Result()
			if err != nil {
				return n.Addr + ": " + err.Error()
			}
			if !strings.Contains(repl, "master_link_status:up") {
				return n.Addr + ": replica not in sync"
			}
		}
	}
	if layout == "" {
		return "no node running"
	}
	return ""
}

// anyView is CLUSTER NODES as the first running node that answers sees it, with that node.
func (c *Cluster) anyView(ctx context.Context) ([]NodeInfo, error) {
	var errs []error
	for _, n := range c.Nodes {
		if !n.Running() {
			continue
		}
		v, err := c.View(ctx, n)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(append(errs, errors.New("redisserver: no node answered CLUSTER NODES"))...)
}

// Primaries are the nodes that own slots now, in the order of Nodes.
func (c *Cluster) Primaries(ctx context.Context) ([]*Node, error) {
	view, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Node
	for _, n := range c.Nodes {
		for _, ni := range view {
			if ni.Addr == n.Addr && ni.Has("master") && !ni.Has("fail") && len(ni.Slots) > 0 {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// ReplicasOf are the nodes that replicate primary now.
func (c *Cluster) ReplicasOf(ctx context.Context, primary *Node) ([]*Node, error) {
	view, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	id := ""
	for _, ni := range view {
		if ni.Addr == primary.Addr {
			id = ni.ID
		}
	}
	if id == "" {
		return nil, fmt.Errorf("redisserver: %s is not in the cluster", primary.Addr)
	}
	var out []*Node
	for _, ni := range view {
		if ni.Primary == id {
			if n := c.node(ni.Addr); n != nil {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// SlotOwner is the primary that owns slot now.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (*Node, error) {
	view, err := c.anyView(ctx)
	if err != nil {
		return nil, err
	}
	for _, ni := range view {
		if !ni.Has("master") {
			continue
		}
		for _, r := range ni.Slots {
			if slot >= r[0] && slot <= r[1] {
				if n := c.node(ni.Addr); n != nil {
					return n, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("redisserver: no primary owns slot %d", slot)
}

// Scan returns the keys matching the glob pattern match on every primary, each with the
// primary that holds it.
func (c *Cluster) Scan(ctx context.Context, match string) (map[string]*Node, error) {
	ps, err := c.Primaries(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]*Node{}
	for _, p := range ps {
		iter := c.adminOf(p).Scan(ctx, 0, match, 1000).Iterator()
		for iter.Next(ctx) {
			out[iter.Val()] = p
		}
		if err := iter.Err(); err != nil {
			return nil, fmt.Errorf("redisserver: SCAN on %s: %w", p.Addr, err)
		}
	}
	return out, nil
}

// KeySlot is the hash slot of key (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(ctx context.Context, key string) (int, error) {
	for _, n := range c.Nodes {
		if n.Running() {
			s, err := c.adminOf(n).ClusterKeySlot(ctx, key).Result()
			return int(s), err
		}
	}
	return 0, errors.New("redisserver: no node running")
}

// Failover makes a replica of primary take its slots over with a manual failover (CLUSTER
// FAILOVER on the replica: the primary stops taking writes, the replica catches up, then is
// promoted, so nothing acknowledged is lost), waits until the cluster is settled with the
// replica as primary and the old primary as its replica, and returns the new primary.
func (c *Cluster) Failover(ctx context.Context, primary *Node) (*Node, error) {
	rs, err := c.ReplicasOf(ctx, primary)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("redisserver: %s has no replica to fail over to", primary.Addr)
	}
	r := rs[0]
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	var asked time.Time
	for {
		if me, ok := c.me(ctx, r); ok && me.Has("master") && len(me.Slots) > 0 {
			break
		}
		// A manual failover that did not complete (it times out after a few node timeouts)
		// is asked for again.
		if time.Since(asked) > 5*NodeTimeout {
			if err := c.adminOf(r).ClusterFailover(ctx).Err(); err != nil {
				return nil, fmt.Errorf("redisserver: CLUSTER FAILOVER on %s: %w", r.Addr, err)
			}
			asked = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redisserver: %s did not take over from %s: %w", r.Addr, primary.Addr, ctx.Err())
		case <-tick.C:
		}
	}
	return r, c.WaitOK(ctx)
}

// FailoverByKill kills primary (SIGKILL) and waits until the cluster elects one of its
// replicas in its place (about NodeTimeout plus an election) and is settled again without it;
// it returns the new primary. Writes the dead primary had acknowledged but not yet sent to
// the replica are lost, as in a real crash. Restart the old primary to have it rejoin as a
// replica.
func (c *Cluster) FailoverByKill(ctx context.Context, primary *Node) (*Node, error) {
	rs, err := c.ReplicasOf(ctx, primary)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("redisserver: %s has no replica to fail over to", primary.Addr)
	}
	if err := primary.Kill(); err != nil {
		return nil, err
	}
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, r := range rs {
			if me, ok := c.me(ctx, r); ok && me.Has("master") && len(me.Slots) > 0 {
				return r, c.WaitOK(ctx)
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("redisserver: no replica of %s was elected: %w", primary.Addr, ctx.Err())
		case <-tick.C:
		}
	}
}

// me is node n as it sees itself.
func (c *Cluster) me(ctx context.Context, n *Node) (NodeInfo, bool) {
	view, err := c.View(ctx, n)
	if err != nil {
		return NodeInfo{}, false
	}
	return myself(view)
}

// id is node n's cluster node ID.
func (c *Cluster) id(ctx context.Context, n *Node) (string, error) {
	return c.adminOf(n).Do(ctx, "CLUSTER", "MYID").Text()
}

// MigrateSlot moves slot from the primary that owns it to primary `to` live, as redis-cli
// --cluster reshard does: CLUSTER SETSLOT IMPORTING on the target and MIGRATING on the source,
// the slot's keys moved with MIGRATE a few at a time, then SETSLOT NODE on every primary.
// Meanwhile clients are sent ASK to the target for keys already moved (or new), and a
// command over several keys split between the two gets TRYAGAIN. hold is waited once the
// slot is marked and again after each batch of keys, so that traffic meets the migration.
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Node, hold time.Duration) error {
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	m, err := c.StartMigration(ctx, slot, to)
	if err != nil {
		return err
	}
	if err := sleepCtx(ctx, hold); err != nil {
		return err
	}
	return m.Finish(ctx, hold)
}

// Migration is a slot being migrated live from one primary to another (StartMigration).
type Migration struct {
	c            *Cluster
	slot         int
	From, To     *Node
	fromID, toID string
}

// StartMigration marks slot as migrating from the primary that owns it to primary to (nil:
// the first other primary), as redis-cli --cluster reshard begins: SETSLOT IMPORTING on the
// target, then MIGRATING on the source. Until Finish or Abort, a command whose keys are all
// still on the source is served there, one whose keys are not there is sent ASK to the target,
// and one over several keys split between the two (a script's, say) gets TRYAGAIN.
func (c *Cluster) StartMigration(ctx context.Context, slot int, to *Node) (*Migration, error) {
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return nil, err
	}
	if to == nil {
		ps, err := c.Primaries(ctx)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			if p != from {
				to = p
				break
			}
		}
	}
	if to == nil || to == from {
		return nil, fmt.Errorf("redisserver: slot %d: no other primary to migrate it to", slot)
	}
	m := &Migration{c: c, slot: slot, From: from, To: to}
	if m.fromID, err = c.id(ctx, from); err != nil {
		return nil, err
	}
	if m.toID, err = c.id(ctx, to); err != nil {
		return nil, err
	}
	if err := c.adminOf(to).Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", m.fromID).Err(); err != nil {
		return nil, fmt.Errorf("redisserver: SETSLOT IMPORTING: %w", err)
	}
	if err := c.adminOf(from).Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.toID).Err(); err != nil {
		return nil, fmt.Errorf("redisserver: SETSLOT MIGRATING: %w", err)
	}
	return m, nil
}

// Move migrates keys (of the slot) to the target now.
func (m *Migration) Move(ctx context.Context, keys ...string) error {
	args := []any{"MIGRATE", "127.0.0.1", m.To.Port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.c.adminOf(m.From).Do(ctx, args...).Err(); err != nil {
		return fmt.Errorf("redisserver: MIGRATE: %w", err)
	}
	return nil
}

// Finish moves the slot's keys still on the source, ten at a time with hold waited after each
// batch, then gives the slot to the target on every primary and waits for the cluster to say
// ok.
func (m *Migration) Finish(ctx context.Context, hold time.Duration) error {
	src := m.c.adminOf(m.From)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, m.slot, 10).Result()
		if err != nil {
			return fmt.Errorf("redisserver: GETKEYSINSLOT: %w", err)
		}
		if len(keys) == 0 {
			break
		}
		if err := m.Move(ctx, keys...); err != nil {
			return err
		}
		if err := sleepCtx(ctx, hold); err != nil {
			return err
		}
	}
	// The target first, then the source, then the rest: the order redis-cli uses, so that no
	// node points a client back where the slot no longer is.
	order := []*Node{m.To, m.From}
	ps, err := m.c.Primaries(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p != m.To && p != m.From {
			order = append(order, p)
		}
	}
	for _, p := range order {
		if err := m.c.adminOf(p).Do(ctx, "CLUSTER", "SETSLOT", m.slot, "NODE", m.toID).Err(); err != nil {
			return fmt.Errorf("redisserver: SETSLOT NODE on %s: %w", p.Addr, err)
		}
	}
	return m.c.WaitOK(ctx)
}

// Abort leaves the slot with its owner, stable (SETSLOT STABLE on both ends); keys already
// moved stay on the target, out of clients' reach.
func (m *Migration) Abort(ctx context.Context) error {
	return errors.Join(
		m.c.adminOf(m.From).Do(ctx, "CLUSTER", "SETSLOT", m.slot, "STABLE").Err(),
		m.c.adminOf(m.To).Do(ctx, "CLUSTER", "SETSLOT", m.slot, "STABLE").Err())
}

// sleepCtx waits d (nothing when d is not positive), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
