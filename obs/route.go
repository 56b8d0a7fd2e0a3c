package obs

import (
	"net/http"
	"strings"

	"github.com/das-ask/ask/server"
)

// Routes of the API, as metric labels: templates, never a ticket or conversation id.
const (
	routeCreateConversation = "create_conversation"
	routeCreateAsk          = "create_ask"
	routeStream             = "stream_events"
	routeGetAsk             = "get_ask"
	routeCancel             = "cancel_ask"
	routeSpec               = "openapi"
	routeOther              = "other"
)

// routeOf names the API operation a request is for, from the part of its path after the last
// "/v1/" (so any base path works): a closed set of values.
func routeOf(r *http.Request) string {
	p := r.URL.Path
	i := strings.LastIndex(p, "/v1/")
	if i < 0 {
		return routeOther
	}
	seg := strings.Split(strings.Trim(p[i+len("/v1/"):], "/"), "/")
	switch {
	case len(seg) == 1 && seg[0] == "conversations" && r.Method == http.MethodPost:
		return routeCreateConversation
	case len(seg) == 3 && seg[0] == "conversations" && seg[2] == "asks" && r.Method == http.MethodPost:
		return routeCreateAsk
	case len(seg) == 3 && seg[0] == "asks" && seg[2] == "events":
		return routeStream
	case len(seg) == 3 && seg[0] == "asks" && seg[2] == "cancel":
		return routeCancel
	case len(seg) == 2 && seg[0] == "asks":
		return routeGetAsk
	case len(seg) == 1 && strings.HasPrefix(seg[0], "openapi."):
		return routeSpec
	}
	return routeOther
}

// refusalReasons are the reason label's values: the statuses' (refusalReason) and the ones the
// service names (server.Refused*). Each route's series are made at zero with the metrics, so a
// rate or an alert on a reason sees it from the start, not from its first refusal.
var refusalReasons = []string{"bad_request", "unauthorized", "not_found", "conflict", "too_large",
	"unsupported_media_type", "too_many_in_flight", "unavailable", "other",
	server.RefusedTooManyHeld, server.RefusedConversationFull, server.RefusedFull, server.RefusedShuttingDown}

// refusalReason names why the service refused to admit a conversation or an ask, from the
// status it answered (see the design's status table): "" when it was admitted.
func refusalReason(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusUnsupportedMediaType:
		return "unsupported_media_type"
	case http.StatusTooManyRequests:
		return "too_many_in_flight"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 400 {
		return "other"
	}
	return ""
}

// methodLabel keeps the method label within the methods the API serves.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}
