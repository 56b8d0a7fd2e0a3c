package bench

import (
	"bufio"
	"context"
	"os/exec"
	"strconv"
	"strings"
)

// Micro is one Go microbenchmark's result (go test -bench -benchmem).
type Micro struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
}

// microPattern names the hot-path microbenchmarks (the *_bench_test.go files) of store (the
// event log), server (encoding and framing) and auth (bearer validation). Other benchmarks in
// these packages (the store comparison of docs/scale-out.md) are not the suite's.
const microPattern = "^Benchmark(Append|Read|EncodeEvent|Frame|Authenticate)$"

// micro runs the microbenchmarks in dir and parses their results; it returns the raw output
// too, for the error case.
func micro(ctx context.Context, dir, benchtime string) ([]Micro, string, error) {
	args := []string{"test", "-run", "^$", "-bench", microPattern, "-benchmem", "-count", "1", "-benchtime", benchtime,
		"./store", "./server", "./auth"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return parseMicro(string(out)), string(out), err
}

// parseMicro reads `go test -bench -benchmem` output.
func parseMicro(out string) []Micro {
	var res []Micro
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		m := Micro{Package: pkg, Name: trimProcs(f[0])}
		for i := 2; i+1 < len(f); i += 2 {
			v, unit := f[i], f[i+1]
			switch unit {
			case "ns/op":
				m.NsPerOp, _ = strconv.ParseFloat(v, 64)
			case "B/op":
				m.BytesPerOp, _ = strconv.ParseInt(v, 10, 64)
			case "allocs/op":
				m.AllocsPerOp, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		res = append(res, m)
	}
	return res
}

// trimProcs drops the -GOMAXPROCS suffix of a benchmark name.
func trimProcs(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			return name[:i]
		}
	}
	return name
}
