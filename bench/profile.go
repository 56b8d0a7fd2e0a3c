package bench

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
)

// Profile is the top of one pprof profile a child wrote.
type Profile struct {
	Workload string `json:"workload"`
	Kind     string `json:"kind"` // cpu or heap (inuse_space)
	File     string `json:"file"`
	// Top is `go tool pprof -top` output: the header and the first entries by flat time
	// (or space); Ours is the first entries by cumulative time among this module's functions,
	// which is where the service's share of the profile shows.
	Top  []string `json:"top"`
	Ours []string `json:"ours"`
}

// topOf summarises a profile with `go tool pprof -top`; entries is how many rows to keep, and
// extra are more pprof flags.
func topOf(ctx context.Context, file, kind string, entries int, extra ...string) []string {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=" + strconv.Itoa(entries)}, extra...)
	if kind == "heap" {
		args = append(args, "-sample_index=inuse_space")
	}
	args = append(args, file)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return []string{"(go tool pprof failed: " + strings.TrimSpace(string(out)) + ")"}
	}
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		// Drop the "File:", "Build ID:", "Type:" and "Time:" lines: the file is named already.
		if strings.HasPrefix(l, "File:") || strings.HasPrefix(l, "Build ID:") || strings.HasPrefix(l, "Time:") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}
