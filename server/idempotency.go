package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// Idempotency-Key (IETF draft-ietf-httpapi-idempotency-key-header) on createConversation and
// createAsk: the record is the store's (store.Idempotency), so every replica sharing the store
// answers a retry the same way.

// idemLock is how long a request holding a key may take before a retry may take the record
// over. A create is a few store round trips; a request still unfinished after this long is
// stalled (its replica frozen, or the store away), and the takeover is safe: it first looks for
// what the stalled attempt created, and the stalled attempt, should it come back, finds the
// record gone from it and undoes what it made.
const idemLock = 10 * time.Second

// createWithin bounds the store work of a create once the record is held. The work goes on
// when the caller goes away (a gateway that timed out, a client retrying elsewhere): leaving it
// half-done would only turn the retry into a takeover.
const createWithin = 30 * time.Second

// idemKey returns the Idempotency-Key's value (the Structured Field string's content, or the
// bare value), "" when there is none, and a 400 when it breaks the contract's rule (which the
// request validator has already checked; this keeps the handler honest on its own).
func idemKey(h *string) (string, error) {
	if h == nil {
		return "", nil
	}
	v := *h
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if !validIdemKey(v) {
		return "", badIdemKey()
	}
	return v, nil
}

// fingerprint identifies a request for its key: the operation, the path's id and the body as
// canonical JSON (so that key order and spacing do not matter). It is a SHA-256 keyed by the
// owner and the key, so the store holds no body (and no question), only a digest of it.
func fingerprint(owner store.Owner, key, op, pathID string, body []byte) string {
	canon := []byte{}
	if len(bytes.TrimSpace(body)) > 0 {
		var v any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			if b, err := json.Marshal(v); err == nil {
				canon = b
			}
		} else {
			canon = body
		}
	}
	h := sha256.New()
	for _, part := range []string{"ask idempotency v1", owner.Key(), key, op, pathID} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil))
}

// storedResponse is what a record keeps of the response it replays.
type storedResponse struct {
	Status   int             `json:"status"`
	Location string          `json:"location,omitempty"`
	Body     json.RawMessage `json:"body"`
}

func encodeResponse(status int, location string, body any) ([]byte, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, nil, err
	}
	rec, err := json.Marshal(storedResponse{Status: status, Location: location, Body: b})
	return b, rec, err
}

// writeResponse writes a create's response, first or replayed, byte for byte the same body.
func writeResponse(c echo.Context, status int, location string, body []byte, replayed bool) error {
	h := c.Response().Header()
	if location != "" {
		h.Set("Location", location)
	}
	if replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	// With its length: a keyed 202 is flushed before its run starts, and would otherwise go
	// out chunked, its replay not (net/http sets the length of a response never flushed).
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(body)+1))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(append(body, '\n'))
	return err
}

// replay answers a completed record's stored response.
func replay(c echo.Context, raw []byte) error {
	var r storedResponse
	if err := json.Unmarshal(raw, &r); err != nil || r.Status == 0 {
		return errors.New("idempotency record holds no response")
	}
	return writeResponse(c, r.Status, r.Location, r.Body, true)
}

// idem is one keyed create in progress.
type idem struct {
	s     *Server
	owner store.Owner
	key   string
	fp    string
	cand  string
	prev  string
	// began is when the record was begun by this request: the record's TTL runs from its first
	// use, no later.
	began time.Time
}

// beginIdem holds the record for a keyed create, or answers the request itself: a replay,
// 422 or 409. When it returns a nil *idem with a nil error the response has been written.
func (s *Server) beginIdem(ctx context.Context, c echo.Context, owner store.Owner, key, fp, candidate string) (*idem, error) {
	began := time.Now()
	res, err := s.store.BeginIdempotent(ctx, owner, key, store.IdemBegin{Fingerprint: fp, Candidate: candidate, Lock: idemLock, TTL: s.opts.TTL})
	if err != nil {
		// Answered 503 "retry shortly", and nothing was created under candidate; but the
		// store may have taken the record (its reply lost, or the script run once a stall
		// ended), held by a request no longer processed: every retry would answer 409
		// "still in progress" until its lock lapsed. It is released once the store answers.
		s.abandonLate(owner, key, candidate)
		return nil, err
	}
	switch res.State {
	case store.IdemDone:
		return nil, replay(c, res.Response)
	case store.IdemMismatch:
		return nil, idemReused()
	case store.IdemBusy:
		return nil, idemBusy()
	}
	return &idem{s: s, owner: owner, key: key, fp: fp, cand: res.ID, prev: res.Prev, began: began}, nil
}

// complete records the response answered under final; it reports false when another attempt
// took the record over meanwhile (this one stalled past its lock).
func (i *idem) complete(ctx context.Context, final string, rec []byte) (bool, error) {
	err := i.s.store.CompleteIdempotent(ctx, i.owner, i.key, i.cand, final, rec)
	if errors.Is(err, store.ErrIdemLost) {
		return false, nil
	}
	return err == nil, err
}

// abandon frees the key after a refusal that created nothing, so a retry runs afresh.
func (i *idem) abandon(ctx context.Context) {
	if err := i.s.store.AbandonIdempotent(ctx, i.owner, i.key, i.cand); err != nil {
		i.s.log.Warn("idempotency record not released", "err", err)
	}
}

// abandonLate releases, on a runner goroutine once the store answers, the record a
// BeginIdempotent that failed may have left held by candidate (AbandonIdempotent leaves a record
// that candidate does not hold alone). A store in this process answers every call.
func (s *Server) abandonLate(owner store.Owner, key, candidate string) {
	if !isShared(s.store) {
		return
	}
	// Shut down, nothing is started: the lock lapses.
	s.whenStoreBack(func() bool {
		switch err := s.store.AbandonIdempotent(s.base, owner, key, candidate); {
		case err == nil:
		case errors.Is(err, store.ErrUnavailable):
			return false
		case s.base.Err() != nil:
		default:
			s.log.Error("idempotency record of a request answered 503 not released", "err", err)
		}
		return true
	}, nil)
}

// completeLate settles, on a runner goroutine once the store answers, a keyed ask whose
// completion of its record went unanswered (the request was answered 503): CompleteIdempotent
// is safe to repeat, and its answer says whose the key is. The ticket's own: it runs now, and
// a retry is answered its 202. Another attempt's (a retry took the record over while this one
// stalled, and answered its own ticket): it ends unrun, as a taken-over create does in the
// handler. Until 2026-12-07 such an ask ran at once, answered 202: when a retry had taken the
// key over, one key made and ran two asks, and its caller held a ticket the key did not name.
// Shut down first, it ends as a run shut down would, unrun.
func (s *Server) completeLate(ik *idem, ticket string, rec []byte, r *run, runCtx context.Context, req ask.Request, hook *gen.WebhookRequest) {
	ours := false
	try := func() bool {
		ok, err := ik.complete(s.base, ticket, rec)
		switch {
		case errors.Is(err, store.ErrUnavailable):
			return false
		case err != nil:
			// Unknown still, and not for want of the store: the ask is not run.
			s.log.Error("idempotency record of an ask answered 503 not completed; its ticket is ended unrun", "ticket", ticket, "err", err)
		}
		ours = ok
		return true
	}
	settled := func(known bool) {
		switch {
		case !known:
			r.stop(errShutdown)
		case !ours:
			s.endTakenOver(r, hook)
		default:
			s.keyedCreated(ik, ticket, rec)
			s.start(r, runCtx, req)
		}
	}
	if !s.whenStoreBack(try, settled) {
		r.stop(errShutdown)
	}
}

// endTakenOver ends r, the ticket of a keyed ask whose record a retry took over while it
// stalled and answered its own ticket: an ask nobody will follow. It ends before it runs,
// leaving neither a turn (the retry's is the question's) nor a delivery to its webhook, hook
// (the receiver is told of the retry's ticket); the webhook goes first, as the end would make
// a delivery due.
func (s *Server) endTakenOver(r *run, hook *gen.WebhookRequest) {
	s.log.Debug("idempotent create taken over by a retry; ending its ticket", "ticket", r.ticket, "conversation", r.conv)
	s.dropWebhook(r.ticket, hook)
	r.discard()
}

// createdNothing reports whether err is an answer that created nothing (every problem the handler
// chooses, and the store's refusals), after which the key is released, as opposed to a failure
// whose effect is unknown (the record stays until its lock lapses, and a retry then looks for
// what was created).
func createdNothing(err error) bool {
	var p *problem
	return errors.As(err, &p) ||
		errors.Is(err, store.ErrFull) || errors.Is(err, store.ErrOwnerFull) ||
		errors.Is(err, store.ErrTooManyInFlight) || errors.Is(err, store.ErrConversationFull) ||
		errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotRun)
}

// detached is ctx without its cancellation, bounded by createWithin.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), createWithin)
}

// validIdemKey is the contract's rule for a key.
func validIdemKey(v string) bool {
	if len(v) < 1 || len(v) > 255 {
		return false
	}
	return strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~:+/=-") == ""
}
