package server

import (
	"errors"
	"strings"
	"time"
)

// Defaults for Config's and Options' zero values.
const (
	DefaultBasePath    = "/ask"
	DefaultTTL         = 900 * time.Second
	DefaultMaxEvents   = 1000
	DefaultKeepAlive   = 10 * time.Second
	DefaultDeadline    = 120 * time.Second
	DefaultMaxInFlight = 4
	DefaultMaxTickets  = 10000
	// DefaultMaxConversationsPerID and DefaultMaxRetainedPerID are one identity's share of
	// the shared caps; DefaultMaxTurnsPerConversation bounds a conversation's memory and what
	// each ask in it resends to the model (agent.DefaultMaxModelCalls bounds one run instead).
	DefaultMaxConversationsPerID   = 100
	DefaultMaxRetainedPerID        = 1000
	DefaultMaxTurnsPerConversation = 50
	DefaultMaxBodyBytes            = 80 << 10
	DefaultShutdownGrace           = 10 * time.Second
	// DefaultStoreWait is under a gateway's usual read timeout (deploy/nginx's 5 s), so a
	// client behind one hears the service's 503 rather than the gateway's 504.
	DefaultStoreWait = 4 * time.Second
	// DefaultStreamWriteTimeout is nginx's send_timeout: a stream's client that takes nothing
	// of a write for this long has stopped reading (or its peer is gone unnoticed).
	DefaultStreamWriteTimeout = 60 * time.Second
	// DefaultBodyReadTimeout is nginx's client_body_timeout, here for a whole body (at most
	// MaxBodyBytes, 80 KiB by default) rather than between two reads.
	DefaultBodyReadTimeout = 60 * time.Second
	minMaxEvents           = 8
)

// Config is the service's settings, the "service" section of package config's tree (which
// reads them from DAS_ASK_*). Zero values mean the defaults below, as in Options; "none" is
// negative (ShutdownGrace). The auth settings belong to package auth, not here.
type Config struct {
	// BasePath is where the API is served (DAS_ASK_PATH); "" means DefaultBasePath and "/"
	// the root.
	BasePath    string
	TTL         time.Duration // DAS_ASK_TTL_S
	MaxEvents   int           // DAS_ASK_MAX_EVENTS
	KeepAlive   time.Duration // DAS_ASK_KEEPALIVE_S
	Deadline    time.Duration // DAS_ASK_DEADLINE_S
	MaxInFlight int           // DAS_ASK_MAX_INFLIGHT_PER_ID
	MaxTickets  int           // DAS_ASK_MAX_TICKETS
	// MaxConversationsPerID, MaxRetainedPerID: DAS_ASK_MAX_CONVERSATIONS_PER_ID,
	// DAS_ASK_MAX_RETAINED_PER_ID. MaxTurns (asks per conversation):
	// DAS_ASK_MAX_TURNS_PER_CONVERSATION.
	MaxConversationsPerID int
	MaxRetainedPerID      int
	MaxTurns              int
	MaxBodyBytes          int64 // DAS_ASK_MAX_BODY_BYTES
	// ShutdownGrace is DAS_ASK_SHUTDOWN_GRACE_S; negative means none.
	ShutdownGrace time.Duration
	StoreWait     time.Duration // DAS_ASK_STORE_WAIT_S
}

// DefaultConfig is Config with every default spelled out.
func DefaultConfig() Config {
	return Config{
		BasePath:              DefaultBasePath,
		TTL:                   DefaultTTL,
		MaxEvents:             DefaultMaxEvents,
		KeepAlive:             DefaultKeepAlive,
		Deadline:              DefaultDeadline,
		MaxInFlight:           DefaultMaxInFlight,
		MaxTickets:            DefaultMaxTickets,
		MaxConversationsPerID: DefaultMaxConversationsPerID,
		MaxRetainedPerID:      DefaultMaxRetainedPerID,
		MaxTurns:              DefaultMaxTurnsPerConversation,
		MaxBodyBytes:          DefaultMaxBodyBytes,
		ShutdownGrace:         DefaultShutdownGrace,
		StoreWait:             DefaultStoreWait,
	}
}

// CleanBasePath is how New reads Options.BasePath: "" or "/" (serve at the root) or an
// absolute path without a trailing slash, query or fragment, normalised ("" for the root).
func CleanBasePath(p string) (string, error) { return cleanBasePath(p) }

// notPathChar reports whether r may not appear as it is in a URL's path (RFC 3986: unreserved,
// sub-delims, "@" and "/"; ":" and "%" are refused apart). The base path begins every Location
// header and *_url field the service writes, unescaped: a character that would need escaping
// there (a non-ASCII letter, a quote, "<") would make them invalid URIs.
func notPathChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~!$&'()*+,;=@/", r)
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
	if p = strings.TrimRight(p, "/"); p == "" {
		return "", nil // "///": the root
	}
	// cleanPath: a dot or empty segment, which the edge answers 404 wherever it is, would leave
	// nothing served at all
	if strings.ContainsAny(p, "?#% \t:") || !cleanPath(p) || strings.IndexFunc(p, notPathChar) >= 0 {
		return "", errors.New("want a plain absolute path such as /ask")
	}
	return p, nil
}
