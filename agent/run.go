package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	ask "github.com/das-ask/ask"
	"github.com/das-ask/ask/agent/model"
	"github.com/das-ask/ask/agent/source"
	"github.com/das-ask/ask/gen"
)

// Run runs one question to an outcome (see the package doc for the rule). It connects to every
// source as req.Identity, checks ctx before every model call and every tool call, reports each
// tool call as a milestone when it starts and a step when it ends and each model call through
// emit.ModelCall as it is sent (its tokens through emit.Tokens when it returns), and returns
// exactly one outcome. A tool call in flight when ctx ends is allowed to finish.
func (a *Agent) Run(ctx context.Context, req ask.Request, emit ask.Emitter) ask.Outcome {
	start := time.Now()
	log := a.log.With("ticket", req.Ticket)
	out := a.run(ctx, req, emit, log)
	log.Debug("run ended", "outcome", outcomeName(out), "elapsed_ms", time.Since(start).Milliseconds())
	return out
}

func (a *Agent) run(ctx context.Context, req ask.Request, emit ask.Emitter, log *slog.Logger) ask.Outcome {
	sessions, err := a.connect(ctx, req.Identity, log, newLedger(req).toolName)
	if err != nil {
		return failure(ctx, gen.ErrorKindTransport, err)
	}
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	// Phase 1's loop, and phase 2's reconciliation, offer the model every source's tools at once.
	if n := toolCount(sessions); n > source.MaxTools {
		return failure(ctx, gen.ErrorKindTransport, fmt.Errorf("sources: %d tools in all, more than the %d one model request may offer", n, source.MaxTools))
	}
	if a.phase == 2 {
		return a.fanOut(ctx, req, sessions, emit)
	}
	led := newLedger(req)
	lp := a.loop(ctx, loopSpec{system: a.system, msgs: conversation(req.History, req.Question), tools: newToolset(sessions), led: led, emit: emit, turns: a.maxTurns})
	if lp.end != nil {
		return *lp.end
	}
	return led.outcome(lp.text)
}

// loopSpec is one model loop: the supervisor's in phase 1, a branch's or the reconciliation in
// phase 2.
type loopSpec struct {
	system string
	msgs   []model.Message
	tools  toolset
	led    *ledger
	emit   ask.Emitter
	turns  int // model calls allowed
}

// loopEnd is how a loop ended: the model's final prose and the messages that led to it, or the
// outcome that ended the run (a refusal, an error).
type loopEnd struct {
	text string
	msgs []model.Message
	end  *ask.Outcome
}

// loop lets the model call spec's tools until it answers in prose, a call is refused or fails
// in transport, or the turns run out. ctx is checked before every model call and tool call.
func (a *Agent) loop(ctx context.Context, spec loopSpec) loopEnd {
	msgs := spec.msgs
	ended := func(o ask.Outcome) loopEnd { return loopEnd{msgs: msgs, end: &o} }
	for range spec.turns {
		if ctx.Err() != nil {
			return ended(failure(ctx, gen.ErrorKindCancelled, ctx.Err()))
		}
		// The call counts as it is sent: one the run's end cuts off was made (the provider may
		// have spent on it, and ask_model_calls_total counts it), though its tokens are unknown.
		spec.emit.ModelCall(ask.Usage{})
		resp, err := a.model.Complete(ctx, model.Request{System: spec.system, Messages: msgs, Tools: spec.tools.specs})
		spec.emit.Tokens(ask.Usage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens})
		if err != nil {
			return ended(failure(ctx, gen.ErrorKindModel, providerError(err)))
		}
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			return loopEnd{text: resp.Text, msgs: msgs}
		}
		results := model.Message{Role: model.RoleUser}
		for _, tc := range resp.ToolCalls {
			if ctx.Err() != nil {
				return ended(failure(ctx, gen.ErrorKindCancelled, ctx.Err()))
			}
			tr, end := a.call(ctx, spec.tools, spec.led, tc, spec.emit)
			if end != nil {
				return ended(*end)
			}
			results.ToolResults = append(results.ToolResults, tr)
		}
		msgs = append(msgs, results)
	}
	return ended(ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindModel, Message: fmt.Sprintf("too many turns: the model did not finish in %d calls", spec.turns)}})
}

// call makes one tool call the model asked for and reports it. It returns the result for the
// model, or the outcome that ends the run (a refusal or a transport failure).
func (a *Agent) call(ctx context.Context, tools toolset, led *ledger, tc model.ToolCall, emit ask.Emitter) (model.ToolResult, *ask.Outcome) {
	t, ok := tools.lookup(tc.Name)
	if !ok {
		return model.ToolResult{CallID: tc.ID, IsError: true, Content: fmt.Sprintf("there is no tool named %q", tc.Name)}, nil
	}
	var args map[string]any
	if err := json.Unmarshal(tc.Args, &args); err != nil {
		return model.ToolResult{CallID: tc.ID, IsError: true, Content: "the arguments must be a JSON object"}, nil
	}
	// The milestone says what starts now; the step, after the call, says how it went.
	emit.Milestone(led.milestone(t.Tool, args))
	name := led.toolName(t.Name) // as the step, a refusal and the trace show it
	// The call is detached from the run's cancellation: once started it completes, bounded by
	// the tool timeout, and the loop notices the cancellation right after.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.toolTime)
	callCtx, span := a.tracer.Start(callCtx, "ask.tool_call", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("ask.source", t.Source), attribute.String("ask.tool", name)))
	r := t.session.Call(callCtx, t.Name, args)
	endToolSpan(span, r)
	cancel()
	led.tried(t.Tool, args)
	step := gen.StepBody{CallId: r.CallID, Tool: name, Source: t.Source, Args: led.redact(args), Ms: r.Ms, Refused: r.Outcome == source.Refused}
	if r.Outcome == source.ToolError {
		msg := led.shown(r.Text)
		step.Error = &msg
	}
	if r.Outcome == source.Transport {
		msg := r.Err.Error()
		step.Error = &msg
	}
	emit.Step(step)
	switch r.Outcome {
	case source.Transport:
		out := failure(ctx, gen.ErrorKindTransport, r.Err)
		return model.ToolResult{}, &out
	case source.Refused:
		return model.ToolResult{}, &ask.Outcome{Refusal: &gen.RefusalBody{Tool: name, Source: t.Source, CallId: r.CallID, Reason: led.shown(r.RefusalReason)}}
	case source.ToolError:
		return model.ToolResult{CallID: tc.ID, IsError: true, Content: r.Text}, nil
	}
	led.record(t.Tool, r)
	return model.ToolResult{CallID: tc.ID, Content: r.Text}, nil
}

// connect opens one session per source, authenticated with the caller's token.
//
// The handshake is detached from the run's cancellation and bounded by the tool timeout
// instead, like a tool call in flight: a cancel landing mid-handshake made the go-sdk client
// give up before the response naming the session arrived, so it never sent the DELETE, and the
// source kept the session (its goroutines and memory) until its idle timeout — one orphan per
// unlucky cancel (found by hardening TestLoadAndSoak under goleak). The run notices the
// cancellation right after.
//
// Once the run has ended, though, a handshake still pending only lingers: it may go on for
// Options.HandshakeLinger (never past the tool timeout) to open its session and have it closed
// properly, if one of its source's Options.MaxLingeringHandshakes slots (shared by every run of
// the Agent) is free; otherwise, or once its linger is over, it is cancelled. Unbounded, an
// identity that asked and cancelled in a loop against a source that hangs held a goroutine and
// a connection per cancelled ask for the whole tool timeout, beyond its in-flight cap (300
// such asks: about 1,400 goroutines and 270 connections for 60 s). The price: a source that
// answers a handshake that late, or while its slots are full, may keep that session, unclosed,
// until its own idle timeout (the orphan above, now only from a source too slow or too busy).
//
// The handshakes run at once, so a run with several sources waits for the slowest, not their
// sum. Each runs to its end (not cancelled when another fails, for the reason above), and only
// then does connect answer: all the sessions, or the first failure in DAS_SOURCES order with
// every session that did open closed. Once the run has ended (cancel, deadline), a session that
// has opened, or opens later, is closed at once rather than when the slowest handshake ends.
//
// A source that cannot be reached is a warning in the log, naming it: the run's error event
// tells the user, and this line tells the operator which source it was — also when it did not
// answer within its linger (at most MaxLingeringHandshakes lines a linger per source); not when
// its handshake was cancelled at once for want of a slot. The sessions log their tool calls with
// log (the run's ticket).
func (a *Agent) connect(ctx context.Context, id ask.Identity, log *slog.Logger, toolShown func(string) string) ([]*source.Session, error) {
	opts := source.Options{HTTPClient: a.hc, Logger: log, TokenExpires: id.Expires, ToolShown: toolShown}
	sessions := make([]*source.Session, len(a.sources))
	errs := make([]error, len(a.sources))
	// runEnded[i]: errs[i] is the run's own end (its cancel or deadline), not source i's failure.
	runEnded := make([]bool, len(a.sources))
	var (
		wg sync.WaitGroup
		mu sync.Mutex // sessions, errs and ended
		// ended: the run ended while a handshake was still waiting. The sessions that opened
		// are closed then, and any that opens later at once, rather than held until the
		// slowest handshake ends (the tool timeout, for a source that hangs): a cancelled ask
		// kept a session at every other source for that long, and an identity cancelling a few
		// dozen held its whole session cap at them (the demo source's 32, then 429 for it).
		ended bool
	)
	for i, cfg := range a.sources {
		wg.Go(func() {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.toolTime)
			defer cancel()
			done := a.bound(ctx, i, cancel)
			s, err := source.Connect(hctx, cfg, id.Token, opts)
			cut := done()
			mu.Lock()
			switch {
			case err == nil && ended:
				defer s.Close() // once unlocked
				s, err = nil, ctx.Err()
				runEnded[i] = true
			case err != nil && cut == cutCapFull:
				runEnded[i] = true
			case err != nil && cut == cutLingered:
				err = &source.TransportError{Source: cfg.Name, Op: "connect", Err: err,
					Reason: fmt.Errorf("no answer within %v of the run's end (the handshake's linger)", a.linger)}
			}
			sessions[i], errs[i] = s, err
			mu.Unlock()
		})
	}
	closed := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(closed)
		mu.Lock()
		ended = true
		var open []*source.Session
		for i, s := range sessions {
			if s != nil {
				open = append(open, s)
				sessions[i], errs[i] = nil, ctx.Err()
				runEnded[i] = true
			}
		}
		mu.Unlock()
		for _, s := range open {
			s.Close()
		}
	})
	wg.Wait()
	if !stop() { // the run ended meanwhile: its closes are under way
		<-closed
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		// Every source that failed on its own is named, whether or not the run ended
		// meanwhile: a source whose handshake hangs fails at the tool timeout or at the end of
		// its linger (hctx does not end with the run), and a deadline shorter than that ended
		// the run first, so that its timeout was logged nowhere and the operator saw only asks
		// ending in a timeout.
		for j, err := range errs[i:] {
			if err != nil && !runEnded[i+j] {
				log.WarnContext(ctx, "source unreachable", "source", a.sources[i+j].Name, "error", err.Error())
			}
		}
		for _, s := range sessions {
			if s != nil {
				s.Close()
			}
		}
		return nil, err
	}
	return sessions, nil
}

func toolCount(sessions []*source.Session) int {
	n := 0
	for _, s := range sessions {
		n += len(s.Tools())
	}
	return n
}

// failure is the error outcome for err. Once ctx has ended its cause decides the kind
// (cancelled or timeout), whatever failed; the service replaces that outcome anyway.
func failure(ctx context.Context, kind gen.ErrorKind, err error) ask.Outcome {
	switch {
	case errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindTimeout, Message: "the run's deadline passed"}}
	case ctx.Err() != nil:
		return ask.Outcome{Error: &gen.ErrorBody{Kind: gen.ErrorKindCancelled, Message: "the run was cancelled"}}
	}
	return ask.Outcome{Error: &gen.ErrorBody{Kind: kind, Message: err.Error()}}
}

// providerError is err as the run may show it: the *model.Error in its chain (whose message
// is made of model.Vocabulary only), or a generic one. A model that is no adapter of ours, or a
// wrapper, may return any error text; none of it reaches the event.
func providerError(err error) error {
	var me *model.Error
	if errors.As(err, &me) {
		return me
	}
	return &model.Error{Kind: model.KindTransport, Message: model.GenericMessage, Err: err}
}

func outcomeName(o ask.Outcome) string {
	typ, body := o.Event()
	if e, ok := body.(*gen.ErrorBody); ok {
		return "error:" + string(e.Kind)
	}
	return string(typ)
}

// endToolSpan ends a tool call's span with what the call was (never its arguments or result:
// they may echo the question): its id, which the source's audit line also records, and how it
// ended.
func endToolSpan(span trace.Span, r source.Result) {
	span.SetAttributes(attribute.String("ask.call_id", r.CallID), attribute.String("ask.tool_outcome", r.Outcome.String()))
	if r.Outcome == source.Transport {
		span.SetStatus(codes.Error, "transport")
	}
	span.End()
}
