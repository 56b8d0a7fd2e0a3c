package redis

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/das-ask/ask/store"
)

// replyErr is an error reply from Redis, as go-redis types it.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

func TestWrapClassifies(t *testing.T) {
	for _, tc := range []struct {
		err         error
		unavailable bool
	}{
		{io.EOF, true},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{replyErr("LOADING Redis is loading the dataset in memory"), true},
		{replyErr("BUSY Redis is busy running a script"), true},
		{replyErr("READONLY You can't write against a read only replica."), true},
		{replyErr("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk"), true},
		{replyErr("ERR Error running script"), false},
		{replyErr("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
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
