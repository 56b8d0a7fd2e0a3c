package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/das-ask/ask/demo/idp"
)

// child is a running server side: a child process (the normal case) or, for tests, Serve on
// a goroutine of this process.
type child struct {
	ep   endpoints
	hc   *http.Client // debug and token calls
	stop func() error

	// cpuFile is where startCPU profiles to ("" means no profile); cpuOn says it started.
	cpuFile string
	cpuOn   bool

	mu     sync.Mutex
	tokens map[string]string
}

// startCPU starts the child's CPU profile, once: a workload calls it when its setup is done,
// so that the profile holds the measured phase only.
func (c *child) startCPU(ctx context.Context) {
	if c.cpuFile == "" || c.cpuOn {
		return
	}
	c.cpuOn = c.debug(ctx, "/cpu/start?path="+c.cpuFile) == nil
}

// stopCPU stops the profile startCPU started and reports whether there is one.
func (c *child) stopCPU(ctx context.Context) bool {
	if !c.cpuOn {
		return false
	}
	c.cpuOn = false
	return c.debug(ctx, "/cpu/stop") == nil
}

// childArgs are the `serve` flags for opts.
func childArgs(opts ServeOptions) []string {
	args := []string{"serve", "-mode", opts.Mode}
	if opts.KeepAlive > 0 {
		args = append(args, "-keepalive", opts.KeepAlive.String())
	}
	if opts.MaxEvents > 0 {
		args = append(args, "-max-events", strconv.Itoa(opts.MaxEvents))
	}
	if opts.Store != "" {
		args = append(args, "-store", opts.Store)
	}
	if opts.Phase > 0 {
		args = append(args, "-phase", strconv.Itoa(opts.Phase))
	}
	return args
}

// startChild re-executes exe with the `serve` subcommand and waits for its handshake.
func startChild(ctx context.Context, exe string, opts ServeOptions) (*child, error) {
	cmd := exec.Command(exe, childArgs(opts)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := make(chan error, 1)
	stop := func() error {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-waited:
			return err
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			return errors.Join(errors.New("bench: the child did not stop on SIGTERM"), <-waited)
		}
	}
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		line, _ := br.ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, br)
		waited <- cmd.Wait()
	}()
	var line string
	select {
	case line = <-lines:
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		return nil, errors.New("bench: the child sent no handshake within 60s")
	}
	var ep endpoints
	if err := json.Unmarshal([]byte(line), &ep); err != nil || ep.Debug == "" {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("bench: the child's handshake %q: %v", strings.TrimSpace(line), err)
	}
	return &child{ep: ep, hc: newHTTPClient(16), stop: stop, tokens: map[string]string{}}, nil
}

// startInProcess runs Serve on a goroutine: for tests, where re-executing is not possible.
func startInProcess(ctx context.Context, opts ServeOptions) (*child, error) {
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	opts.Handshake = pw
	done := make(chan error, 1)
	go func() {
		err := Serve(ctx, opts)
		pw.CloseWithError(errors.Join(err, io.EOF))
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		return nil, errors.Join(err, <-done)
	}
	var ep endpoints
	if err := json.Unmarshal([]byte(line), &ep); err != nil {
		cancel()
		return nil, errors.Join(err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return &child{ep: ep, hc: newHTTPClient(16), stop: func() error { cancel(); return <-done }, tokens: map[string]string{}}, nil
}

// newHTTPClient is a loopback client that keeps up to conns connections per host alive.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}}
}

// token returns a real bearer for oid, minted by the child's identity provider.
func (c *child) token(ctx context.Context, oid string) (string, error) {
	c.mu.Lock()
	t, ok := c.tokens[oid]
	c.mu.Unlock()
	if ok {
		return t, nil
	}
	t, err := idp.RequestToken(ctx, c.hc, c.ep.IdP, idp.TokenRequest{OID: oid, TTLS: 3600})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.tokens[oid] = t
	c.mu.Unlock()
	return t, nil
}

// debug POSTs to the child's debug endpoint.
func (c *child) debug(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ep.Debug+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("bench: debug %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return nil
}

// serverCPU is the child's CPU time so far, after a garbage collection (so that each measured
// interval pays for the garbage it made), and the heap bytes it has allocated so far.
func (c *child) serverCPU(ctx context.Context) (time.Duration, uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.ep.Debug+"/rusage", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("bench: debug /rusage: %s", resp.Status)
	}
	var s cpuSample
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		return 0, 0, err
	}
	return time.Duration(s.NS), s.Alloc, nil
}

func (c *child) release(ctx context.Context, key string) error {
	return c.debug(ctx, "/release?key="+key)
}

func (c *child) stats(ctx context.Context) (debugStats, error) {
	var s debugStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ep.Debug+"/stats", nil)
	if err != nil {
		return s, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return s, err
	}
	defer resp.Body.Close()
	return s, json.NewDecoder(resp.Body).Decode(&s)
}

// rssBytes is the child's resident set (VmRSS).
func (c *child) rssBytes() (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.ep.PID) + "/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("bench: no VmRSS in /proc/<pid>/status")
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux Go supports.
const clockTicks = 100

// cpuTime is the user plus system CPU time the child has used.
func (c *child) cpuTime() (time.Duration, error) {
	f, err := statFields(c.ep.PID)
	if err != nil {
		return 0, err
	}
	// utime and stime are fields 14 and 15.
	u, err1 := strconv.ParseInt(f[14-3], 10, 64)
	st, err2 := strconv.ParseInt(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(u+st) * time.Second / clockTicks, nil
}

// statFields is /proc/<pid>/stat's fields from the third (state) on: field n is at n-3. The
// command name before them may hold spaces, so they start after its last ')'. Every field up
// to the nice value (19) is there.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, errors.New("bench: malformed /proc/<pid>/stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 19-2 {
		return nil, errors.New("bench: short /proc/<pid>/stat")
	}
	return f, nil
}
