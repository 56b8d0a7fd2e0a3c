package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/das-ask/ask/store"
)

// wrap turns an error from a Redis call into the store's: store.ErrUnavailable when Redis
// could not be reached or could not take the write now (the connection failed or timed out,
// the server is loading, paused, read-only, refusing writes, or full: OOM at its maxmemory
// with noeviction, which clears as keys expire), so the service answers 503 and retries
// writes; the caller's own cancellation stays what it is. An error reply Redis gave to a
// well-formed call (a bug) is neither.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redis store: %w", err)
	}
	var re goredis.Error
	if errors.As(err, &re) && !transientReply(re.Error()) {
		return fmt.Errorf("redis store: %w", err)
	}
	return fmt.Errorf("redis store: %w: %w", store.ErrUnavailable, err)
}

// transientReply reports whether an error reply says the server cannot serve now rather than
// that the call was wrong. A write refused for memory is "OOM command not allowed when used
// memory > 'maxmemory'", with " script: …" after it when a script's first write met it (the
// script then wrote nothing: Redis refuses a script's write for memory only before its first),
// and the same text as an end's error inside endTickets. A Redis that asks a password the store
// was not given (restarted or reconfigured with another) is unavailable too, not the request at
// fault: NOAUTH or WRONGPASS, or, for a command with more arguments than Redis reads from a
// client not yet authenticated, "ERR Protocol error: unauthenticated multibulk length".
func transientReply(msg string) bool {
	for _, p := range []string{"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "MISCONF", "NOREPLICAS", "UNBLOCKED", "OOM",
		"NOAUTH", "WRONGPASS", "ERR Protocol error: unauthenticated"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// replyError is an error reply Redis gave inside a script that caught it (endTickets answers an
// end's own error so), made a go-redis error again so that wrap judges it as it judges a reply.
type replyError string

func (e replyError) Error() string { return string(e) }

func (replyError) RedisError() {}

var _ goredis.Error = replyError("")
