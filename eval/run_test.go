package eval_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/eval"
)

// A service the harness cannot use — a base URL without the gateway prefix, a refused token —
// is a run that could not happen: Run says so before any question is asked, rather than
// returning every item as a harness error for a report of zeros.
func TestRunStopsWhenTheServiceDoesNotAnswer(t *testing.T) {
	set, err := eval.ParseSet([]byte(`
name: t
items:
  - id: a
    question: How many sev1 incidents did we have in 2026-Q2?
    expect: abstention
  - id: b
    question: What is our customer churn rate?
    expect: abstention
`), "inline")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		status int
		want   string
	}{
		{"wrong base URL", http.StatusNotFound, "404"},
		{"refused token", http.StatusUnauthorized, "401"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asks atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if strings.HasSuffix(r.URL.Path, "/asks") {
					asks.Add(1)
				}
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(`{"title":"no","status":` + strconv.Itoa(tc.status) + `}`))
			}))
			defer srv.Close()
			res, err := eval.Run(t.Context(), set, eval.Config{BaseURL: srv.URL, Tokens: eval.FixedTokens{"alice": "t"}})
			if err == nil {
				t.Fatalf("Run returned %d results and no error; want an error saying the service did not answer", len(res))
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q, want it to name the target and the status %s", err, tc.want)
			}
			if n := asks.Load(); n != 0 {
				t.Errorf("%d questions asked; want none", n)
			}
		})
	}
}
