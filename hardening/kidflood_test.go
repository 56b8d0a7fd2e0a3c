package hardening_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/das-ask/ask/demo/idp"
	"github.com/das-ask/ask/demo/stack"
)

// TestUnknownKIDFlood measures what a flood of forged tokens with unknown kids costs, through
// the real service and IdP over loopback: the time each forged request takes to its 401, and a
// real token's latency on the same service meanwhile. It asserts the outcomes (every forged
// request 401, every real one past auth) and reports the figures; it asserts no latency (they
// are measurements of this machine, recorded in SECURITY.md with this command):
//
//	go test ./hardening/ -run TestUnknownKIDFlood -count=1 -v
func TestUnknownKIDFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("a few seconds of flood")
	}
	const (
		workers  = 8
		forged   = 800 // distinct unknown kids, cycled (an unknown kid is never cached)
		duration = 3 * time.Second
	)
	s, sink := startStack(t, stack.Options{})
	a := newAPI(s.AskURL)
	defer a.close()
	ctx := t.Context()
	tokens := make([]string, forged)
	for i := range tokens {
		tokens[i] = selfSigned(t, validClaims(s.IdP, "mallory"), fmt.Sprintf("flood-%d", i))
	}
	real := mint(t, s.IdP, idp.Claims{OID: "alice"})

	var (
		mu            sync.Mutex
		toRefusal     []time.Duration
		realLatencies []time.Duration
		wrong         []string
	)
	began := time.Now()
	stop := began.Add(duration)
	var flood, wg sync.WaitGroup
	for w := range workers {
		flood.Go(func() {
			for i := w; time.Now().Before(stop); i += workers {
				start := time.Now()
				r := a.do(ctx, t, http.MethodPost, "/v1/conversations", tokens[i%forged], []byte(`{}`), nil)
				d := time.Since(start)
				mu.Lock()
				toRefusal = append(toRefusal, d)
				if r.status != http.StatusUnauthorized {
					wrong = append(wrong, fmt.Sprintf("forged token: %d", r.status))
				}
				mu.Unlock()
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for time.Now().Before(stop) {
			start := time.Now()
			// Past auth, an unknown ticket is a 404: the request is the validator's cost only.
			r := a.do(ctx, t, http.MethodGet, "/v1/asks/t_NOSUCHTICKETNOSUCHTICKET00", real, nil, nil)
			d := time.Since(start)
			mu.Lock()
			realLatencies = append(realLatencies, d)
			if r.status != http.StatusNotFound {
				wrong = append(wrong, fmt.Sprintf("real token: %d", r.status))
			}
			mu.Unlock()
			<-tick.C
		}
	})
	flood.Wait()
	floodTook := time.Since(began)
	wg.Wait()
	for _, w := range wrong {
		t.Error(w)
	}
	if len(toRefusal) < workers || len(realLatencies) < 10 {
		t.Fatalf("only %d forged and %d real requests: nothing measured", len(toRefusal), len(realLatencies))
	}
	// Nothing of any token reached a log line, flood or not.
	logs := sink.String()
	for _, tok := range append([]string{real}, tokens[:50]...) {
		for _, secret := range tokenSecrets(tok) {
			if strings.Contains(logs, secret) {
				t.Fatalf("a log line carries a token (%.24q…)", secret)
			}
		}
	}
	t.Logf("forged tokens with unknown kids: %d in %s by %d workers (%.0f/s); time to 401: %s",
		len(toRefusal), floodTook.Round(time.Millisecond), workers, float64(len(toRefusal))/floodTook.Seconds(), summary(toRefusal))
	t.Logf("a real token meanwhile: %d requests; latency: %s", len(realLatencies), summary(realLatencies))
}

// summary is p50, p99 and max of ds.
func summary(ds []time.Duration) string {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	r := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	return fmt.Sprintf("p50 %s, p99 %s, max %s", r(q(0.50)), r(q(0.99)), r(ds[len(ds)-1]))
}
