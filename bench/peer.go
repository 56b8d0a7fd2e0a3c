package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Peer is the same stream-and-resume workload on our service and on the MCP Go SDK's
// streamable HTTP transport with its memory event store: a unit of work emitting events as fast
// as it can, watched live by one reader, then replayed from the start by a reconnect.
type Peer struct {
	// Events is the frames per stream on each side (ours: accepted … done; theirs: the priming
	// event, the progress notifications, the result).
	Events int `json:"events"`
	// OursLive is ours from POST .../asks to done on the stream (two requests: ticket, then
	// stream); PeerLive from POST tools/call to its result on the same response.
	OursLive Latency `json:"ours_live"`
	PeerLive Latency `json:"peer_live"`
	// OursReplay is a reconnect with Last-Event-ID: 0 to done; PeerReplay a GET with
	// Last-Event-ID <stream>_0 to the result.
	OursReplay Latency `json:"ours_replay"`
	PeerReplay Latency `json:"peer_replay"`
	// LiveSpeedup and ReplaySpeedup are theirs / ours at p50: above 1, ours is ahead.
	LiveSpeedup   float64 `json:"live_speedup"`
	ReplaySpeedup float64 `json:"replay_speedup"`
	// Bytes per frame on the wire, ours and theirs.
	OursBytesPerEvent float64 `json:"ours_bytes_per_event"`
	PeerBytesPerEvent float64 `json:"peer_bytes_per_event"`
}

// mcpProtocol is the protocol version the peer is driven at: the latest with resumable
// streams (later versions drop Last-Event-ID resumption).
const mcpProtocol = "2025-11-25"

// mcpSession is a raw JSON-RPC client of the peer: the same lean SSE reader as for ours, so
// neither side pays for decoding on the load generator.
type mcpSession struct {
	hc    *http.Client
	url   string
	token string
	sid   string
	next  int
}

func (m *mcpSession) do(ctx context.Context, method string, body []byte, hdr map[string]string) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, m.url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if m.sid != "" {
		req.Header.Set("Mcp-Session-Id", m.sid)
		req.Header.Set("Mcp-Protocol-Version", mcpProtocol)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("mcp %s: %s: %s", method, resp.Status, bytes.TrimSpace(b))
	}
	return resp, nil
}

// open initializes a session.
func (m *mcpSession) open(ctx context.Context) error {
	m.next++
	resp, err := m.do(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(m.next)+
		`,"method":"initialize","params":{"protocolVersion":"`+mcpProtocol+`","capabilities":{},"clientInfo":{"name":"askbench","version":"1"}}}`), nil)
	if err != nil {
		return err
	}
	m.sid = resp.Header.Get("Mcp-Session-Id")
	s := newSSECounter(resp.Body)
	err = s.until(isRPCResult)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("mcp initialize: %w", err)
	}
	if m.sid == "" {
		return errors.New("mcp initialize: no Mcp-Session-Id")
	}
	resp, err = m.do(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// call runs emit n to its result and returns the stream's id (for resumption), the counts,
// and the time to the result. It then reads the response to its end (untimed): the SDK
// releases the stream only after the result is written, and a resume before that is a 409.
func (m *mcpSession) call(ctx context.Context, n int) (string, *sseCounter, time.Duration, error) {
	t0 := time.Now()
	m.next++
	resp, err := m.do(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","id":`+strconv.Itoa(m.next)+
		`,"method":"tools/call","params":{"name":"emit","arguments":{"n":`+strconv.Itoa(n)+`},"_meta":{"progressToken":"p"}}}`), nil)
	if err != nil {
		return "", nil, 0, err
	}
	defer resp.Body.Close()
	s := newSSECounter(resp.Body)
	stream := ""
	err = s.until(func(f frame) bool {
		if stream == "" {
			stream, _, _ = strings.Cut(string(f.ID), "_")
		}
		return isRPCResult(f)
	})
	d := time.Since(t0)
	if err != nil {
		return "", nil, 0, fmt.Errorf("mcp tools/call: %w", err)
	}
	if stream == "" {
		return "", nil, 0, errors.New("mcp tools/call: events carry no id: is the event store on?")
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return stream, s, d, nil
}

// resume replays stream after its priming event, to the result.
func (m *mcpSession) resume(ctx context.Context, stream string) (*sseCounter, error) {
	resp, err := m.do(ctx, http.MethodGet, nil, map[string]string{"Last-Event-ID": stream + "_0", "Accept": "text/event-stream"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	s := newSSECounter(resp.Body)
	if err := s.until(isRPCResult); err != nil {
		return nil, fmt.Errorf("mcp resume: %w", err)
	}
	return s, nil
}

func (m *mcpSession) close(ctx context.Context) error {
	resp, err := m.do(ctx, http.MethodDelete, nil, nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// peer runs reps of the workload on each side, alternating.
func peer(ctx context.Context, ch *child, events, reps int) (Peer, error) {
	tok, err := ch.token(ctx, "bench-peer")
	if err != nil {
		return Peer{}, err
	}
	hc := newHTTPClient(4)
	defer hc.CloseIdleConnections()
	api, err := newAskAPI(ch.ep.Ask, hc, tok)
	if err != nil {
		return Peer{}, err
	}
	// Each rep runs in its own MCP session, closed after it: the memory event store holds
	// 10 MiB across all sessions and, once full, drops the head of every stream, which would
	// fail a resume from the start for reasons that are not the workload's.
	session := func() (*mcpSession, error) {
		m := &mcpSession{hc: hc, url: ch.ep.MCP, token: tok}
		return m, m.open(ctx)
	}

	var oursLive, oursReplay, peerLive, peerReplay []time.Duration
	ch.startCPU(ctx)
	p := Peer{Events: events}
	const warm = 5
	for i := range reps + warm {
		// Ours: ticket, stream to done, then replay from 0.
		cid, err := api.conversation(ctx)
		if err != nil {
			return Peer{}, err
		}
		t0 := time.Now()
		ticket, err := api.ask(ctx, cid, questionEmit(events-5, false))
		if err != nil {
			return Peer{}, err
		}
		resp, err := api.stream(ctx, ticket, -1)
		if err != nil {
			return Peer{}, err
		}
		s, err := readToDone(resp)
		live := time.Since(t0)
		if err != nil {
			return Peer{}, err
		}
		if s.Frames != events {
			return Peer{}, fmt.Errorf("ours delivered %d events live, want %d", s.Frames, events)
		}
		t0 = time.Now()
		resp, err = api.stream(ctx, ticket, 0)
		if err != nil {
			return Peer{}, err
		}
		rs, err := readToDone(resp)
		rep := time.Since(t0)
		if err != nil {
			return Peer{}, err
		}
		if rs.Frames != events {
			return Peer{}, fmt.Errorf("ours replayed %d events, want %d", rs.Frames, events)
		}

		// Theirs: the tool call's stream to its result, then resume after the priming event.
		m, err := session()
		if err != nil {
			return Peer{}, err
		}
		stream, ps, plive, err := m.call(ctx, events-2)
		if err != nil {
			return Peer{}, err
		}
		if ps.Frames != events {
			return Peer{}, fmt.Errorf("the peer delivered %d events live, want %d", ps.Frames, events)
		}
		t0 = time.Now()
		prs, err := m.resume(ctx, stream)
		prep := time.Since(t0)
		if err != nil {
			return Peer{}, err
		}
		if err := m.close(ctx); err != nil {
			return Peer{}, err
		}
		if prs.Frames != events-1 {
			return Peer{}, fmt.Errorf("the peer replayed %d events, want %d", prs.Frames, events-1)
		}
		if i >= warm {
			oursLive, oursReplay = append(oursLive, live), append(oursReplay, rep)
			peerLive, peerReplay = append(peerLive, plive), append(peerReplay, prep)
			p.OursBytesPerEvent = float64(s.Bytes) / float64(s.Frames)
			p.PeerBytesPerEvent = float64(ps.Bytes) / float64(ps.Frames)
		}
	}
	p.OursLive, p.OursReplay = summarise(oursLive), summarise(oursReplay)
	p.PeerLive, p.PeerReplay = summarise(peerLive), summarise(peerReplay)
	p.LiveSpeedup = ratio(p.PeerLive.P50, p.OursLive.P50)
	p.ReplaySpeedup = ratio(p.PeerReplay.P50, p.OursReplay.P50)
	return p, nil
}
