// Package faultproxy is a TCP proxy that gives the client of a server the faults a real
// network gives it, on command: a reply lost after the server acted on the request, delay,
// connections reset, traffic stalled. Tests put it between a service and its Redis (or any
// TCP server) to prove that what the service promises holds when the wire misbehaves; the
// chaos suite drives it from another process through Handler.
//
// A Proxy forwards bytes in chunks as they are read, in both directions, each direction in
// order. The faults:
//
//   - Pass: forward everything (the initial state).
//   - Delay(d): hold each chunk d before forwarding it, in both directions.
//   - Stall: hold every chunk until the state changes; new connections are accepted and
//     held too. Nothing is lost: Pass releases what was held, in order.
//   - Refuse: reset (TCP RST) every open connection, and each new one as it arrives, until
//     the state changes.
//   - ResetAll: reset every open connection once; new ones pass.
//   - DropReplies(n, match, then): the next n requests (chunks from the client) that contain
//     match are forwarded to the server, which acts on them, but the reply is swallowed:
//     then the connection is closed (Close: the client sees the connection end with no
//     reply) or held open with every later reply on it swallowed too (Stall: the client
//     waits for its own timeout). This is the lost reply a client library's retry meets.
//
// Match is looked for in each chunk as read, so it should be something a request carries
// near its start or that is short (a command name, a script's SHA, a ticket id). A Proxy is
// safe for concurrent use; Close stops it and every goroutine it started.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Then is what DropReplies does with a connection whose reply it swallowed.
type Then int

const (
	// Close closes the connection: the client reads EOF where its reply should be.
	Close Then = iota
	// Stall keeps the connection open and swallows every later reply on it: the client
	// waits until its own deadline.
	Stall
)

func (t Then) String() string {
	if t == Stall {
		return "stall"
	}
	return "close"
}

// mode is the proxy's standing state.
type mode int

const (
	pass mode = iota
	delaying
	stalling
	refusing
)

// Stats counts what the proxy did, so a test can tell that the fault it armed fired.
type Stats struct {
	// Accepted counts client connections accepted.
	Accepted int64 `json:"accepted"`
	// RepliesDropped counts replies swallowed by DropReplies (a stalled connection's later
	// replies are not counted).
	RepliesDropped int64 `json:"replies_dropped"`
	// Resets counts connections reset.
	Resets int64 `json:"resets"`
	// Held counts chunks that were delayed or stalled before being forwarded.
	Held int64 `json:"held"`
}

// Proxy forwards connections accepted on its address to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	dialer net.Dialer

	mu      sync.Mutex
	mode    mode
	delay   time.Duration
	changed chan struct{} // closed, and replaced, at every change of mode
	drops   []drop        // armed DropReplies, oldest first
	links   map[*link]struct{}
	closed  bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	accepted, dropped, resets, held atomic.Int64
	countMu                         sync.Mutex
	counted                         chan struct{} // closed, and replaced, at every count; under countMu
}

type drop struct {
	left  int
	match []byte
	then  Then
}

// New listens on 127.0.0.1 at a free port and forwards every connection to target
// (host:port). The proxy passes everything until told otherwise.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	return Serve(ln, target), nil
}

// Serve forwards the connections ln accepts to target. The proxy owns ln: Close closes it.
func Serve(ln net.Listener, target string) *Proxy {
	p := &Proxy{
		ln:      ln,
		target:  target,
		dialer:  net.Dialer{Timeout: 5 * time.Second},
		changed: make(chan struct{}),
		links:   map[*link]struct{}{},
		done:    make(chan struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr is the address clients dial (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Pass forwards everything from now on, releasing what Stall held. Armed DropReplies stay
// armed.
func (p *Proxy) Pass() { p.set(pass, 0) }

// Delay holds each chunk d before forwarding it, in both directions, from now on.
func (p *Proxy) Delay(d time.Duration) { p.set(delaying, d) }

// Stall holds every chunk, in both directions and on every connection, until the next change.
func (p *Proxy) Stall() { p.set(stalling, 0) }

// Refuse resets every open connection and each new one until the next change.
func (p *Proxy) Refuse() {
	p.set(refusing, 0)
	p.ResetAll()
}

// ResetAll resets every open connection once.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		p.reset(l)
	}
}

// DropReplies arms a lost reply for the next n requests that contain match (any request
// when match is empty): each is forwarded, its reply swallowed, and the connection then
// closed or stalled. Calls add up; the oldest armed drop that matches fires first.
func (p *Proxy) DropReplies(n int, match string, then Then) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = append(p.drops, drop{left: n, match: []byte(match), then: then})
}

// Disarm cancels every armed DropReplies that has not fired.
func (p *Proxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drops = nil
}

// count adds one to c and wakes every WaitStats.
func (p *Proxy) count(c *atomic.Int64) {
	c.Add(1)
	p.countMu.Lock()
	if p.counted != nil {
		close(p.counted)
		p.counted = nil
	}
	p.countMu.Unlock()
}

// WaitStats waits until cond holds of the proxy's Stats, checking at every count, or until ctx
// is done (then it returns ctx's error).
func (p *Proxy) WaitStats(ctx context.Context, cond func(Stats) bool) error {
	for {
		p.countMu.Lock()
		if p.counted == nil {
			p.counted = make(chan struct{})
		}
		wake := p.counted
		p.countMu.Unlock()
		if cond(p.Stats()) {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Stats reports what the proxy has done so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:       p.accepted.Load(),
		RepliesDropped: p.dropped.Load(),
		Resets:         p.resets.Load(),
		Held:           p.held.Load(),
	}
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	for _, l := range links {
		l.close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) set(m mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = m, d
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.count(&p.accepted)
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.links[l] = struct{}{}
		refuse := p.mode == refusing
		p.mu.Unlock()
		if refuse {
			p.reset(l)
			p.forget(l)
			continue
		}
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve dials the target and pipes both directions until either ends.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer p.forget(l)
	server, err := p.dialer.Dial("tcp", p.target)
	if err != nil {
		// The client sees its connection end, as it would with the server down.
		l.close()
		return
	}
	if !l.setServer(server) {
		_ = server.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, true) }()
	go func() { defer wg.Done(); p.pipe(l, false) }()
	wg.Wait()
}

// pipe copies one direction of l: upstream is client to server.
func (p *Proxy) pipe(l *link, upstream bool) {
	defer l.close()
	src, dst := l.server, l.client
	if upstream {
		src, dst = l.client, l.server
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold(l) {
				return
			}
			chunk := buf[:n]
			if upstream {
				p.arm(l, chunk)
			} else if then, swallow := l.swallow(); swallow {
				if then == Close {
					return
				}
				continue
			}
			if _, werr := dst.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// hold waits as the standing fault says before a chunk is forwarded. It reports false when
// the chunk must not be forwarded (the link was reset or closed meanwhile).
func (p *Proxy) hold(l *link) bool {
	counted := false
	for {
		p.mu.Lock()
		m, d, changed := p.mode, p.delay, p.changed
		p.mu.Unlock()
		switch m {
		case pass:
			return true
		case refusing:
			p.reset(l)
			return false
		case delaying:
			if !counted {
				p.count(&p.held)
			}
			t := time.NewTimer(d)
			select {
			case <-t.C:
				return true
			case <-l.done:
				t.Stop()
				return false
			}
		case stalling:
			if !counted {
				p.count(&p.held)
				counted = true
			}
			select {
			case <-changed:
			case <-l.done:
				return false
			}
		}
	}
}

// arm marks l's next reply as lost when chunk matches an armed drop. It runs before the
// chunk reaches the server, so the reply cannot slip past.
func (p *Proxy) arm(l *link, chunk []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.drops {
		d := &p.drops[i]
		if len(d.match) > 0 && !bytes.Contains(chunk, d.match) {
			continue
		}
		l.pending(d.then)
		if d.left--; d.left == 0 {
			p.drops = append(p.drops[:i], p.drops[i+1:]...)
		}
		p.count(&p.dropped)
		return
	}
}

func (p *Proxy) reset(l *link) {
	if l.reset() {
		p.count(&p.resets)
	}
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// link is one proxied connection.
type link struct {
	client net.Conn
	done   chan struct{} // closed by close

	mu     sync.Mutex
	server net.Conn
	closed bool
	drop   bool // the next reply is swallowed
	then   Then
	stall  bool // every reply is swallowed
}

func (l *link) setServer(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.server = c
	return true
}

func (l *link) pending(then Then) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop, l.then = true, then
}

// swallow reports whether the reply chunk just read is lost, and what follows.
func (l *link) swallow() (Then, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stall {
		return Stall, true
	}
	if !l.drop {
		return 0, false
	}
	l.drop = false
	if l.then == Stall {
		l.stall = true
	}
	return l.then, true
}

// reset closes both sides with SO_LINGER 0, so the client reads ECONNRESET. It reports
// whether the link was open.
func (l *link) reset() bool {
	if tc, ok := l.client.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return l.close()
}

// close closes both sides once; it reports whether this call closed them.
func (l *link) close() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.closed = true
	close(l.done)
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
	return true
}
