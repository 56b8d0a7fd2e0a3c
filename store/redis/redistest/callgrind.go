package redistest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/das-ask/ask/internal/redisserver"
)

// Callgrind is a redis-server run under valgrind's callgrind, which counts the instructions
// the server executes: a figure that, unlike CPU time, repeats to a tenth of a percent for the
// same binary and load whatever else the machine is doing, so that two versions of a script
// can be told apart by a few percent. The server is started as Start's are (the same settings,
// a free port), only under callgrind.
type Callgrind struct {
	*Server
	out   string
	dumps int
}

// StartCallgrind starts redis-server under callgrind for tb and stops it when tb's test ends.
// It skips tb when valgrind or redis-server is not installed.
func StartCallgrind(tb testing.TB) *Callgrind {
	tb.Helper()
	for _, bin := range []string{"valgrind", "callgrind_control"} {
		if _, err := exec.LookPath(bin); err != nil {
			tb.Skipf("%s not installed (apt-get install -y valgrind): the count runs redis-server under callgrind", bin)
		}
	}
	out := filepath.Join(tb.TempDir(), "callgrind.out")
	s := start(tb, func(ctx context.Context, dir string) (*Server, error) {
		return redisserver.RunUnder(ctx, dir, "valgrind", "--tool=callgrind", "--callgrind-out-file="+out)
	})
	return &Callgrind{Server: s, out: out}
}

// Zero sets the server's counts to zero: what Dump reports next starts here.
func (c *Callgrind) Zero(tb testing.TB) {
	tb.Helper()
	if out, err := exec.Command("callgrind_control", "-z", strconv.Itoa(c.Pid())).CombinedOutput(); err != nil {
		tb.Fatalf("callgrind_control -z: %v: %s", err, out)
	}
}

// Dump answers the instructions the server executed since the last Zero (or Dump), and the
// file callgrind wrote them to (for callgrind_annotate; it goes with tb's temporary directory).
func (c *Callgrind) Dump(tb testing.TB) (int64, string) {
	tb.Helper()
	if out, err := exec.Command("callgrind_control", "-d", strconv.Itoa(c.Pid())).CombinedOutput(); err != nil {
		tb.Fatalf("callgrind_control -d: %v: %s", err, out)
	}
	c.dumps++
	path := c.out + "." + strconv.Itoa(c.dumps)
	n, err := summary(path)
	if err != nil {
		tb.Fatal(err)
	}
	return n, path
}

// summary is a callgrind dump's "summary:" line: its instructions.
func summary(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("redistest: the callgrind dump has no summary line: " + path)
}
