package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Replay is a reconnect from Last-Event-ID: 0 to a finished ticket: time to the last event.
type Replay struct {
	// Events is the ticket's log length, done included.
	Events int     `json:"events"`
	Ours   Latency `json:"ours"`
	// Bare is the bare writer sending the same number of pre-encoded frames in one write.
	Bare Latency `json:"bare"`
	// RatioP50 is ours / bare (lower is better).
	RatioP50 float64 `json:"ratio_p50"`
}

// replayTicket makes a finished ticket whose log holds exactly events events: accepted,
// branch open, events-5 steps, branch close, answer, done.
func replayTicket(ctx context.Context, api *askAPI, events int) (string, error) {
	cid, err := api.conversation(ctx)
	if err != nil {
		return "", err
	}
	ticket, err := api.ask(ctx, cid, questionEmit(events-5, false))
	if err != nil {
		return "", err
	}
	resp, err := api.stream(ctx, ticket, -1)
	if err != nil {
		return "", err
	}
	s, err := readToDone(resp)
	if err != nil {
		return "", err
	}
	if s.Frames != events {
		return "", fmt.Errorf("the replay ticket holds %d events, want %d", s.Frames, events)
	}
	return ticket, nil
}

// replay measures reps reconnects from 0 to one finished ticket of events events, alternating
// with the bare writer's one-write replay of as many frames.
func replay(ctx context.Context, ch *child, events, reps int) (Replay, error) {
	tok, err := ch.token(ctx, "bench-replay")
	if err != nil {
		return Replay{}, err
	}
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	api, err := newAskAPI(ch.ep.Ask, hc, tok)
	if err != nil {
		return Replay{}, err
	}
	ticket, err := replayTicket(ctx, api, events)
	if err != nil {
		return Replay{}, err
	}
	ch.startCPU(ctx)
	bareURL := ch.ep.BareSSE + "/?flush=end&n=" + strconv.Itoa(events-1)
	var ours, bare []time.Duration
	for i := range reps + 10 { // the first 10 warm up
		t0 := time.Now()
		resp, err := api.stream(ctx, ticket, 0)
		if err != nil {
			return Replay{}, err
		}
		s, err := readToDone(resp)
		d := time.Since(t0)
		if err != nil {
			return Replay{}, err
		}
		if s.Frames != events {
			return Replay{}, fmt.Errorf("replay delivered %d events, want %d", s.Frames, events)
		}
		t0 = time.Now()
		bs, err := bareGet(ctx, hc, bareURL, tok)
		bd := time.Since(t0)
		if err != nil {
			return Replay{}, err
		}
		if bs.Frames != events {
			return Replay{}, fmt.Errorf("bare replay delivered %d events, want %d", bs.Frames, events)
		}
		if i >= 10 {
			ours, bare = append(ours, d), append(bare, bd)
		}
	}
	r := Replay{Events: events, Ours: summarise(ours), Bare: summarise(bare)}
	r.RatioP50 = ratio(r.Ours.P50, r.Bare.P50)
	return r, nil
}

// bareGet reads one bare stream to its done.
func bareGet(ctx context.Context, hc *http.Client, u, token string) (*sseCounter, error) {
	resp, err := openBare(ctx, hc, u, token)
	if err != nil {
		return nil, err
	}
	return readToDone(resp)
}

// openBare opens the bare stream at u with token: the response, once it is a 200.
func openBare(ctx context.Context, hc *http.Client, u, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("bare stream: %s", resp.Status)
	}
	return resp, nil
}
