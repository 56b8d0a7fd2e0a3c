// The SSE parser by the WHATWG rules, fed in awkward pieces; and, offline, how the client reads a
// terminal error frame and words an abstention.

import assert from "node:assert/strict";
import { test } from "node:test";

import { AskClient, describeOutcome, type AbstentionEvent } from "../src/index.js";
import { FrameTooLargeError, SSEParser, type Frame } from "../src/sse.js";

function parse(pieces: string[], lastId = ""): { frames: Frame[]; parser: SSEParser } {
  const parser = new SSEParser(lastId);
  const frames = pieces.flatMap((p) => parser.push(p));
  return { frames, parser };
}

test("frames, comments and line ends of every kind, split anywhere", () => {
  const stream = "\uFEFF: keepalive\r\nid: 1\r\nevent: accepted\r\ndata: {\"a\":1}\r\n\r\n: keepalive\rid: 2\revent: branch\rdata: x\rdata: y\r\rid: 3\nevent: done\ndata: z\n\n";
  const want: Frame[] = [
    { id: "1", type: "accepted", data: '{"a":1}' },
    { id: "2", type: "branch", data: "x\ny" },
    { id: "3", type: "done", data: "z" },
  ];
  for (let cut = 0; cut <= stream.length; cut++) {
    const { frames } = parse([stream.slice(0, cut), stream.slice(cut)]);
    assert.deepEqual(frames, want, `split at ${cut}`);
  }
  assert.deepEqual(parse([...stream]).frames, want, "one character at a time");
});

test("the last event ID persists across frames and connections; an id with NUL is ignored", () => {
  const { frames, parser } = parse(["id: 7\ndata: a\n\ndata: b\n\nid: 8\u0000\ndata: c\n\n"], "6");
  assert.deepEqual(frames.map((f) => f.id), ["7", "7", "7"]);
  assert.equal(parser.lastId, "7");
  assert.deepEqual(parse(["data: a\n\n"], "41").frames[0]?.id, "41", "carried over from the previous connection");
});

test("an event without data is not dispatched; an unfinished one is held; retry is read", () => {
  const { frames, parser } = parse(["event: nothing\n\nretry: 1500\nretry: soon\ndata: half"]);
  assert.deepEqual(frames, []);
  assert.equal(parser.retryMs, 1500);
  assert.deepEqual(parser.push("\n\n"), [{ id: "", type: "message", data: "half" }]);
});

const envelope = (seq: number, type: string) => ({ seq, ticket: "t_1", conversation_id: "c_1", ts: "2026-12-01T20:00:00Z", type });
const frame = (ev: { seq: number; type: string; [k: string]: unknown }) => `id: ${ev.seq}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`;

test("the contract's terminal `event: error` is an outcome, not a failed connection", async () => {
  // EventSource fires its own `error` for both; this client reads the stream with fetch, so a
  // frame named error is the run's ErrorEvent and the connection is not retried.
  let connections = 0;
  const body = [
    frame({ ...envelope(1, "accepted"), question: "q" }),
    frame({ ...envelope(2, "error"), kind: "timeout", message: "the ask did not finish before its deadline" }),
    frame({ ...envelope(3, "done"), outcome: "error", steps: 0, model_calls: 1, input_tokens: 1, output_tokens: 1, elapsed_ms: 5 }),
  ].join("");
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    fetch: async () => {
      connections++;
      return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
    },
  });
  const { outcome, done } = await client.follow("t_1");
  assert.equal(outcome.type, "error");
  if (outcome.type === "error") assert.equal(outcome.kind, "timeout");
  assert.equal(done.outcome, "error");
  assert.equal(connections, 1, "no reconnect: the error event is the run's end");
});

test("an abstention says what was tried, and the agent's own words", () => {
  const base = { ...envelope(4, "abstention"), type: "abstention" as const };
  const cases: { ev: AbstentionEvent; says: RegExp[]; not: RegExp[] }[] = [
    {
      ev: { ...base, terms: [], text: "I can't tell which team you mean. Could you name the team?" },
      says: [/^No answer: nothing was looked up \(the agent called no tool\)\.$/m, /^The agent said: I can't tell which team you mean\. Could you name the team\?$/m],
      not: [/catalog/],
    },
    { ev: { ...base, terms: ["churn"], sources: ["demo"] }, says: [/^No answer: the catalog has nothing to answer this from\. Looked for: churn\.$/], not: [/agent said/] },
    { ev: { ...base, terms: [], sources: ["demo"] }, says: [/^No answer: nothing found in demo answers this\.$/], not: [/catalog/] },
  ];
  for (const c of cases) {
    const text = describeOutcome(c.ev);
    for (const re of c.says) assert.match(text, re);
    for (const re of c.not) assert.doesNotMatch(text, re);
  }
});

test("a Retry-After given as an HTTP date is honoured too", async () => {
  const arrivals: number[] = [];
  const body = [
    frame({ ...envelope(1, "error"), kind: "cancelled", message: "the ask was cancelled" }),
    frame({ ...envelope(2, "done"), outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 5 }),
  ].join("");
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    reconnect: { initialMs: 1 },
    fetch: async () => {
      arrivals.push(Date.now());
      if (arrivals.length === 1) {
        const when = new Date(Date.now() + 2000).toUTCString();
        return new Response('{"type":"about:blank","title":"Service Unavailable","status":503}', { status: 503, headers: { "Retry-After": when, "Content-Type": "application/problem+json" } });
      }
      return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
    },
  });
  await client.follow("t_1");
  assert.equal(arrivals.length, 2);
  const waited = (arrivals[1] ?? 0) - (arrivals[0] ?? 0);
  assert.ok(waited >= 1000, `waited ${waited} ms`);
});

test("a long event in many pieces is read in time linear in its length", () => {
  // Just under 16 Mi characters in 16 Ki pieces: rescanning the held text for every piece (the
  // parser before this one) took half a minute; once over each piece takes well under a second.
  const parser = new SSEParser();
  const size = (16 << 20) - 64;
  const big = `data: ${"x".repeat(size)}\n\n`;
  const started = performance.now();
  const got: Frame[] = [];
  for (let i = 0; i < big.length; i += 16384) got.push(...parser.push(big.slice(i, i + 16384)));
  const ms = performance.now() - started;
  assert.equal(got.length, 1);
  assert.equal(got[0]?.data.length, size);
  assert.ok(ms < 10000, `16 Mi characters took ${Math.round(ms)} ms`);
});

test("a line or an event's data beyond the bound is a FrameTooLargeError, held or not", () => {
  const line = new SSEParser("", 1024);
  assert.deepEqual(line.push(`data: ${"x".repeat(1000)}`), [], "within the bound: held");
  assert.throws(() => line.push("x".repeat(100)), FrameTooLargeError, "a line without end");
  assert.throws(() => new SSEParser("", 1024).push(`data: ${"x".repeat(2000)}\n`), FrameTooLargeError, "one piece");
  const data = new SSEParser("", 1024);
  assert.throws(() => data.push(`data: ${"x".repeat(600)}\ndata: ${"x".repeat(600)}\n`), FrameTooLargeError, "data lines together");
  assert.equal(new SSEParser("", 1024).push(`data: ${"x".repeat(1000)}\n\n`).length, 1, "at the bound: read");
});

test("the bound counts bytes of UTF-8, as the Go and Python clients, not UTF-16 code units", () => {
  // It counted characters: data of "é" (2 bytes each) or "€" (3) passed a bound of n at 2n or 3n
  // bytes, where the Go client's MaxEventSize, the same 16 Mi, ends the stream.
  assert.throws(() => new SSEParser("", 1024).push(`data: ${"é".repeat(400)}\ndata: ${"é".repeat(400)}\n`), FrameTooLargeError, "data lines together: 1602 bytes, 802 characters");
  assert.throws(() => new SSEParser("", 1024).push(`data: ${"€".repeat(400)}\n`), FrameTooLargeError, "one line: 1206 bytes");
  assert.throws(() => new SSEParser("", 1024).push(`data: ${"😀".repeat(300)}`), FrameTooLargeError, "a line held: 1206 bytes, 606 code units");
  const held = new SSEParser("", 1024);
  assert.deepEqual(held.push(`data: ${"é".repeat(300)}`), []);
  assert.throws(() => held.push("é".repeat(300)), FrameTooLargeError, "a line over pieces: 1206 bytes");
  assert.equal(new SSEParser("", 1024).push(`data: ${"é".repeat(509)}\n\n`).length, 1, "at the bound, 1024 bytes: read");
  assert.throws(() => new SSEParser("", 1024).push(`data: ${"é".repeat(509)}x\n\n`), FrameTooLargeError, "a byte beyond it");
});

test("an event stream beyond maxEventSize is final: FrameTooLargeError after one connection", async () => {
  let connections = 0;
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    maxEventSize: 4096,
    reconnect: { initialMs: 1 },
    onRetry: () => undefined,
    fetch: async () => {
      connections++;
      return new Response(frame({ ...envelope(1, "accepted"), question: "q" }) + `id: 2\ndata: ${"x".repeat(8192)}`, {
        headers: { "Content-Type": "text/event-stream" },
      });
    },
  });
  const seen: number[] = [];
  await assert.rejects(async () => {
    for await (const ev of client.events("t_1")) seen.push(ev.seq);
  }, FrameTooLargeError);
  assert.deepEqual(seen, [1]);
  assert.equal(connections, 1, "not retried: a retry reads the same");
});

test("the server's retry: raises the wait after a reset too, not only after a clean end", async () => {
  // As in Go, the field counts however the connection then ends; it was read only when the body
  // ended cleanly, so a reset (the usual way a replica goes away) reconnected at once.
  const at: number[] = [];
  let connections = 0;
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    reconnect: { initialMs: 1, maxMs: 5000 },
    onRetry: () => undefined,
    fetch: async () => {
      connections++;
      const headers = { "Content-Type": "text/event-stream" };
      if (connections > 1) {
        return new Response(frame({ ...envelope(2, "error"), kind: "internal", message: "m" }) +
          frame({ ...envelope(3, "done"), outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 1 }), { headers });
      }
      let pulls = 0;
      const body = new ReadableStream<Uint8Array>({
        pull(ctl) {
          if (pulls++ === 0) ctl.enqueue(new TextEncoder().encode(`retry: 400\n${frame({ ...envelope(1, "accepted"), question: "q" })}`));
          else ctl.error(new Error("connection reset"));
        },
      });
      return new Response(body, { headers });
    },
  });
  const seqs: number[] = [];
  for await (const ev of client.events("t_1", { onConnect: () => at.push(performance.now()) })) seqs.push(ev.seq);
  assert.deepEqual(seqs, [1, 2, 3]);
  assert.equal(at.length, 2);
  assert.ok(at[1]! - at[0]! >= 390, `reconnected after ${Math.round(at[1]! - at[0]!)} ms, before the server's retry: 400`);
});

test("follow says how many steps the stream did not deliver (missedSteps), as Go's MissedSteps", async () => {
  // Steps 3 and 4 were dropped from a full buffer (only steps are): seq skips them, done counts them.
  const step = (seq: number) => ({ ...envelope(seq, "step"), call_id: `c${seq}`, tool: "query", source: "demo", args: {}, ms: 1, refused: false });
  const body = [
    frame({ ...envelope(1, "accepted"), question: "q" }),
    frame(step(2)),
    frame(step(5)),
    frame({ ...envelope(6, "error"), kind: "internal", message: "m" }),
    frame({ ...envelope(7, "done"), outcome: "error", steps: 4, model_calls: 1, input_tokens: 1, output_tokens: 1, elapsed_ms: 5 }),
  ].join("");
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    fetch: async () => new Response(body, { headers: { "Content-Type": "text/event-stream" } }),
  });
  const { done, missedSteps } = await client.follow("t_1");
  assert.equal(done.steps, 4);
  assert.equal(missedSteps, 2);
  assert.equal((await client.follow("t_1", { after: 2 })).missedSteps, 3, "the steps at or before `after` were not delivered either");
});

test("an id without data is the last event ID a resume sends, as in WHATWG and Go", async () => {
  // The event 2 carries an id and no data: not dispatched, but its id is the stream's last event
  // ID. The resume sent Last-Event-ID: 1, the last delivered frame's.
  const sent: (string | null)[] = [];
  const headers = { "Content-Type": "text/event-stream" };
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    reconnect: { initialMs: 1, maxMs: 2 },
    onRetry: () => undefined,
    fetch: async (req: Request) => {
      sent.push(req.headers.get("Last-Event-ID"));
      if (sent.length === 1) return new Response(frame({ ...envelope(1, "accepted"), question: "q" }) + "id: 2\n\n", { headers });
      return new Response(frame({ ...envelope(3, "error"), kind: "internal", message: "m" }) +
        frame({ ...envelope(4, "done"), outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 1 }), { headers });
    },
  });
  const seqs: number[] = [];
  for await (const ev of client.events("t_1")) seqs.push(ev.seq);
  assert.deepEqual(seqs, [1, 3, 4]);
  assert.deepEqual(sent, [null, "2"]);
});

test("a refused reconnect's Retry-After raises the wait before the next connection only, as in Go", async () => {
  // It was kept as a floor for every later reconnect: after one 503 with Retry-After: 1 each
  // plain drop that followed waited a second too.
  const at: number[] = [];
  let connections = 0;
  const headers = { "Content-Type": "text/event-stream" };
  const client = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    reconnect: { initialMs: 1, maxMs: 5000 },
    onRetry: () => undefined,
    fetch: async () => {
      connections++;
      if (connections === 1) return new Response(frame({ ...envelope(1, "accepted"), question: "q" }), { headers });
      if (connections === 2) return new Response(null, { status: 503, headers: { "Retry-After": "1" } });
      if (connections < 5) return new Response("", { headers });
      return new Response(frame({ ...envelope(2, "error"), kind: "internal", message: "m" }) +
        frame({ ...envelope(3, "done"), outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 1 }), { headers });
    },
  });
  const seqs: number[] = [];
  for await (const ev of client.events("t_1", { onConnect: () => at.push(performance.now()) })) seqs.push(ev.seq);
  assert.deepEqual(seqs, [1, 2, 3]);
  assert.equal(at.length, 5);
  assert.ok(at[2]! - at[1]! >= 990, `reconnected ${Math.round(at[2]! - at[1]!)} ms after the 503, before its Retry-After: 1`);
  for (const i of [3, 4]) assert.ok(at[i]! - at[i - 1]! < 900, `connection ${i + 1} still waited out the earlier Retry-After (${Math.round(at[i]! - at[i - 1]!)} ms)`);
});

test("the bound is on an event's data, its lines joined by \\n: at the bound read, a byte over refused, as in Go and Python", () => {
  // Two lines, so neither reaches the bound on its own: 31 + 1 + 32 = 64 bytes of data.
  const two = (first: string) => `data:${first}\ndata:${"b".repeat(32)}\n\n`;
  assert.deepEqual(new SSEParser("", 64).push(two("a".repeat(31))).map((f) => f.data), [`${"a".repeat(31)}\n${"b".repeat(32)}`], "64 bytes: read");
  assert.throws(() => new SSEParser("", 64).push(two("a".repeat(32))), FrameTooLargeError, "65 bytes");
});
