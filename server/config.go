package server

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults for Config and for Options' zero values.
const (
	DefaultBasePath    = "/ask"
	DefaultTTL         = 900 * time.Second
	DefaultMaxEvents   = 1000
	DefaultKeepAlive   = 10 * time.Second
	DefaultDeadline    = 120 * time.Second
	DefaultMaxInFlight = 4
	DefaultMaxTickets  = 10000
	// DefaultMaxConversationsPerID and DefaultMaxRetainedPerID are one identity's share of
	// the shared caps; DefaultMaxTurns bounds a conversation's memory and what each ask in it
	// resends to the model.
	DefaultMaxConversationsPerID = 100
	DefaultMaxRetainedPerID      = 1000
	DefaultMaxTurns              = 50
	DefaultMaxBodyBytes          = 64 << 10
	DefaultShutdownGrace         = 10 * time.Second
	minMaxEvents                 = 8
	maxBodyBytesUpperEdge        = 16 << 20
)

// Config is the service's configuration from the environment (see ConfigFromEnv). The auth
// settings (DAS_JWKS_URL, DAS_ISSUER, …) belong to package auth, not here.
type Config struct {
	BasePath    string        // DAS_ASK_PATH
	TTL         time.Duration // DAS_ASK_TTL_S
	MaxEvents   int           // DAS_ASK_MAX_EVENTS
	KeepAlive   time.Duration // DAS_ASK_KEEPALIVE_S
	Deadline    time.Duration // DAS_ASK_DEADLINE_S
	MaxInFlight int           // DAS_ASK_MAX_INFLIGHT_PER_ID
	MaxTickets  int           // DAS_ASK_MAX_TICKETS
	// MaxConversationsPerID, MaxRetainedPerID: DAS_ASK_MAX_CONVERSATIONS_PER_ID,
	// DAS_ASK_MAX_RETAINED_PER_ID. MaxTurns: DAS_ASK_MAX_TURNS_PER_CONVERSATION.
	MaxConversationsPerID int
	MaxRetainedPerID      int
	MaxTurns              int
	MaxBodyBytes          int64         // DAS_ASK_MAX_BODY_BYTES
	ShutdownGrace         time.Duration // DAS_ASK_SHUTDOWN_GRACE_S
}

// ConfigFromEnv reads Config from the process environment; see LookupConfig.
func ConfigFromEnv() (Config, error) { return LookupConfig(os.LookupEnv) }

// LookupConfig reads Config through lookup (os.LookupEnv in production). An unset or empty
// variable means its default; any invalid value is an error naming the variable and what it
// accepts, and all such errors are reported together.
func LookupConfig(lookup func(string) (string, bool)) (Config, error) {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	var errs []error
	seconds := func(name string, def time.Duration, min int64) time.Duration {
		v, ok := get(name)
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > 1<<31 {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number of seconds >= %d", name, v, min))
			return def
		}
		return time.Duration(n) * time.Second
	}
	count := func(name string, def int64, min, max int64) int64 {
		v, ok := get(name)
		if !ok {
			return def
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < min || n > max {
			errs = append(errs, fmt.Errorf("%s=%q: want a whole number from %d to %d", name, v, min, max))
			return def
		}
		return n
	}

	c := Config{
		BasePath:              DefaultBasePath,
		TTL:                   seconds("DAS_ASK_TTL_S", DefaultTTL, 1),
		MaxEvents:             int(count("DAS_ASK_MAX_EVENTS", DefaultMaxEvents, minMaxEvents, 1_000_000)),
		KeepAlive:             seconds("DAS_ASK_KEEPALIVE_S", DefaultKeepAlive, 1),
		Deadline:              seconds("DAS_ASK_DEADLINE_S", DefaultDeadline, 1),
		MaxInFlight:           int(count("DAS_ASK_MAX_INFLIGHT_PER_ID", DefaultMaxInFlight, 1, 1_000_000)),
		MaxTickets:            int(count("DAS_ASK_MAX_TICKETS", DefaultMaxTickets, 1, 100_000_000)),
		MaxConversationsPerID: int(count("DAS_ASK_MAX_CONVERSATIONS_PER_ID", DefaultMaxConversationsPerID, 1, 100_000_000)),
		MaxRetainedPerID:      int(count("DAS_ASK_MAX_RETAINED_PER_ID", DefaultMaxRetainedPerID, 1, 100_000_000)),
		MaxTurns:              int(count("DAS_ASK_MAX_TURNS_PER_CONVERSATION", DefaultMaxTurns, 1, 10_000)),
		MaxBodyBytes:          count("DAS_ASK_MAX_BODY_BYTES", DefaultMaxBodyBytes, 1024, maxBodyBytesUpperEdge),
		ShutdownGrace:         seconds("DAS_ASK_SHUTDOWN_GRACE_S", DefaultShutdownGrace, 0),
	}
	if c.MaxRetainedPerID < c.MaxInFlight {
		// Running tickets are held tickets: the in-flight cap could never be reached.
		errs = append(errs, fmt.Errorf("DAS_ASK_MAX_RETAINED_PER_ID=%d: want at least DAS_ASK_MAX_INFLIGHT_PER_ID (%d), since running asks are retained tickets too",
			c.MaxRetainedPerID, c.MaxInFlight))
	}
	if v, ok := lookup("DAS_ASK_PATH"); ok {
		p, err := cleanBasePath(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("DAS_ASK_PATH=%q: %w", v, err))
		} else {
			c.BasePath = p
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, fmt.Errorf("ask service configuration: %w", err)
	}
	return c, nil
}

// cleanBasePath accepts "" or "/" (serve at the root) or an absolute path without a trailing
// slash, query or fragment, and returns it normalised ("" for the root).
func cleanBasePath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if p == "" || p == "/" {
		return "", nil
	}
	if !strings.HasPrefix(p, "/") {
		return "", errors.New("want an absolute path such as /ask")
	}
	p = strings.TrimRight(p, "/")
	if strings.ContainsAny(p, "?#% \t:") || strings.Contains(p, "//") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/..") {
		return "", errors.New("want a plain absolute path such as /ask")
	}
	return p, nil
}
