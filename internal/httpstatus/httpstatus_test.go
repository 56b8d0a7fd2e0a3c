package httpstatus_test

import (
	"net/http"
	"testing"

	"github.com/das-ask/ask/internal/httpstatus"
)

// The statuses RFC 9110 (section 15) renamed carry their new names; the rest keep Go's.
func TestText(t *testing.T) {
	for code, want := range map[int]string{
		http.StatusRequestEntityTooLarge:        "Content Too Large",
		http.StatusRequestURITooLong:            "URI Too Long",
		http.StatusRequestedRangeNotSatisfiable: "Range Not Satisfiable",
		http.StatusUnprocessableEntity:          "Unprocessable Content",
		http.StatusBadRequest:                   "Bad Request",
		http.StatusTooManyRequests:              "Too Many Requests",
		http.StatusServiceUnavailable:           "Service Unavailable",
		799:                                     "",
	} {
		if got := httpstatus.Text(code); got != want {
			t.Errorf("Text(%d) = %q, want %q", code, got, want)
		}
	}
}

func TestKnown(t *testing.T) {
	for _, tc := range []struct {
		code  int
		title string
		want  bool
	}{
		{413, "Content Too Large", true},
		{413, "Request Entity Too Large", true},
		{413, "the body is too large", false},
		{422, "Unprocessable Entity", true},
		{400, "Bad Request", true},
		{400, "Conflict", false},
	} {
		if got := httpstatus.Known(tc.code, tc.title); got != tc.want {
			t.Errorf("Known(%d, %q) = %v, want %v", tc.code, tc.title, got, tc.want)
		}
	}
}
