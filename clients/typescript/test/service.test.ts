// The TypeScript client against the dev stack: ask, stream to the outcome, a forced reconnect
// with no gap, cancel, and each outcome kind handled by its type.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { ApiError, AskClient, describeOutcome, milestoneWords, type Event } from "../src/index.js";
import { KillableProxy } from "./proxy.js";
import { stack, token } from "./stack.js";

const SEV1 = "How many sev1 incidents did we have in 2026-Q2?";
const SLOW_SEV1 = "Take your time: how many sev1 incidents did we have in 2026-Q2?";

async function clientFor(oid: string, baseUrl?: string): Promise<AskClient> {
  const { ask } = await stack();
  return new AskClient({ baseUrl: baseUrl ?? ask, token: await token(oid), reconnect: { initialMs: 50, maxMs: 500 } });
}

/** assertWellFormed checks the stream's promises: seq from 1 without gaps, one terminal, done last. */
function assertWellFormed(events: Event[]): void {
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
    "seq runs from 1 with no gap and no duplicate",
  );
  assert.equal(events[0]?.type, "accepted");
  assert.equal(events.at(-1)?.type, "done");
  const terminals = events.filter((e) => ["answer", "abstention", "refusal", "error"].includes(e.type));
  assert.equal(terminals.length, 1, "exactly one terminal event");
  assert.equal(events.filter((e) => e.type === "done").length, 1, "exactly one done");
}

describe("the TypeScript client against the dev stack", () => {
  let alice: AskClient;
  before(async () => {
    alice = await clientFor("alice");
  });

  test("an ask with a webhook: the run's end is delivered there, and status says so; a URL not allowed is a 400", async () => {
    const { ask } = await stack();
    const conv = await alice.createConversation();
    const ticket = await alice.ask(conv.id, SEV1, { webhook: `${ask}/dev/webhooks/inbox` });
    const { outcome } = await alice.follow(ticket.ticket);
    assert.equal(outcome.type, "answer");
    let status = await alice.status(ticket.ticket);
    for (const deadline = Date.now() + 20_000; status.webhook?.state === "pending" && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = await alice.status(ticket.ticket);
    }
    assert.equal(status.webhook?.state, "delivered", `the webhook: ${JSON.stringify(status.webhook)}`);
    await assert.rejects(alice.ask(conv.id, SEV1, { webhook: "https://elsewhere.invalid/hook" }),
      (err) => err instanceof ApiError && err.status === 400);
  });

  test("ask, then stream to the answer", async () => {
    const conv = await alice.createConversation();
    const ticket = await alice.ask(conv.id, SEV1);
    assert.equal(ticket.conversation_id, conv.id);
    const events: Event[] = [];
    const { outcome, done } = await alice.follow(ticket.ticket, { onEvent: (e) => events.push(e) });
    assertWellFormed(events);
    assert.equal(outcome.type, "answer");
    if (outcome.type !== "answer") return;
    assert.ok(outcome.headline, "one figure: a headline");
    assert.equal(typeof outcome.headline.value, "number");
    assert.ok(outcome.caveats.length > 0, "the catalog's caveats about incidents");
    assert.ok(outcome.provenance.some((p) => p.term === "incident"));
    assert.equal(outcome.path.speed, "full");
    assert.equal(outcome.sql.length, 1);
    assert.equal(done.outcome, "answer");
    assert.equal(done.steps, events.filter((e) => e.type === "step").length);
    const words = events.filter((e) => e.type === "milestone").map((m) => milestoneWords(m));
    assert.ok(words.includes('Checking what "incident" means in the catalog'), `milestones: ${words.join("; ")}`);
    // The same outcome through the call for clients without SSE.
    const status = await alice.status(ticket.ticket);
    assert.equal(status.state, "answer");
    assert.equal(status.terminal?.type, "answer");
  });

  describe("a dropped connection", () => {
    let proxy: KillableProxy;
    let viaProxy: AskClient;
    before(async () => {
      const { ask } = await stack();
      const started = await KillableProxy.start(new URL(ask));
      proxy = started.proxy;
      viaProxy = await clientFor("alice", started.url);
    });
    after(() => proxy.close());

    test("is resumed with Last-Event-ID, with no gap and no duplicate", async () => {
      const conv = await viaProxy.createConversation();
      const ticket = await viaProxy.ask(conv.id, SLOW_SEV1);
      // Cut the stream with the first events after the branch opened: the client has had the
      // model's silent seconds to take in seq 1 and 2, and the rest of the run arrives on the
      // resumed connection only.
      let branchSeen = false;
      proxy.cutWhen = (chunk) => {
        if (branchSeen) return true;
        branchSeen = chunk.includes("event: branch");
        return false;
      };
      const sent: string[] = [];
      const events: Event[] = [];
      const { outcome } = await viaProxy.follow(ticket.ticket, {
        onConnect: (_, lastEventId) => sent.push(lastEventId),
        onEvent: (e) => events.push(e),
      });
      assert.equal(proxy.cuts, 1, "the proxy cut the first connection");
      assert.ok(sent.length >= 2, `reconnected (Last-Event-ID sent: ${JSON.stringify(sent)})`);
      assert.equal(sent[0], "", "the first connection starts at the beginning");
      assert.equal(sent[1], "2", "the reconnect resumes after the branch (seq 2)");
      assertWellFormed(events);
      assert.equal(outcome.type, "answer");
    });
  });

  test("cancel ends the run in error{cancelled}, then done", async () => {
    const conv = await alice.createConversation();
    const ticket = await alice.ask(conv.id, SLOW_SEV1);
    const events: Event[] = [];
    let cancelled = false;
    const { outcome, done } = await alice.follow(ticket.ticket, {
      onEvent: (e) => {
        events.push(e);
        if (e.type === "branch" && !cancelled) {
          cancelled = true;
          void alice.cancel(ticket.ticket);
        }
      },
    });
    assertWellFormed(events);
    assert.equal(outcome.type, "error");
    if (outcome.type === "error") assert.equal(outcome.kind, "cancelled");
    assert.equal(done.outcome, "error");
    assert.ok(!events.some((e) => e.type === "answer"), "no answer after cancel");
    assert.equal(describeOutcome(outcome), "Cancelled.");
    // Idempotent, and still 202 after done.
    const again = await alice.cancel(ticket.ticket);
    assert.equal(again.state, "error");
  });

  test("each outcome kind is told apart by its type", async () => {
    const bob = await clientFor("bob");
    const cases = [
      { who: alice, question: SEV1, want: "answer", says: /^\d+ \(sev1_incidents\)/ },
      { who: alice, question: "What does change failure rate mean?", want: "answer", says: /Answered from the catalog alone\./ },
      { who: bob, question: "What was the on-call pay per team in 2026-Q3?", want: "refusal", says: /^Refused: the demo source refused run_query/ },
      { who: alice, question: "What is our customer churn rate?", want: "abstention", says: /^No answer: the catalog has nothing/ },
    ] as const;
    for (const c of cases) {
      const conv = await c.who.createConversation();
      const ticket = await c.who.ask(conv.id, c.question);
      const { outcome, done } = await c.who.follow(ticket.ticket);
      assert.equal(outcome.type as string, c.want, c.question);
      assert.equal(done.outcome, c.want);
      assert.match(describeOutcome(outcome), c.says, c.question);
      switch (outcome.type) {
        case "refusal":
          assert.equal(outcome.tool, "run_query");
          assert.ok(outcome.reason.length > 0);
          break;
        case "abstention":
          assert.ok(outcome.terms.length > 0, "the terms looked for");
          assert.ok(!outcome.terms.some((t) => t.includes("?")), "never the question text");
          break;
        case "answer":
          if (outcome.path.speed === "fast") assert.deepEqual(outcome.sql, []);
          break;
        case "error":
          assert.fail(`unexpected error: ${outcome.kind} ${outcome.message}`);
      }
    }
  });

  test("a follow-up in the same conversation resolves 'that team'", async () => {
    const conv = await alice.createConversation();
    const first = await alice.follow((await alice.ask(conv.id, "Which team had the most incidents in 2026-Q3?")).ticket);
    assert.equal(first.outcome.type, "answer");
    const second = await alice.follow((await alice.ask(conv.id, "How many deployments did that team ship in 2026-Q3?")).ticket);
    assert.equal(second.outcome.type, "answer");
    if (first.outcome.type === "answer" && second.outcome.type === "answer") {
      const team = first.outcome.text.match(/(\w[\w-]*) had the most incidents/)?.[1];
      assert.ok(team, first.outcome.text);
      assert.ok(second.outcome.text.includes(team), `${second.outcome.text} names ${team}`);
    }
  });

  test("a refused call is a typed ApiError with the problem", async () => {
    const stranger = await clientFor("bob");
    const conv = await alice.createConversation();
    await assert.rejects(stranger.ask(conv.id, SEV1), (err: unknown) => {
      assert.ok(err instanceof ApiError);
      assert.equal(err.status, 404, "another identity's conversation does not exist for bob");
      assert.equal(err.problem?.status, 404);
      return true;
    });
  });
});
