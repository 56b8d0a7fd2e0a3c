package bench

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// Machine is where and what was measured.
type Machine struct {
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemTotal  string `json:"mem_total"`
	Kernel    string `json:"kernel"`
	// Commit is HEAD; Dirty counts files changed in the working tree when the run started.
	Commit string `json:"commit"`
	Dirty  int    `json:"dirty_files"`
	// LoadBefore and LoadAfter are /proc/loadavg at the start and the end: how shared the
	// machine was while it was measured.
	LoadBefore string `json:"load_before"`
	LoadAfter  string `json:"load_after"`
}

func machine(ctx context.Context, dir string) Machine {
	m := Machine{
		Date:       time.Now().UTC().Format(time.RFC3339),
		GoVersion:  runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		CPUModel:   procField("/proc/cpuinfo", "model name"),
		MemTotal:   procField("/proc/meminfo", "MemTotal"),
		Kernel:     strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		LoadBefore: loadavg(),
	}
	if out, err := gitCmd(ctx, dir, "rev-parse", "HEAD"); err == nil {
		m.Commit = strings.TrimSpace(out)
	}
	if out, err := gitCmd(ctx, dir, "status", "--porcelain"); err == nil {
		for l := range strings.SplitSeq(out, "\n") {
			if strings.TrimSpace(l) != "" {
				m.Dirty++
			}
		}
	}
	return m
}

func loadavg() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func gitCmd(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return string(out), err
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// procField is the value of the first "key: value" line naming key.
func procField(path, key string) string {
	for l := range strings.SplitSeq(readFile(path), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
