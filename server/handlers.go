package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/das-ask/ask"
	"github.com/das-ask/ask/gen"
	"github.com/das-ask/ask/store"
)

// handlers implements the generated interface. Middleware has already authenticated the
// caller and validated the request against the embedded spec when a method runs.
type handlers struct{ s *Server }

var _ gen.ServerInterface = (*handlers)(nil)

// CreateConversation opens a conversation owned by the caller. With an Idempotency-Key, a
// retry of the same request answers the same conversation (idempotency.go).
func (h *handlers) CreateConversation(c echo.Context, params gen.CreateConversationParams) error {
	s := h.s
	owner := ownerOf(c)
	key, err := idemKey(params.IdempotencyKey)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	var ik *idem
	if key == "" {
		// A stalled store answers 503 within StoreWait; a conversation it takes after that
		// is removed (dropUnanswered).
		var cancel context.CancelFunc
		ctx, cancel = s.createBound(ctx)
		defer cancel()
	} else {
		var cancel context.CancelFunc
		ctx, cancel = detached(ctx)
		defer cancel()
	}
	// Minted under the create's bound: the id asks a shared store for its generation (once a
	// second), which a stalled store must not hold past StoreWait either.
	id, err := s.newID(ctx, "c", owner)
	if err != nil {
		return err
	}
	if key != "" {
		body, err := requestBody(c.Request())
		if err != nil {
			return badRequest("the request body could not be read")
		}
		if len(body) == 0 {
			// The body is optional and names nothing required: none is the same request as {}.
			body = []byte("{}")
		}
		if ik, err = s.beginIdem(ctx, c, owner, key, fingerprint(owner, key, "createConversation", "", body), id); ik == nil {
			return err
		}
		id = ik.cand
		if ik.prev != "" {
			// An earlier attempt with this key stalled past its lock: answer what it created.
			if conv, _, err := s.store.Conversation(ctx, ik.prev); err == nil && sameOwner(conv.Owner, owner) {
				if err := h.conversationCreated(ctx, c, ik, conv); !errors.Is(err, errPrevGivenUp) {
					return err
				}
				ik.prev = "" // as the record has it now: this attempt makes its own
			}
		}
		// Let through admission for its key, which has nothing to answer: admitted now. (Without
		// a key, admission admitted it.)
		if err := s.admitCreate(ctx, ik, false); err != nil {
			return err
		}
	}
	conv := store.Conversation{ID: id, Owner: owner, CreatedAt: time.Now().UTC()}
	if err := s.store.CreateConversation(ctx, conv, s.limits()); err != nil {
		switch {
		case ik != nil && createdNothing(err):
			ik.abandon(ctx)
		case ik == nil && !createdNothing(err):
			// Answered without it (503 "retry shortly"), the caller holds no id: whatever the
			// store made of this conversation (its reply lost, or taken after StoreWait) is
			// removed. With a key, a retry answers what was made.
			s.dropUnanswered(context.WithoutCancel(ctx), conv, dropGaveUp)
		}
		return refused("conversations", s.opts.TTL, s.opts.Deadline, err) // problem.go's table words the refusal
	}
	s.log.DebugContext(ctx, "conversation created", "conversation", conv.ID, "oid", owner.OID)
	return h.conversationCreated(ctx, c, ik, conv)
}

// conversationCreated answers 201 for conv, recording the response under the key if any.
func (h *handlers) conversationCreated(ctx context.Context, c echo.Context, ik *idem, conv store.Conversation) error {
	// Absolute paths with the base path, in the header and the body alike: resolved against the
	// request's URL they are right directly and behind a gateway that mounts us at BasePath.
	asks := h.s.opts.BasePath + "/v1/conversations/" + conv.ID + "/asks"
	body, rec, err := encodeResponse(http.StatusCreated, asks, gen.Conversation{Id: conv.ID, CreatedAt: conv.CreatedAt, AsksUrl: &asks})
	if err != nil {
		return err
	}
	replayed := false
	if ik != nil {
		replayed = ik.prev == conv.ID
		if ok, err := ik.complete(ctx, conv.ID, rec); err != nil {
			// Whose the record is went unanswered: a retry may have taken it over and answered
			// another conversation. The caller's retry is answered by the record: this one, if
			// it holds it (or, once the lock lapses, a takeover finds it).
			h.s.log.Warn("idempotency record not completed", "conversation", conv.ID, "err", err)
			return errStoreUnavailable
		} else if !ok {
			if replayed { // conv is the earlier attempt's, which the record no longer names
				return errPrevGivenUp
			}
			// Taken over while this request stalled: the retry answered its own conversation,
			// which the caller's next retry is answered too, and can no longer answer this one
			// (store.Idempotency: the record no longer names it). Nobody will be answered it:
			// removed, so that it does not hold a place under its owner's cap until its TTL.
			h.s.log.Info("idempotent create taken over by a retry", "conversation", conv.ID)
			h.s.dropUnanswered(context.WithoutCancel(ctx), conv, dropTakenOver)
			return idemTakenOver()
		}
	}
	return writeResponse(c, http.StatusCreated, asks, body, replayed)
}

// CreateAsk registers a ticket, logs accepted, answers 202 and only then starts the run. With
// an Idempotency-Key, a retry of the same request answers the same ticket and starts nothing.
func (h *handlers) CreateAsk(c echo.Context, conversationID gen.ConversationPath, params gen.CreateAskParams) error {
	s := h.s
	ctx := c.Request().Context()
	id, _ := ask.IdentityFrom(ctx)
	owner := ownerOf(c)

	raw, err := requestBody(c.Request())
	if err != nil {
		return badRequest("the request body could not be read")
	}
	var body gen.AskRequest
	if err := json.Unmarshal(raw, &body); err != nil {
		// Exactly one JSON value: `{...}{...}` is not an AskRequest, whatever its first half
		// says (Unmarshal refuses anything but space after the value).
		return badRequest("the request body is not an AskRequest")
	}
	if strings.TrimSpace(body.Question) == "" {
		// The schema's minLength counts characters; white space alone asks nothing, and the
		// run would spend model calls on it.
		return badRequest("the question is blank: it holds only white space")
	}
	if err := s.checkWebhook(body.Webhook); err != nil {
		return err
	}
	key, err := idemKey(params.IdempotencyKey)
	if err != nil {
		return err
	}
	var ik *idem
	if key == "" {
		// A stalled store answers 503 within StoreWait (see the PendingError below).
		var cancel context.CancelFunc
		ctx, cancel = s.createBound(ctx)
		defer cancel()
	} else {
		var cancel context.CancelFunc
		ctx, cancel = detached(ctx)
		defer cancel()
	}
	// Minted under the create's bound, as the conversation's id is (CreateConversation).
	ticket, err := s.newID(ctx, "t", owner)
	if err != nil {
		return err
	}
	if key != "" {
		if ik, err = s.beginIdem(ctx, c, owner, key, fingerprint(owner, key, "createAsk", conversationID, raw), ticket); ik == nil {
			return err
		}
		ticket = ik.cand
		if ik.prev != "" {
			// An earlier attempt with this key stalled past its lock: answer the ticket it
			// created, if it did; its replica runs it (or its lease lapses and it is ended).
			if t, err := s.store.Ticket(ctx, ik.prev); err == nil && sameOwner(t.Owner, owner) {
				if err := h.ticketCreated(ctx, c, ik, t.ID, t.ConversationID, t.CreatedAt); !errors.Is(err, errPrevGivenUp) {
					return err
				}
				ik.prev = "" // as the record has it now: this attempt makes its own
			}
		}
	}
	refuse := func(err error) error {
		if ik != nil && createdNothing(err) {
			ik.abandon(ctx)
		}
		return err
	}
	// Admitted now, keyed or not, as the ask's admission slot is reserved in the same step. No
	// read of the conversation first: CreateTicket checks it exists and is the caller's, in the
	// same step as the store's admission (one round trip to a shared store).
	if err := s.admitCreate(ctx, ik, true); err != nil {
		return err
	}
	now := time.Now()
	accepted, err := encodeEvent(envelope{seq: 1, ticket: ticket, conv: conversationID, ts: now, typ: gen.EventTypeAccepted},
		gen.AcceptedBody{Question: body.Question})
	if err != nil {
		s.release("")
		return err
	}
	hook, err := s.addWebhook(ctx, ticket, body.Webhook, now)
	if err != nil {
		s.release("")
		return refuse(err) // a refusal (the store at capacity) frees the key, as CreateTicket's do
	}
	// The supervisor branch opens with the ticket's creation, not when the run starts: a caller
	// may cancel the moment it has its ticket, and after a cancel the log takes only the
	// branch's close, error{cancelled} and done. Opening it later would put an open after that
	// cancel. It is written with accepted, in the same step.
	opened, err := encodeEvent(envelope{seq: 2, ticket: ticket, conv: conversationID, ts: now, typ: gen.EventTypeBranch}, supervisorOpen)
	if err != nil {
		s.release("")
		return err
	}
	nt := store.NewTicket{ID: ticket, ConversationID: conversationID, Owner: owner, CreatedAt: now.UTC(), Accepted: accepted,
		Question: body.Question, Then: []store.Event{opened}, Limits: s.limits()}
	history, err := s.store.CreateTicket(ctx, nt, nt.Limits)
	if pending := (*store.PendingError)(nil); errors.As(err, &pending) {
		var drop func(context.Context) error
		if ik == nil {
			// Told the ask was not started, the caller holds no ticket: nobody is to hear of
			// one that was made after all. With a key, a retry answers that ticket (ended,
			// error{interrupted}), so its webhook stays to deliver the end; if none was made,
			// the delivery finds no ticket and ends unsent. Dropped by endLate, before it ends
			// the ticket, not here: the store is the one that did not answer, and the 503 is
			// due now.
			drop = func(ctx context.Context) error { return s.dropWebhookCtx(ctx, ticket, body.Webhook) }
		}
		// endLate holds the admission slot until the creation's outcome is known. With a key,
		// the record stays until its lock lapses (the outcome is unknown): a retry with the key
		// then finds the ticket, if it was made, ended.
		s.endLate(context.WithoutCancel(ctx), nt, pending, drop)
		return errCreateLate
	}
	if err != nil {
		s.release("")
		s.dropWebhook(ticket, body.Webhook)
		if ik != nil && !createdNothing(err) {
			// Not a PendingError: the store answered, and created nothing (store.Store's
			// CreateTicket), even when its answer is that it cannot now (ErrUnavailable: a Redis
			// Cluster's TRYAGAIN while the slot migrates, CLUSTERDOWN before an election,
			// READONLY, OOM; each refuses the script unrun). The key is freed, so a retry is
			// processed at once: before, it answered 409 "still in progress", for a request
			// answered 503, until the record's lock lapsed (10 s). After a takeover (prev) the
			// record goes back to the stalled attempt, lapsed (AbandonIdempotent): what it made
			// may yet be found, by the retry that takes it over again.
			ik.abandon(ctx)
		}
		switch {
		case errors.Is(err, store.ErrNotFound) && s.lostID(ctx, conversationID):
			return refuse(errLost)
		case errors.Is(err, store.ErrNotFound):
			return refuse(errNotFound)
		}
		return refuse(refused("tickets", s.opts.TTL, s.opts.Deadline, err)) // problem.go's table words the refusal
	}

	s.reportAdmitted(ctx, Admission{Ticket: ticket, Conversation: conversationID, OID: owner.OID, CreatedAt: now.UTC()})
	nt.Turns = len(history) // for a restore: whether the conversation, if lost, is re-created
	r, runCtx := s.newRun(nt, opened, now, s.reWebhook(hook))
	req := ask.Request{Ticket: ticket, ConversationID: conversationID, Question: body.Question, History: history, Identity: id}
	if ik != nil {
		b, rec, err := ticketResponse(s.opts.BasePath, ticket, conversationID, now.UTC())
		if err != nil {
			r.stop(errCancelled)
			return err
		}
		ok, err := ik.complete(ctx, ticket, rec)
		if err != nil {
			// The store did not answer whether the record is this ticket's: a retry may have
			// taken it over while this request stalled, and made and answered its own ticket.
			// Neither run nor answered now, this ticket waits for the store (completeLate);
			// the caller's retry is answered by the record, whichever ticket it holds.
			s.log.Warn("idempotency record not completed; the ask waits for the store to say whose the key is", "ticket", ticket, "err", err)
			s.completeLate(ik, ticket, rec, r, runCtx, req, body.Webhook)
			return errStoreUnavailable
		}
		if !ok {
			s.endTakenOver(r, body.Webhook)
			return idemTakenOver()
		}
		s.keyedCreated(ik, ticket, rec)
		s.log.DebugContext(ctx, "ask accepted", "ticket", ticket, "conversation", conversationID, "oid", owner.OID, "history_turns", len(history), "idempotency_key", true)
		if err := writeResponse(c, http.StatusAccepted, s.opts.BasePath+"/v1/asks/"+ticket, b, false); err != nil {
			s.log.Debug("ticket response not written", "ticket", ticket, "err", err)
		}
		_ = http.NewResponseController(c.Response().Writer).Flush()
		s.start(r, runCtx, req)
		return nil
	}
	// Debug: the ask's one info line is obs's "ask finished", at its end.
	s.log.DebugContext(ctx, "ask accepted", "ticket", ticket, "conversation", conversationID, "oid", owner.OID, "history_turns", len(history))

	base := s.opts.BasePath + "/v1/asks/" + ticket
	c.Response().Header().Set("Location", base)
	// The 202 in one write: with its length known, net/http sends the head and the body
	// together at the flush and has no terminating chunk to write after the handler.
	// Its fixed text and time take under 160 bytes; base stands in it three times.
	tb, err := appendTicket(make([]byte, 0, 160+3*len(base)+len(ticket)+len(conversationID)),
		ticketBody(s.opts.BasePath, ticket, conversationID, now.UTC()))
	if err == nil {
		c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(tb)))
		err = c.JSONBlob(http.StatusAccepted, tb)
	}
	if err != nil {
		s.log.Debug("ticket response not written", "ticket", ticket, "err", err)
	}
	_ = http.NewResponseController(c.Response().Writer).Flush()

	// Only now, with the 202 written, may the run make its first call.
	s.start(r, runCtx, req)
	return nil
}

// reportAdmitted calls the Admitted hook. A panic in it is logged and the ask goes on: the
// ticket exists and holds its admission slot, and a panic carried up to the handler's recovery
// (a 500) left it running for good, with nobody to run or end it (its conversation answered
// 409 to every later ask, and Shutdown waited for it until its context ended).
func (s *Server) reportAdmitted(ctx context.Context, a Admission) {
	h := s.opts.Hooks.Admitted
	if h == nil {
		return
	}
	defer func() {
		if v := recover(); v != nil {
			// Not the value: it could hold anything the hook held.
			s.log.ErrorContext(ctx, "Admitted hook panicked", "ticket", a.Ticket, "panic_type", fmt.Sprintf("%T", v), "stack", string(debug.Stack()))
		}
	}()
	h(ctx, a)
}

// ticketBody is createAsk's 202 body: absolute paths with the base path.
func ticketBody(basePath, ticket, conv string, created time.Time) gen.Ticket {
	base := basePath + "/v1/asks/" + ticket
	return gen.Ticket{
		Ticket:         ticket,
		ConversationId: conv,
		EventsUrl:      base + "/events",
		StatusUrl:      base,
		CancelUrl:      base + "/cancel",
		CreatedAt:      created,
	}
}

// ticketResponse is createAsk's 202 body, and the record that replays it.
func ticketResponse(basePath, ticket, conv string, created time.Time) ([]byte, []byte, error) {
	return encodeResponse(http.StatusAccepted, basePath+"/v1/asks/"+ticket, ticketBody(basePath, ticket, conv, created))
}

// errPrevGivenUp is what answering, for a takeover, what the earlier attempt made comes to when
// the record no longer names it: that attempt came back first, found the key taken over and
// gave up what it made (an ask ended unrun), or another attempt took the key over from this
// one. Either way this attempt makes its own, as if there were nothing to find: its completion
// of the record then says whose the key is. Until 2026-12-07 the record was completed with the
// ticket given up, and the key answered an ask that never ran, error{cancelled}, for good (an
// independent driver's race across two replicas, one frozen at its create). Never answered.
var errPrevGivenUp = errors.New("the earlier attempt's resource is no longer the key's")

// ticketCreated answers, for a takeover, the ticket an earlier attempt created, and records it;
// errPrevGivenUp when the record no longer names it.
func (h *handlers) ticketCreated(ctx context.Context, c echo.Context, ik *idem, ticket, conv string, created time.Time) error {
	b, rec, err := ticketResponse(h.s.opts.BasePath, ticket, conv, created)
	if err != nil {
		return err
	}
	// As for a create of its own (CreateAsk): answered only once the record is known to name
	// ticket; otherwise the record answers the caller's retry, whatever it names.
	if ok, err := ik.complete(ctx, ticket, rec); err != nil {
		h.s.log.Warn("idempotency record not completed", "ticket", ticket, "err", err)
		return errStoreUnavailable
	} else if !ok {
		return errPrevGivenUp
	}
	h.s.keyedCreated(ik, ticket, rec)
	return writeResponse(c, http.StatusAccepted, h.s.opts.BasePath+"/v1/asks/"+ticket, b, true)
}

// limits are the admission caps every create passes to the store.
func (s *Server) limits() store.Limits {
	return store.Limits{
		MaxInFlightPerOwner:      s.opts.MaxInFlight,
		MaxTickets:               s.opts.MaxTickets,
		MaxConversationsPerOwner: s.opts.MaxConversationsPerID,
		MaxRetainedPerOwner:      s.opts.MaxRetainedPerID,
		MaxTurns:                 s.opts.MaxTurns,
	}
}

// GetAsk answers the ticket's state, waiting up to `Prefer: wait=N` seconds for the end.
func (h *handlers) GetAsk(c echo.Context, ticket gen.TicketPath, params gen.GetAskParams) error {
	s := h.s
	ctx := c.Request().Context()
	t, err := s.ownedTicket(c, ticket)
	if err != nil {
		return err
	}
	if wait, ok := preferWait(params.Prefer); ok {
		c.Response().Header().Set("Preference-Applied", "wait="+strconv.FormatInt(int64(wait/time.Second), 10))
		if t, err = s.waitFinished(ctx, t, wait); err != nil {
			return err
		}
	}
	st := gen.AskStatus{
		Ticket:         t.ID,
		ConversationId: t.ConversationID,
		State:          t.State(),
		LastSeq:        t.LastSeq,
		CreatedAt:      t.CreatedAt,
	}
	if t.Terminal != nil {
		var ev gen.Event
		if err := ev.UnmarshalJSON(t.Terminal.Data); err != nil {
			return err
		}
		st.Terminal = &ev
	}
	if t.Done != nil {
		var done gen.DoneEvent
		if err := json.Unmarshal(t.Done.Data, &done); err != nil {
			return err
		}
		st.Done = &done
	}
	wctx, cancel := s.storeBound(ctx)
	defer cancel()
	if st.Webhook, err = s.webhookStatus(wctx, t.ID); err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, st)
}

// waitFinished waits until t is finished, wait has passed, the caller left or the service
// closes, and returns the ticket as it then is.
func (s *Server) waitFinished(ctx context.Context, t store.Ticket, wait time.Duration) (store.Ticket, error) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for !t.Finished() {
		rctx, cancel := s.storeBound(ctx)
		b, err := s.store.Read(rctx, t.ID, t.LastSeq)
		cancel()
		if err != nil {
			return t, notFoundOr(err)
		}
		if !b.Finished && len(b.Events) == 0 {
			select {
			case <-b.Changed:
			case <-timer.C:
				return t, nil
			case <-ctx.Done():
				return t, nil
			case <-s.closing:
				return t, nil
			}
		}
		tctx, cancel := s.storeBound(ctx)
		t, err = s.store.Ticket(tctx, t.ID)
		cancel()
		if err != nil {
			return t, notFoundOr(err)
		}
	}
	return t, nil
}

// CancelAsk ends the caller's run with error{cancelled}; idempotent, and a no-op after done.
func (h *handlers) CancelAsk(c echo.Context, ticket gen.TicketPath) error {
	s := h.s
	ctx, cancel := s.storeBound(c.Request().Context())
	defer cancel()
	t, err := s.ownedTicket(c, ticket)
	if err != nil {
		return err
	}
	s.mu.Lock()
	r := s.runs[ticket]
	s.mu.Unlock()
	if r != nil {
		// stop seals the end and stops the runner at once, then writes the end, which waits
		// for a store that does not take writes (run.write: until it does, or the lease
		// lapses). The request waits for that at most StoreWait, as for any store call; the
		// write goes on without it, and a retried cancel finds the run sealed.
		stopped := make(chan bool, 1)
		if s.addRunner() {
			go func() {
				defer s.runners.Done()
				stopped <- r.stop(errCancelled)
			}()
		} else {
			stopped <- r.stop(errCancelled) // past Shutdown's wait, which stopped it already
		}
		select {
		case ok := <-stopped:
			if ok {
				s.log.DebugContext(ctx, "ask cancelled", "ticket", ticket)
			}
		case <-ctx.Done():
			return ctx.Err() // 503 past StoreWait; a caller that left is not an error
		}
	} else if sh, ok := s.store.(store.Shared); ok {
		// Another replica runs it (or ran it): end the log here, at once; the runner sees the
		// end in its log and stops making model calls.
		switch err := s.endRemote(ctx, sh, ticket, outcomeFor(errCancelled), false); {
		case err == nil:
			s.log.DebugContext(ctx, "ask cancelled", "ticket", ticket, "runner", "another replica")
		case errors.Is(err, store.ErrFinished), errors.Is(err, store.ErrNotFound):
		default:
			return err
		}
	}
	// Every path above leaves the log ending: this cancel's end, another's (on this replica or
	// another), or the run's own outcome, sealed a moment before. The end is being written:
	// answer it, not "running", whichever cancel sealed it. A store that does not take it
	// within StoreWait leaves the state as the store then has it.
	if t, err = s.waitFinished(ctx, t, maxWait); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, gen.CancelAccepted{Ticket: ticket, State: t.State()})
}

// GetOpenAPIYAML serves the contract byte for byte, its servers entry naming this mount
// (openapi.Mounted): at the default mount, the document as written.
func (h *handlers) GetOpenAPIYAML(c echo.Context) error {
	return sized(c, "application/yaml", h.s.contractYAML)
}

// GetOpenAPIJSON serves the contract as JSON: the same document as the YAML, converted.
func (h *handlers) GetOpenAPIJSON(c echo.Context) error {
	return sized(c, echo.MIMEApplicationJSON, h.s.contractJSON)
}

// sized writes a 200 of b with its Content-Length, which net/http sets by itself only for
// content shorter than its buffer (a few KiB): the contract went chunked on a GET while its
// HEAD said its length.
func sized(c echo.Context, contentType string, b []byte) error {
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	return c.Blob(http.StatusOK, contentType, b)
}

// ownedTicket returns the ticket if the caller owns it, and errNotFound both when it does not
// exist and when it belongs to someone else, doing the same work either way.
func (s *Server) ownedTicket(c echo.Context, id string) (store.Ticket, error) {
	ctx, cancel := s.storeBound(c.Request().Context())
	defer cancel()
	t, err := s.store.Ticket(ctx, id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.Ticket{}, err
	}
	owner := ownerOf(c)
	if (err != nil || !sameOwner(t.Owner, owner)) && s.lostID(ctx, id) {
		// A shared store restarted without persistence. If the ticket was running, its
		// replica re-creates it, ended error{interrupted}, once it notices (run.restoreVia: at
		// its next write or lease check, or when its notifications re-subscribe): a status
		// or a stream's reconnection in between waits for that, as an open stream does
		// (follow), rather than answer that it was lost for good. Someone else's ticket,
		// restored, is waited for and answered as one the restart lost for good, as any
		// other id of that generation is: answered at once with the plain 404, it showed
		// that the id was a ticket that survived.
		if t, err = s.awaitRestored(ctx, id, owner); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return store.Ticket{}, errLost
			}
			return store.Ticket{}, err
		}
	}
	if owned := sameOwner(t.Owner, owner); !owned || err != nil || t.Shredded {
		// A shredded ticket (its seal key dropped) reads as gone: its log no longer opens,
		// and a stream of it was a 200 with no event that never reached done.
		return store.Ticket{}, errNotFound
	}
	return t, nil
}

// awaitRestored reads again (rereadTicket) a ticket of an earlier generation of a shared store,
// which its runner may be restoring; it answers ErrNotFound when the ticket stays gone or is
// not owner's, and at once for a store in this process.
func (s *Server) awaitRestored(ctx context.Context, id string, owner store.Owner) (store.Ticket, error) {
	tk, err, ok := s.rereadTicket(ctx, id, func(t store.Ticket, err error) bool {
		return err != nil && !errors.Is(err, store.ErrNotFound) || err == nil && sameOwner(t.Owner, owner)
	})
	if !ok {
		return store.Ticket{}, store.ErrNotFound
	}
	return tk, err
}

// rereadTicket reads ticket id again from a shared store, storeGoneRetries times storeRetry
// apart, each read within the store's wait, until settled says a read is what the caller waits
// for, and answers that read. ok is false when the store is in this process (nothing in it
// changes behind the service's back), ctx ended, or no read settled.
func (s *Server) rereadTicket(ctx context.Context, id string, settled func(store.Ticket, error) bool) (_ store.Ticket, _ error, ok bool) {
	if !isShared(s.store) {
		return store.Ticket{}, nil, false
	}
	for range storeGoneRetries {
		t := time.NewTimer(storeRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return store.Ticket{}, nil, false
		case <-t.C:
		}
		rctx, cancel := s.storeBound(ctx)
		tk, err := s.store.Ticket(rctx, id)
		cancel()
		if settled(tk, err) {
			return tk, err, true
		}
	}
	return store.Ticket{}, nil, false
}

// newID mints a ticket's or conversation's id for owner: kind, "_", then, with a generational
// store, its generation and "-", then 128 random bits, then, with a homed store, "-" and the
// owner's home (store.Homed), where the store keeps what the owner creates.
// It fails only when the store has a generation that this replica has never read and cannot
// read now: nothing is made, and the create is answered as the store's failure (503).
func (s *Server) newID(ctx context.Context, kind string, owner store.Owner) (string, error) {
	gen, err := s.generation(ctx)
	if err != nil {
		return "", err
	}
	id := kind + "_" + rand.Text()
	if gen != "" {
		id = kind + "_" + gen + "-" + rand.Text()
	}
	if h, ok := s.store.(store.Homed); ok {
		id += "-" + h.Home(owner)
	}
	return id, nil
}

// randomLen is the length of an id's 128 random bits: rand.Text's 26 base32 characters.
const randomLen = 26

// generationTTL is how long newID reuses the store's generation before asking again. An id
// minted with a generation a restart just replaced is still told apart: its generation is not
// the current one either way.
const generationTTL = time.Second

// generation is the store's generation for minting ids, asked at most once a generationTTL
// (it costs a round trip to a shared store); "" for a store that has none. A store that does
// not answer (stalled, restarting) is taken to be in the generation last read, however long
// ago: an id minted without one was never told lost, so a ticket created through a stall and
// then lost with a restart of its store read a plain 404 to its owner, where its replica was
// about to restore it ended error{interrupted} (an independent chaos driver's finding). An id
// of a generation the store has since replaced reads the same as one minted before the
// restart: found once written or restored, waited for (awaitRestored) while not.
func (s *Server) generation(ctx context.Context) (string, error) {
	g, ok := s.store.(store.Generational)
	if !ok {
		return "", nil
	}
	c := s.gen.Load()
	if c != nil && time.Since(c.at) < generationTTL {
		return c.gen, nil
	}
	gen, err := g.Generation(ctx)
	if err != nil {
		if c != nil {
			return c.gen, nil
		}
		return "", err
	}
	s.gen.Store(&cachedGeneration{gen: gen, at: time.Now()})
	return gen, nil
}

type cachedGeneration struct {
	gen string
	at  time.Time
}

// lostID reports whether id was minted in an earlier generation of the store than the
// current one: what it names was lost with everything else when the store restarted without
// persistence. That says nothing about whose it was, so it is answered alike to everyone.
func (s *Server) lostID(ctx context.Context, id string) bool {
	g, ok := s.store.(store.Generational)
	if !ok {
		return false
	}
	_, rest, ok := strings.Cut(id, "_")
	gen, random, dash := strings.Cut(rest, "-")
	// A generation is followed by the 128 random bits (26 characters); what follows the
	// random bits alone is the store's home, not a generation.
	if !ok || !dash || gen == "" || len(random) < randomLen {
		return false
	}
	cur, err := g.Generation(ctx)
	if err == nil {
		s.gen.Store(&cachedGeneration{gen: cur, at: time.Now()})
	}
	return err == nil && cur != gen
}

// notFoundOr is errNotFound for a ticket that is gone, and err itself when the store could not
// say (unavailable: 503, or the caller left).
func notFoundOr(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return errNotFound
	}
	return err
}

// sameOwner compares in constant time for equal-length keys, so a ticket's existence does not
// show in timing.
func sameOwner(a, b store.Owner) bool {
	return subtle.ConstantTimeCompare([]byte(a.Key()), []byte(b.Key())) == 1 && b.OID != ""
}

// ownerOf is the authenticated caller as an owner.
func ownerOf(c echo.Context) store.Owner {
	id, _ := ask.IdentityFrom(c.Request().Context())
	return store.Owner{Tenant: id.Tenant, OID: id.OID}
}
