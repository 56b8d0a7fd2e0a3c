// Retries of the calls other than the stream: the same Idempotency-Key on every attempt, which
// statuses are retried, the header timeout; then a lost reply against the real service.

import assert from "node:assert/strict";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";

import { AskClient, ApiError, HeaderTimeoutError, ProtocolError, StreamProtocolError, TokenError } from "../src/client.js";
import { describeOutcome } from "../src/present.js";
import { KillableProxy } from "./proxy.js";
import { stack, token } from "./stack.js";

const conversation = JSON.stringify({ id: "cv", created_at: "2026-11-29T20:00:00Z" });

/** A fake service answering each status in turn, then 201; it records every request. */
function flaky(statuses: number[]) {
  const seen: Request[] = [];
  const fetch = async (req: Request) => {
    seen.push(req);
    const st = statuses[seen.length - 1];
    if (st === undefined) return new Response(conversation, { status: 201, headers: { "Content-Type": "application/json" } });
    const type = st === 409 ? "urn:ask:problem:idempotency-key-in-progress" : "about:blank";
    return new Response(JSON.stringify({ type, title: "x", status: st }), {
      status: st,
      headers: { "Content-Type": "application/problem+json", ...(st === 409 ? { "Retry-After": "0" } : {}) },
    });
  };
  return { fetch, seen };
}

describe("retries", () => {
  test("502, 503, 504 and an in-progress 409 are retried with one Idempotency-Key, and said", async () => {
    const { fetch, seen } = flaky([502, 503, 504, 409]);
    const said: string[] = [];
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, retry: { initialMs: 1, maxMs: 2 }, onRetry: (op, n) => said.push(`${op}#${n}`) });
    const conv = await c.createConversation();
    assert.equal(conv.id, "cv");
    assert.equal(seen.length, 5);
    const keys = seen.map((r) => r.headers.get("Idempotency-Key"));
    assert.match(keys[0] ?? "", /^"[0-9a-f-]{36}"$/, "an sf-string key");
    assert.ok(keys.every((k) => k === keys[0]), `one key on every attempt: ${keys.join(" ")}`);
    assert.deepEqual(said, ["createConversation#2", "createConversation#3", "createConversation#4", "createConversation#5"]);
  });

  test("a refusal is not retried", async () => {
    for (const st of [400, 404, 409, 422, 429, 500]) {
      const { fetch, seen } = flaky([st]);
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: st === 409 ? plain409(seen) : fetch, retry: { initialMs: 1 }, onRetry: () => {} });
      await assert.rejects(c.createConversation(), (err) => err instanceof ApiError && err.status === st, `status ${st}`);
      assert.equal(seen.length, 1, `status ${st} was tried once`);
    }
  });

  test("a success that is not the service's JSON is final, tried once", async () => {
    // A wrong baseUrl that lands on a web server (a captive portal, a single-page app) answers
    // 200 with a page: it was read as a failed connection and retried eight times.
    for (const body of ["<html>sign in to the portal</html>", "null", "[]", "7", ""]) {
      const seen: Request[] = [];
      const fetch = async (req: Request) => {
        seen.push(req);
        return new Response(body, { status: 200, headers: { "Content-Type": body.startsWith("<") ? "text/html" : "application/json" } });
      };
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, retry: { initialMs: 1 }, onRetry: () => assert.fail(`retried ${JSON.stringify(body)}`) });
      await assert.rejects(c.createConversation(), (err) => err instanceof ProtocolError && /not the service's JSON/.test(err.message), JSON.stringify(body));
      assert.equal(seen.length, 1, `${JSON.stringify(body)} was tried once`);
    }
  });

  test("a success that names nothing is final, tried once", async () => {
    // A 202 `{}`, or a conversation where a ticket belongs, was returned as a Ticket whose ticket
    // was undefined, to be followed nowhere.
    const cases: [string, (c: AskClient) => Promise<unknown>, string][] = [
      ["{}", (c) => c.ask("c_1", "q"), "names no ticket"],
      [`{"id":"c_1","asks_url":"/ask/v1/conversations/c_1/asks"}`, (c) => c.ask("c_1", "q"), "names no ticket"],
      [`{"ticket":""}`, (c) => c.status("t_1"), "names no ticket"],
      [`{"ticket":7}`, (c) => c.cancel("t_1"), "names no ticket"],
      ["{}", (c) => c.createConversation(), "names no id"],
    ];
    for (const [body, call, want] of cases) {
      const seen: Request[] = [];
      const fetch = async (req: Request) => {
        seen.push(req);
        return new Response(body, { status: 202, headers: { "Content-Type": "application/json" } });
      };
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, retry: { initialMs: 1 }, onRetry: () => assert.fail(`retried ${body}`) });
      await assert.rejects(call(c), (err) => err instanceof ProtocolError && err.message.includes(want), body);
      assert.equal(seen.length, 1, `${body} was tried once`);
    }
  });

  test("a baseUrl that is not an http URL is refused when the client is made, not retried per call", () => {
    for (const baseUrl of ["http://127.0.0.1:undefined/ask", "127.0.0.1:8080/ask", "ftp://ask.test/ask", ""]) {
      assert.throws(() => new AskClient({ baseUrl, token: "t", onRetry: () => assert.fail("retried") }), TypeError, baseUrl);
    }
  });

  test("a baseUrl with a query or fragment is refused when the client is made, its query not quoted", () => {
    // The service's paths were joined to the query ("/ask?k=1/v1/conversations"): found by an audit.
    for (const baseUrl of ["http://ask.test/ask?key=s3cret", "http://ask.test/ask#top", "http://ask.test/ask?"]) {
      assert.throws(
        () => new AskClient({ baseUrl, token: "t", onRetry: () => assert.fail("retried") }),
        (err: Error) => err instanceof TypeError && err.message.includes("query or a fragment") && !err.message.includes("s3cret"),
        baseUrl,
      );
    }
  });

  test("a token that cannot be a bearer is refused before any request, not retried, and not quoted", async () => {
    for (const tok of ["", "abc\n", "ab c", "a\tb", "x\u007fy", async () => "line\r\n"]) {
      const { fetch, seen } = flaky([]);
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: tok, fetch, retry: { initialMs: 1, maxMs: 2 }, reconnect: { initialMs: 1, maxMs: 2 } });
      await assert.rejects(c.createConversation(), (err: unknown) => err instanceof TokenError && (typeof tok !== "string" || tok.length < 2 || !err.message.includes(tok)));
      await assert.rejects(async () => {
        for await (const _ of c.events("tk")) void _;
      }, TokenError);
      assert.equal(seen.length, 0);
    }
  });

  test("a service that never answers costs the header timeout, then the retry answers", async () => {
    let calls = 0;
    const fetch = (req: Request) => {
      calls++;
      if (calls === 1) {
        return new Promise<Response>((_, reject) => req.signal.addEventListener("abort", () => reject(req.signal.reason)));
      }
      return Promise.resolve(new Response(conversation, { status: 201, headers: { "Content-Type": "application/json" } }));
    };
    const causes: unknown[] = [];
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, headerTimeoutMs: 50, retry: { initialMs: 1 }, onRetry: (_, __, cause) => causes.push(cause) });
    const conv = await c.createConversation();
    assert.equal(conv.id, "cv");
    assert.equal(calls, 2);
    assert.ok(causes[0] instanceof HeaderTimeoutError, `the retry's cause: ${String(causes[0])}`);
  });
});

/** A 409 conflict naming a running ticket: a refusal, not the in-progress one. */
function plain409(seen: Request[]) {
  return async (req: Request) => {
    seen.push(req);
    return new Response(JSON.stringify({ type: "about:blank", title: "Conflict", status: 409, ticket: "t_x" }), {
      status: 409,
      headers: { "Content-Type": "application/problem+json" },
    });
  };
}

describe("a lost reply, against the dev stack", () => {
  test("the retry answers the same ticket, and the ask runs once", async () => {
    const urls = await stack();
    const { proxy, url } = await KillableProxy.start(new URL(urls.ask));
    try {
      const tok = await token("alice");
      const retries: string[] = [];
      const c = new AskClient({ baseUrl: url, token: tok, retry: { initialMs: 10 }, onRetry: (op) => retries.push(op) });
      const conv = await c.createConversation();
      let lost = "";
      proxy.cutWhen = (chunk) => {
        const m = /^HTTP\/1\.1 202[\s\S]*"ticket":"([^"]+)"/.exec(chunk);
        if (m?.[1]) lost = m[1];
        return m !== null;
      };
      const ticket = await c.ask(conv.id, "How many sev1 incidents did we have in 2026-Q2?");
      assert.equal(proxy.cuts, 1, "the proxy lost the first reply");
      assert.ok(lost !== "", "the service created a ticket before the reply was lost");
      assert.equal(ticket.ticket, lost, "the retry answered the ticket the lost reply held");
      assert.deepEqual(retries, ["createAsk"]);
      const { outcome } = await c.follow(ticket.ticket);
      assert.equal(outcome.type, "answer");
      // One ask ran in the conversation: a second would have been refused (409) or left a
      // running ticket; the next ask is admitted at once.
      const next = await c.ask(conv.id, "How many sev1 incidents did we have in 2026-Q2?");
      assert.notEqual(next.ticket, ticket.ticket);
      await c.follow(next.ticket);
    } finally {
      await proxy.close();
    }
  });
});

test("a refusal says its problem's detail and every violation", async () => {
  const problem = {
    type: "about:blank",
    title: "Bad Request",
    status: 400,
    detail: "the request does not satisfy the API description",
    errors: ["body/question: maximum string length is 4000", 'body: property "bogus" is unsupported'],
  };
  const fetch = async () => new Response(JSON.stringify(problem), { status: 400, headers: { "Content-Type": "application/problem+json" } });
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch });
  await assert.rejects(c.ask("c_1", "q"), (err) => {
    assert.ok(err instanceof ApiError);
    assert.equal(
      err.message,
      'createAsk: 400 Bad Request: the request does not satisfy the API description (body/question: maximum string length is 4000; body: property "bogus" is unsupported)',
    );
    assert.deepEqual(err.problem?.errors, problem.errors);
    return true;
  });
});

/** refused is what Node's fetch throws when nothing listens at the address. */
function refused(): TypeError {
  return new TypeError("fetch failed", { cause: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }) });
}

test("nothing listening at the URL fails at once, saying so", async () => {
  // A real refusal: a port that was just closed.
  const srv = createServer();
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as AddressInfo).port;
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  const retries: number[] = [];
  const c = new AskClient({ baseUrl: `http://127.0.0.1:${port}/ask`, token: "t", onRetry: (_, n) => retries.push(n) });
  const started = Date.now();
  await assert.rejects(c.createConversation(), (err: Error) => {
    assert.equal(err.message, `createConversation: nothing is listening at http://127.0.0.1:${port}/ask (connect ECONNREFUSED 127.0.0.1:${port})`);
    return true;
  });
  assert.deepEqual(retries, [], "not retried");
  assert.ok(Date.now() - started < 1000, `took ${Date.now() - started} ms`);
});

test("a refusal once the service has answered is a restart, and retried", async () => {
  let calls = 0;
  const fetch = async () => {
    calls++;
    if (calls === 2) throw refused();
    return new Response(conversation, { status: 201, headers: { "Content-Type": "application/json" } });
  };
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, retry: { initialMs: 1 }, onRetry: () => {} });
  await c.createConversation();
  await c.createConversation();
  assert.equal(calls, 3);
});

test("a frame whose data is not JSON is final, and the error never quotes the data", async () => {
  // V8's SyntaxError quotes the text around the fault: for the accepted event, the question.
  const question = "zq-frame-secret how many incidents";
  const body = `id: 1\nevent: accepted\ndata: {"seq":1,"type":"accepted","question":${question}}\n\n`;
  let calls = 0;
  const fetch = async () => {
    calls++;
    return new Response(body, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, reconnect: { initialMs: 1 } });
  await assert.rejects(
    (async () => {
      for await (const _ of c.events("t_1")) { /* none */ }
    })(),
    (err) => err instanceof SyntaxError && !err.message.includes("zq-frame-secret") && /event 1 .*not JSON/.test(err.message),
  );
  assert.equal(calls, 1, "not retried");
});

test("a frame that is JSON but not an event is final too, and never quoted", async () => {
  // null or a number failed as a TypeError, taken for a dropped connection and retried eight times;
  // an event without a numeric seq turned off the skipping of replays.
  for (const data of ['null', '7', '[1]', '{"seq":"2","type":"step","question":"zq-frame-secret"}', '{"type":"step"}', '{"seq":2}']) {
    let calls = 0;
    const fetch = async () => {
      calls++;
      return new Response(`id: 1\ndata: {"seq":1,"type":"accepted"}\n\nid: 2\ndata: ${data}\n\n`, { status: 200, headers: { "Content-Type": "text/event-stream" } });
    };
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, reconnect: { initialMs: 1 }, onRetry: () => undefined });
    const seen: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of c.events("t_1")) seen.push(ev.seq);
      })(),
      (err) => err instanceof SyntaxError && !err.message.includes("zq-frame-secret") && /event 2 .*not an event/.test(err.message),
      data,
    );
    assert.deepEqual([seen, calls], [[1], 1], `${data}: the event before it delivered, not retried`);
  }
});

test("an outcome that breaks the contract is final, named by type, seq and field, never quoted", async () => {
  // follow returned an answer without text or caveats, an abstention without terms, a refusal
  // whose fields were numbers: describeOutcome then threw a TypeError or said "undefined" (or
  // "the 5 source"). Final, as the Go client (which cannot decode it) and as any data that is not
  // the contract's; the data is never quoted.
  const secret = "zq-outcome-secret";
  const answer = { type: "answer", text: "t", caveats: [], provenance: [], sql: [], divergence: null, path: { speed: "fast", detail: "catalog" } };
  const noText: Record<string, unknown> = { ...answer };
  delete noText.text;
  const broken: Record<string, unknown>[] = [
    noText, { ...answer, text: null }, { ...answer, caveats: undefined }, { ...answer, caveats: [secret] },
    { ...answer, provenance: [{ term: 1 }] }, { ...answer, sql: secret }, { ...answer, path: {} }, { ...answer, headline: secret },
    { ...answer, result: { columns: [secret], rows: [secret], truncated: false } }, { ...answer, divergence: { without: [secret] } },
    { type: "abstention" }, { type: "abstention", terms: secret }, { type: "abstention", terms: [], sources: [7] }, { type: "abstention", terms: [], text: 7 },
    { type: "refusal", tool: "run_query", source: 5, reason: secret }, { type: "refusal", source: "demo", reason: secret },
    { type: "error", message: secret }, { type: "error", kind: ["internal"], message: secret },
  ];
  for (const outcome of broken) {
    let calls = 0;
    const fetch = async () => {
      calls++;
      return new Response(`id: 1\ndata: {"seq":1,"type":"accepted"}\n\nid: 2\ndata: ${JSON.stringify({ seq: 2, ...outcome })}\n\n`, {
        status: 200,
        headers: { "Content-Type": "text/event-stream" },
      });
    };
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, reconnect: { initialMs: 1 }, onRetry: () => undefined });
    const seen: number[] = [];
    await assert.rejects(
      (async () => {
        for await (const ev of c.events("t_1")) seen.push(ev.seq);
      })(),
      (err) =>
        err instanceof SyntaxError &&
        !err.message.includes(secret) &&
        new RegExp(`^streamEvents: ${String(outcome.type)} event 2 of ticket t_1 is not the contract's: the field \\w+ (is missing|is not of the contract's type)$`).test(err.message),
      JSON.stringify(outcome),
    );
    assert.deepEqual([seen, calls], [[1], 1], `${JSON.stringify(outcome)}: the event before it delivered, not retried`);
  }
  // The least of each that the contract allows is read and said.
  const least: Record<string, unknown>[] = [
    answer,
    { type: "abstention", terms: [] },
    { type: "refusal", tool: "run_query", source: "demo", reason: "r", call_id: "x" },
    { type: "error", kind: "a kind added later", message: "m" },
  ];
  for (const outcome of least) {
    const done = { seq: 2, type: "done", outcome: outcome.type, steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 1 };
    const fetch = async () =>
      new Response(`id: 1\ndata: ${JSON.stringify({ seq: 1, ...outcome })}\n\nid: 2\ndata: ${JSON.stringify(done)}\n\n`, { headers: { "Content-Type": "text/event-stream" } });
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, onRetry: () => assert.fail("retried") });
    const got = await c.follow("t_1");
    assert.doesNotMatch(describeOutcome(got.outcome), /undefined/, JSON.stringify(outcome));
  }
});

test("a branch or milestone that breaks the contract is final too, as in Go and Python", async () => {
  // A milestone without its subject was said as 'Checking what "undefined" means in the catalog'.
  const broken: Record<string, unknown>[] = [
    { type: "milestone", phase: "grounding", source: "demo" },
    { type: "milestone", phase: "grounding", subject: ["zq-secret"], source: "demo" },
    { type: "milestone", phase: "grounding", subject: "x", source: "demo", branch_id: 7 },
    { type: "branch", role: "source", state: "open" },
    { type: "branch", branch_id: "b1", role: "source", state: "open", source: 5 },
  ];
  for (const event of broken) {
    let calls = 0;
    const fetch = async () => {
      calls++;
      return new Response(`id: 1\ndata: ${JSON.stringify({ seq: 1, ...event })}\n\n`, { headers: { "Content-Type": "text/event-stream" } });
    };
    const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, reconnect: { initialMs: 1 }, onRetry: () => undefined });
    await assert.rejects(
      (async () => {
        for await (const _ of c.events("t_1"));
      })(),
      (err) =>
        err instanceof SyntaxError &&
        !err.message.includes("zq-secret") &&
        new RegExp(`^streamEvents: ${String(event.type)} event 1 of ticket t_1 is not the contract's: the field \\w+ (is missing|is not of the contract's type)$`).test(err.message),
      JSON.stringify(event),
    );
    assert.equal(calls, 1, `${JSON.stringify(event)}: not retried`);
  }
});

test("a 429 is not retried, and its Retry-After is the caller's to read", async () => {
  const seen: Request[] = [];
  const c = new AskClient({
    baseUrl: "http://ask.test/ask",
    token: "t",
    retry: { initialMs: 1 },
    onRetry: () => assert.fail("retried"),
    fetch: async (req) => {
      seen.push(req);
      return new Response(JSON.stringify({ type: "about:blank", title: "Too Many Requests", status: 429, detail: "too many asks in flight" }), {
        status: 429,
        headers: { "Content-Type": "application/problem+json", "Retry-After": "7" },
      });
    },
  });
  await assert.rejects(c.ask("c_1", "q"), (err) => {
    assert.ok(err instanceof ApiError);
    assert.equal(err.status, 429);
    assert.equal(err.retryAfterMs, 7000);
    assert.equal(err.problem?.detail, "too many asks in flight");
    return true;
  });
  assert.equal(seen.length, 1);
});

test("a retried create's last refusal carries its Retry-After, and a 409 names the running ticket", async () => {
  const busy = () => new Response(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503 }), {
    status: 503,
    headers: { "Content-Type": "application/problem+json", "Retry-After": "0" },
  });
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: async () => busy(), retry: { attempts: 2, initialMs: 1 }, onRetry: () => {} });
  await assert.rejects(c.createConversation(), (err) => err instanceof ApiError && err.status === 503 && err.retryAfterMs === 0);
  const seen: Request[] = [];
  const d = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: plain409(seen) });
  await assert.rejects(d.ask("c_1", "q"), (err) => err instanceof ApiError && err.runningTicket === "t_x");
});

describe("a stream refused", () => {
  const events = [
    `id: 1\nevent: error\ndata: ${JSON.stringify({ seq: 1, ticket: "t_1", conversation_id: "c_1", ts: "2026-12-01T20:00:00Z", type: "error", kind: "internal", message: "m" })}\n\n`,
    `id: 2\nevent: done\ndata: ${JSON.stringify({ seq: 2, ticket: "t_1", conversation_id: "c_1", ts: "2026-12-01T20:00:00Z", type: "done", outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 1 })}\n\n`,
  ].join("");
  const refusing = (status: number, seen: Request[]) => async (req: Request) => {
    seen.push(req);
    if (seen.length === 1) {
      return new Response(JSON.stringify({ type: "about:blank", title: "x", status, detail: "no such ticket" }), {
        status,
        headers: { "Content-Type": "application/problem+json" },
      });
    }
    return new Response(events, { status: 200, headers: { "Content-Type": "text/event-stream" } });
  };

  for (const status of [408, 500, 502, 503, 504]) {
    test(`with ${status} is resumed, as the Go client`, async () => {
      const seen: Request[] = [];
      const said: string[] = [];
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: refusing(status, seen), reconnect: { initialMs: 1 },
        onRetry: (op, n, cause) => said.push(`${op}#${n} ${cause instanceof ApiError ? cause.status : String(cause)}`) });
      const { outcome } = await c.follow("t_1");
      assert.equal(outcome.type, "error");
      assert.equal(seen.length, 2);
      assert.deepEqual(said, [`streamEvents#2 ${status}`], "the reconnect is told to onRetry, never silent");
    });
  }

  for (const status of [400, 401, 404, 501]) {
    test(`with ${status} is final: an ApiError with its problem`, async () => {
      const seen: Request[] = [];
      const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: refusing(status, seen), reconnect: { initialMs: 1 } });
      await assert.rejects(c.follow("t_1"), (err) => err instanceof ApiError && err.status === status && err.problem?.detail === "no such ticket");
      assert.equal(seen.length, 1, "not resumed");
    });
  }
});

test("a redirect is not followed: the bearer and the question stay with the service", async () => {
  const elsewhere: string[] = [];
  const other = createHttpServer((req, res) => {
    elsewhere.push(`${req.method} ${req.url} ${req.headers.authorization ?? ""}`);
    res.writeHead(200, { "Content-Type": "application/json" }).end("{}");
  });
  await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
  const otherUrl = `http://127.0.0.1:${(other.address() as AddressInfo).port}`;
  const redirecting = createHttpServer((req, res) => {
    req.resume();
    res.writeHead(307, { Location: `${otherUrl}${req.url}`, "Content-Length": "0" }).end();
  });
  await new Promise<void>((resolve) => redirecting.listen(0, "127.0.0.1", resolve));
  try {
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/ask`;
    const c = new AskClient({ baseUrl: url, token: "secret-bearer", onRetry: () => assert.fail("retried") });
    await assert.rejects(c.ask("c_1", "zq-redirect-secret"), (err) => err instanceof ApiError && err.status === 307);
    await assert.rejects(c.follow("t_1"), (err) => err instanceof ApiError && err.status === 307);
    assert.deepEqual(elsewhere, [], "nothing reached the redirect's target");
  } finally {
    await new Promise((resolve) => redirecting.close(resolve));
    await new Promise((resolve) => other.close(resolve));
  }
});

test("a stream answered with something other than text/event-stream is final, as in Go", async () => {
  let calls = 0;
  const fetch = async () => {
    calls++;
    return new Response("<html>a gateway's page</html>", { status: 200, headers: { "Content-Type": "text/html" } });
  };
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch, reconnect: { initialMs: 1 } });
  await assert.rejects(c.follow("t_1"), (err) => err instanceof StreamProtocolError && /not text\/event-stream/.test(err.message));
  assert.equal(calls, 1, "not resumed");
});
