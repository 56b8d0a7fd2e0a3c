package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// rawEvent is one event exactly as the service framed it: the chaos checker compares bytes
// and sees duplicates, which a client that de-duplicates by seq would hide.
type rawEvent struct {
	Seq  int64
	Type string
	Data string
}

// streamReader reads a ticket's stream through the gateway with its own minimal SSE parser and
// reconnects (Last-Event-ID) on any failure, and also on purpose: forced reconnects.
type streamReader struct {
	base  string
	token string
	http  *http.Client
	// idle is how long a connection may stay silent (no event, no keep-alive) before it is
	// taken for dead.
	idle time.Duration
}

// read follows ticket from after to done or ctx's end. forceEvery > 0 drops the connection
// after about every forceEvery events and resumes with Last-Event-ID. It returns every event
// received (duplicates included), whether done arrived, and the number of reconnects.
func (r streamReader) read(ctx context.Context, ticket string, after int64, forceEvery int) (evs []rawEvent, done bool, reconnects int, err error) {
	last := after
	backoff := 100 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return evs, false, reconnects, ctx.Err()
		}
		got, sawDone, cerr := r.connect(ctx, ticket, last, forceEvery)
		for _, e := range got {
			evs = append(evs, e)
			last = max(last, e.Seq)
		}
		if sawDone {
			return evs, true, reconnects, nil
		}
		var fatal *fatalStatus
		if errors.As(cerr, &fatal) {
			return evs, false, reconnects, cerr
		}
		reconnects++
		if len(got) > 0 {
			backoff = 100 * time.Millisecond
		} else {
			backoff = min(2*backoff, 2*time.Second)
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(backoff))) + 20*time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return evs, false, reconnects, ctx.Err()
		case <-t.C:
		}
	}
}

// fatalStatus is a refusal a reconnect cannot cure (400, 401, 404).
type fatalStatus struct{ status int }

func (f *fatalStatus) Error() string { return "stream refused: " + strconv.Itoa(f.status) }

var errForced = errors.New("forced reconnect")

// connect makes one connection; it returns the events it read and whether done was among them.
func (r streamReader) connect(ctx context.Context, ticket string, after int64, forceEvery int) ([]rawEvent, bool, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, r.base+"/v1/asks/"+ticket+"/events", nil)
	if err != nil {
		return nil, false, &fatalStatus{0}
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Accept", "text/event-stream")
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusNotFound:
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, false, &fatalStatus{resp.StatusCode}
	default:
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, false, fmt.Errorf("stream: %d", resp.StatusCode)
	}
	// A watchdog cuts a connection silent for longer than idle.
	activity := make(chan struct{}, 1)
	go func() {
		t := time.NewTimer(r.idle)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-activity:
				t.Reset(r.idle)
			case <-t.C:
				cancel()
				return
			}
		}
	}()
	force := -1
	if forceEvery > 0 {
		force = 1 + rand.IntN(forceEvery)
	}
	var evs []rawEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var id, typ string
	var data []string
	for sc.Scan() {
		select {
		case activity <- struct{}{}:
		default:
		}
		line := sc.Text()
		switch {
		case line == "":
			if len(data) == 0 {
				id, typ = "", ""
				continue
			}
			seq, _ := strconv.ParseInt(id, 10, 64)
			ev := rawEvent{Seq: seq, Type: typ, Data: strings.Join(data, "\n")}
			evs = append(evs, ev)
			id, typ, data = "", "", nil
			if ev.Type == "done" {
				return evs, true, nil
			}
			if force > 0 && len(evs) >= force {
				return evs, false, errForced
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			typ = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return evs, false, err
	}
	return evs, false, io.ErrUnexpectedEOF
}

// eventBody decodes an event's JSON data (nil when it is not JSON).
func eventBody(e rawEvent) map[string]any {
	var m map[string]any
	if json.Unmarshal([]byte(e.Data), &m) != nil {
		return nil
	}
	return m
}
