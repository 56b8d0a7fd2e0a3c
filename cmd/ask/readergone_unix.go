//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/sys/unix"
)

// untilReaderGone is ctx, ended too once the reader of one of fds (stdout, stderr) has gone —
// ask … | head -1, once head has its line. That is the person having gone, as Ctrl-C is, and the
// run is cancelled the same way (one cancel, its confirmation awaited; with --follow, watching
// stops). The next write to such a pipe killed ask with SIGPIPE instead, and left the run going on
// the service, uncancelled, spending its owner's quota with no one to read it.
//
// SIGPIPE is caught from here on, so that write fails (EPIPE) rather than ending the process. A
// network connection broken under a write raises it too; the two are told apart by asking the
// files whether their reader has gone (poll: POLLERR or POLLHUP). stop ends the watch; the
// command keeps it to its end, so no later write to the gone reader kills it mid-cancel.
func untilReaderGone(ctx context.Context, fds ...int) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for range pipe {
			if readerGone(fds) {
				cancel()
			}
		}
	}()
	return ctx, func() {
		signal.Stop(pipe)
		close(pipe)
		<-watched
		cancel()
	}
}

// readerGone reports whether one of fds is a pipe or socket whose reading end has closed.
func readerGone(fds []int) bool {
	polled := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		polled[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLOUT}
	}
	if _, err := unix.Poll(polled, 0); err != nil {
		return false
	}
	for _, p := range polled {
		if p.Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
			return true
		}
	}
	return false
}
