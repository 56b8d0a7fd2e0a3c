package model_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/das-ask/ask/agent/model"
)

// A redirect within the origin is followed, body and all; one to another origin is not, and
// nothing reaches it.
func TestSameOriginClient(t *testing.T) {
	var foreign atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { foreign.Add(1) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/v1/messages", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, other.URL+"/v1/messages", http.StatusTemporaryRedirect)
		default:
			w.Header().Set("X-Got", r.Header.Get("X-Api-Key"))
		}
	}))
	defer srv.Close()
	hc := model.SameOriginClient(nil, 0)
	post := func(path string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(`{"q":1}`))
		req.Header.Set("X-Api-Key", "sk-k")
		return hc.Do(req)
	}
	resp, err := post("/moved")
	if err != nil || resp.Header.Get("X-Got") != "sk-k" {
		t.Fatalf("same-origin redirect: %v, %v: want it followed with the key", resp, err)
	}
	resp.Body.Close()
	if _, err := post("/away"); !errors.Is(err, model.ErrOffOrigin) {
		t.Errorf("redirect to another origin: err = %v, want ErrOffOrigin", err)
	}
	if n := foreign.Load(); n != 0 {
		t.Errorf("the other origin received %d requests", n)
	}
	if http.DefaultClient.CheckRedirect != nil {
		t.Errorf("http.DefaultClient was changed")
	}
}
