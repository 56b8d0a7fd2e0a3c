package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReadAtMost: the body is read whole whatever its declared length says, and the limit
// (http.MaxBytesReader around it) answers for what runs past it.
func TestReadAtMost(t *testing.T) {
	const limit = 16
	for _, tc := range []struct {
		name     string
		body     string
		declared int64
		want     string
		err      string // "": none; "max": *http.MaxBytesError; else any error
	}{
		{"declared exactly", "hello", 5, "hello", ""},
		{"undeclared", "hello", -1, "hello", ""},
		{"declared zero, body empty", "", 0, "", ""},
		{"longer than declared", "hello world", 5, "hello world", ""},
		{"longer than declared, past the limit", strings.Repeat("x", limit+1), 5, "", "max"},
		{"undeclared, past the limit", strings.Repeat("x", limit+1), -1, "", "max"},
		{"shorter than declared", "hi", 5, "", "short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(tc.body)), limit)
			b, err := readAtMost(r, tc.declared)
			var mbe *http.MaxBytesError
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want %q", err, tc.want)
			case tc.err == "max" && !errors.As(err, &mbe):
				t.Fatalf("error %v, want *http.MaxBytesError", err)
			case tc.err != "" && err == nil:
				t.Fatalf("read %q, want an error", b)
			case tc.err == "" && string(b) != tc.want:
				t.Fatalf("read %q, want %q", b, tc.want)
			}
		})
	}
}

// TestRequestBodyHandsOverTheBytes: after readBody, the body (and what GetBody makes, which is
// what the validator leaves in place) gives its bytes without a copy.
func TestRequestBodyHandsOverTheBytes(t *testing.T) {
	b := []byte(`{"question":"q"}`)
	br := newBodyReader(b)
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req.Body = br
	got, err := requestBody(req)
	if err != nil || &got[0] != &b[0] {
		t.Fatalf("requestBody: %q, %v; want the reader's own bytes", got, err)
	}
	req.Body = io.NopCloser(strings.NewReader("other"))
	if got, err := requestBody(req); err != nil || string(got) != "other" {
		t.Fatalf("requestBody of a plain body: %q, %v", got, err)
	}
}
