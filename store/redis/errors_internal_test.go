package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

func TestWrapClassifies(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable bool
	}{
		{io.EOF, true}, // the reply lost: the call may have been done
		{&net.OpError{Op: "read", Err: errors.New("i/o timeout")}, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("BUSY Redis is busy running a script"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk"), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'. script: 9b81c2b45e5ac5d381a6d5a391d5f1f1d319dc47, on @user_script:1."), true},
		{replyError("NOAUTH Authentication required."), true},
		{replyError("WRONGPASS invalid username-password pair or user is disabled."), true},
		{replyError("ERR Protocol error: unauthenticated multibulk length"), true},
		{replyError("ERR Error running script"), false},
		{replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
	} {
		got := wrap(tc.err)
		if errors.Is(got, store.ErrUnavailable) != tc.unavailable {
			t.Errorf("wrap(%v) = %v; unavailable %v, want %v", tc.err, got, !tc.unavailable, tc.unavailable)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("wrap(%v) = %v, does not wrap it", tc.err, got)
		}
		// Not done: Redis refused the call, or it was never sent. A lost reply may have been.
		var op *net.OpError
		notDone := tc.unavailable && tc.err != io.EOF && (!errors.As(tc.err, &op) || op.Op == "dial")
		if errors.Is(got, store.ErrNotDone) != notDone {
			t.Errorf("wrap(%v) = %v; not done %v, want %v", tc.err, got, !notDone, notDone)
		}
	}
	if wrap(nil) != nil {
		t.Error("wrap(nil) is not nil")
	}
}

// An end that raised an error inside endTickets is judged as the same error reply would be.
func TestEndReplyJudgesABatchedEndsError(t *testing.T) {
	for msg, unavailable := range map[string]bool{
		"LOADING Redis is loading the dataset in memory":                    true,
		"OOM command not allowed when used memory > 'maxmemory'.":           true,
		"WRONGTYPE Operation against a key holding the wrong kind of value": false,
	} {
		_, err := endReply([]any{"error", msg}, nil)
		if err == nil || errors.Is(err, store.ErrUnavailable) != unavailable {
			t.Errorf("endReply of an end's %q: %v; want unavailable %v", msg, err, unavailable)
		}
	}
}

// A Redis that is not there: go-redis's own error for it says the call was not done.
func TestWrapSaysACallNoRedisTookWasNotDone(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	got := wrap(c.Set(t.Context(), "k", "v", 0).Err())
	if !errors.Is(got, store.ErrUnavailable) || !errors.Is(got, store.ErrNotDone) {
		t.Errorf("a write to no Redis: %v, want unavailable and not done", got)
	}
}
