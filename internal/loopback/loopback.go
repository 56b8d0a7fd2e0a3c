// Package loopback picks loopback addresses for the processes a launcher or a test is about
// to start on them, and holds one where a connection is refused (Refused).
//
// A pick is a port free when picked, and closed before the process it is for binds it; the
// kernel may hand the same port out again meanwhile: here 500 picks each closed at once held
// a repeat in each of five runs, the first after 50 to 115 picks. Pieces started one after
// another on their picks then share a port (CI, 2026-12-07: the cluster's llm-stub was given
// the demo source's port while the demo source was still starting, "bind: address already in
// use"; nginx given one port in two server blocks does not even fail, it warns and serves
// both with the first). So no address is handed out twice in one process, and the picks of
// one call are held until all are made, so that a port refused as handed out is not picked
// again at once. Another process may still take a pick before its owner binds it (redisserver
// starts its servers again on a new pick when that happens).
package loopback

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
)

// given holds every address Addrs has returned in this process.
var given = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// Addrs returns n distinct loopback addresses ("127.0.0.1:port"), each free when picked and
// none returned before in this process.
func Addrs(n int) ([]string, error) {
	given.Lock()
	defer given.Unlock()
	held := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	addrs := make([]string, 0, n)
	for tries := 0; len(addrs) < n; tries++ {
		if tries >= n+1000 {
			return nil, errors.New("loopback: no free port not handed out before")
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("loopback: %w", err)
		}
		held = append(held, ln)
		a := ln.Addr().String()
		if given.addrs[a] {
			continue
		}
		given.addrs[a] = true
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// Addr is Addrs(1)'s address.
func Addr() (string, error) {
	a, err := Addrs(1)
	if err != nil {
		return "", err
	}
	return a[0], nil
}

// Port is Addr's port.
func Port() (int, error) {
	a, err := Addr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(a)
	return strconv.Atoi(p)
}

// TB is the part of testing.TB Refused uses (the package stays free of package testing, which
// the launchers that pick through it would otherwise link).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}
