package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/das-ask/ask/store"
)

func TestWrapClassifies(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable bool
	}{
		{io.EOF, true},
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
