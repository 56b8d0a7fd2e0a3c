package conformance

import (
	"context"
	"log/slog"
)

// Run executes the suite against cfg.BaseURL and returns one Result per check, in order.
//
// It returns an error only when cfg is unusable; everything the target does wrong is a FAIL in
// the report, and everything the suite cannot do against this target is a SKIP with the reason.
// Run makes real asks (a dozen or so; each a model run on the target) and takes as long as
// they take, bounded per run by cfg.RunTimeout. It stops early, with the checks not yet made
// omitted, when ctx is done.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Report{}, err
	}
	s, err := newSession(cfg)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	for _, c := range checks() {
		if cfg.Only != nil && !cfg.Only.MatchString(c.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		v := verdict{Skip, "behaviour checks were not requested (--behaviour)"}
		if !c.behaviour || cfg.Behaviour {
			v = c.run(ctx, s)
		}
		res := Result{Name: c.name, Status: v.status, Detail: s.redact(v.detail)}
		cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "conformance: check", slog.String("check", res.Name), slog.String("status", string(res.Status)))
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// Names lists every check, in the order Run makes them.
func Names() []string {
	var out []string
	for _, c := range checks() {
		out = append(out, c.name)
	}
	return out
}

// checks is the suite, in order. Checks that examine every run come after the checks that
// make runs, so they see them all.
func checks() []check {
	return []check{
		{name: "schema.published", run: checkSchemaPublished},
		{name: "schema.json-equals-yaml", run: checkJSONEqualsYAML},
		{name: "auth.no-bearer", run: checkNoBearer},
		{name: "auth.malformed-bearer", run: checkMalformedBearer},
		{name: "auth.forged-bearer", run: checkForgedBearer},
		{name: "auth.expired-bearer", run: checkExpiredBearer},
		{name: "auth.wrong-audience", run: checkWrongAudience},
		{name: "ask.bad-input-400", run: checkBadInput},
		{name: "input.bad-ids-400", run: checkBadIDs},
		{name: "events.first-accepted", run: checkFirstAccepted},
		{name: "events.stream-headers", run: checkStreamHeaders},
		{name: "replay.header-after-done", run: checkReplayHeader},
		{name: "replay.query-after-done", run: checkReplayQuery},
		{name: "replay.during-run", run: checkReplayDuringRun},
		{name: "replay.bad-cursor", run: checkBadCursor},
		{name: "replay.header-wins", run: checkHeaderWins},
		{name: "stream.keepalive", run: checkKeepAlive},
		{name: "stream.disconnect-keeps-run", run: checkDisconnect},
		{name: "status.prefer-wait", run: checkPreferWait},
		{name: "conversation.busy-409", run: checkBusy},
		{name: "create.idempotency-key", run: checkIdempotencyKey},
		{name: "ownership.events", run: checkOwnershipEvents},
		{name: "ownership.status", run: checkOwnershipStatus},
		{name: "ownership.cancel", run: checkOwnershipCancel},
		{name: "ownership.conversation", run: checkOwnershipConversation},
		{name: "ownership.tenant", run: checkOwnershipTenant},
		{name: "head.like-get", run: checkHeadLikeGet},
		{name: "cancel.stops-run", run: checkCancelStops},
		{name: "cancel.idempotent", run: checkCancelIdempotent},
		{name: "cancel.after-done", run: checkCancelAfterDone},
		{name: "webhook.disallowed-400", run: checkWebhookDisallowed},
		{name: "webhook.delivered-signed", run: checkWebhookDelivered},
		{name: "webhook.retried-same-id", run: checkWebhookRetried},
		{name: "webhook.redirect-not-followed", run: checkWebhookNoRedirect},
		{name: "ticket.location", run: checkLocation},
		{name: "create.idempotency-scope", run: checkIdempotencyScope},
		{name: "limits.body-413", run: checkBodyTooLarge},
		{name: "limits.inflight-429", run: checkInFlight},
		{name: "run.deadline-timeout", run: checkDeadline},
		{name: "ticket.ttl-expiry", run: checkTTL},
		{name: "limits.capacity-503", run: checkCapacity},
		{name: "behaviour.answer-headline", behaviour: true, run: checkAnswerHeadline},
		{name: "behaviour.refusal", behaviour: true, run: checkRefusal},
		{name: "behaviour.abstention", behaviour: true, run: checkAbstention},
		{name: "behaviour.catalog-fast", behaviour: true, run: checkCatalogFast},
		{name: "behaviour.follow-up", behaviour: true, run: checkFollowUp},
		{name: "behaviour.divergence", behaviour: true, run: checkDivergence},
		{name: "events.seq-gap-free", run: checkSeq},
		{name: "events.sse-framing", run: checkFraming},
		{name: "events.ts-ordered", run: checkTSOrdered},
		{name: "run.branch-brackets-steps", run: checkBranches},
		{name: "run.branch-per-source", run: checkBranchPerSource},
		{name: "run.events-name-open-branches", run: checkEventsNameBranches},
		{name: "cancel.closes-every-branch", run: checkCancelClosesBranches},
		{name: "run.one-terminal-then-done", run: checkTerminalDone},
		{name: "run.done-steps", run: checkDoneSteps},
		{name: "run.milestone-before-step", run: checkMilestoneBeforeStep},
		{name: "overflow.only-steps-evicted", run: checkOverflow},
		{name: "ticket.before-tool-call", run: checkTicketBeforeToolCall},
		{name: "audit.step-ms", run: checkStepMs},
		{name: "audit.caller-identity", run: checkCallerIdentity},
		{name: "audit.every-call-streamed", run: checkCallsStreamed},
		{name: "status.agrees-with-stream", run: checkStatus},
		{name: "privacy.question-only-in-accepted", run: checkPrivacy},
		{name: "privacy.no-bearer", run: checkBearerNotEchoed},
		{name: "headers.every-response", run: checkEveryResponseHeaders},
		{name: "schema.problem-status", run: checkProblemStatus},
		{name: "schema.bodies", run: checkBodies},
		{name: "schema.events", run: checkEvents},
	}
}
