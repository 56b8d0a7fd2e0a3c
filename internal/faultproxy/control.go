package faultproxy

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Handler is the proxy's control API, for a test driver in another process (the chaos
// suite). Every fault is a POST, answered 204; GET /stats answers Stats as JSON.
//
//	POST /pass                      forward everything
//	POST /delay?d=200ms             hold each chunk d (a Go duration)
//	POST /stall                     hold everything until the next change
//	POST /refuse                    reset every connection, open and new, until the next change
//	POST /reset                     reset every open connection once
//	POST /drop?n=1&match=X&then=close|stall
//	                                lose the replies to the next n requests containing X
//	POST /disarm                    cancel the drops not yet fired
//	GET  /stats                     {"accepted":…,"replies_dropped":…,"resets":…,"held":…}
//
// Bad parameters answer 400 with a one-line text reason. The API has no authentication:
// serve it on loopback only.
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	do := func(f func()) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			f()
			w.WriteHeader(http.StatusNoContent)
		}
	}
	mux.HandleFunc("POST /pass", do(p.Pass))
	mux.HandleFunc("POST /stall", do(p.Stall))
	mux.HandleFunc("POST /refuse", do(p.Refuse))
	mux.HandleFunc("POST /reset", do(p.ResetAll))
	mux.HandleFunc("POST /disarm", do(p.Disarm))
	mux.HandleFunc("POST /delay", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 {
			http.Error(w, "d must be a non-negative Go duration such as 200ms", http.StatusBadRequest)
			return
		}
		p.Delay(d)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /drop", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		n := 1
		if s := q.Get("n"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				http.Error(w, "n must be a positive integer", http.StatusBadRequest)
				return
			}
			n = v
		}
		then := Close
		switch q.Get("then") {
		case "", "close":
		case "stall":
			then = Stall
		default:
			http.Error(w, "then must be close or stall", http.StatusBadRequest)
			return
		}
		p.DropReplies(n, q.Get("match"), then)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Stats())
	})
	return mux
}
