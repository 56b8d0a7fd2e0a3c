package memnet_test

import (
	"bufio"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/das-ask/ask/internal/memnet"
)

// A response comes back once the handler commits its headers, streams its body while the
// handler runs, and closing the body cancels the handler's context — all inside a bubble.
func TestTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stopped := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body == nil {
				t.Error("the handler got a nil body")
			}
			w.Header().Set("X-Test", "1")
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "first\n")
			<-r.Context().Done()
			stopped <- r.Context().Err()
		})
		c := &http.Client{Transport: memnet.Transport{Handler: h}}
		resp, err := c.Get("http://mem.test/")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusTeapot || resp.Header.Get("X-Test") != "1" {
			t.Errorf("status %d, header %v", resp.StatusCode, resp.Header)
		}
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if err != nil || line != "first\n" {
			t.Errorf("read %q, %v", line, err)
		}
		time.Sleep(time.Hour) // durably blocked: the fake clock advances
		select {
		case err := <-stopped:
			t.Fatalf("the handler stopped before the body was closed: %v", err)
		default:
		}
		_ = resp.Body.Close()
		if err := <-stopped; err == nil {
			t.Error("closing the body did not cancel the handler's context")
		}
	})
}

// A handler that returns without writing answers 200 with an empty body; one that flushes
// through http.ResponseController commits its headers at once.
func TestCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &http.Client{Transport: memnet.Transport{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}}
		resp, err := c.Get("http://mem.test/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) != 0 {
			t.Errorf("status %d, body %q", resp.StatusCode, b)
		}

		release := make(chan struct{})
		c = &http.Client{Transport: memnet.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush: %v", err)
			}
			<-release
		})}}
		resp, err = c.Get("http://mem.test/")
		if err != nil {
			t.Fatal(err)
		}
		close(release)
		_ = resp.Body.Close()
	})
}
