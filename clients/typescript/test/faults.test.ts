// The faults the Go client and CLI were probed with (a Retry-After longer than a call waits, a
// create's reply lost then refused, a password in the base URL), against this client: offline,
// or against local servers on ephemeral ports.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";

import { AskClient, ApiError, MayHaveBeenMadeError, ProtocolError } from "../src/client.js";

const conversation = JSON.stringify({ id: "c_1", created_at: "2026-12-05T17:00:00Z" });
const created = () => new Response(conversation, { status: 201, headers: { "Content-Type": "application/json" } });
const unavailable = (retryAfter?: string) =>
  new Response(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503 }), {
    status: 503,
    headers: { "Content-Type": "application/problem+json", ...(retryAfter === undefined ? {} : { "Retry-After": retryAfter }) },
  });

test("a Retry-After longer than a call waits ends it at once, the wait in its message", { timeout: 20000 }, async () => {
  // 3600 s was waited for in silence; 10^12 s, or a date in the year 9999, overflowed setTimeout,
  // which took it for 1 ms, and the call was retried at once, eight times.
  for (const [value, atLeastS] of [["3600", 3600], ["1000000000000", 1e12], ["9".repeat(400), 1e12], ["Fri, 31 Dec 9999 23:59:59 GMT", 1e11]] as const) {
    const seen: Request[] = [];
    const c = new AskClient({
      baseUrl: "http://ask.test/ask",
      token: "t",
      fetch: async (req) => (seen.push(req), seen.length === 1 ? unavailable(value) : created()),
      onRetry: () => assert.fail(`retried after Retry-After: ${value.slice(0, 20)}`),
    });
    await assert.rejects(c.createConversation(), (err) => {
      assert.ok(err instanceof ApiError, String(err));
      assert.equal(err.status, 503);
      assert.ok(err.retryAfterMs >= atLeastS * 1000 && Number.isFinite(err.retryAfterMs), `retryAfterMs ${err.retryAfterMs}`);
      assert.match(err.message, /\(try again in [0-9]+ s\)$/);
      return true;
    });
    assert.equal(seen.length, 1, `${value.slice(0, 20)}: tried once`);
  }
  // The bound is the caller's: retry.maxRetryAfterMs.
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: async () => unavailable("1"), retry: { attempts: 2, maxRetryAfterMs: 500 }, onRetry: () => assert.fail("retried") });
  await assert.rejects(c.createConversation(), (err) => err instanceof ApiError && err.retryAfterMs === 1000);
  // 0 or less (or NaN) is the default (60 s), as in Go and Python: a Retry-After of 1 s is waited for.
  for (const bound of [0, -1, NaN]) {
    let calls = 0;
    const d = new AskClient({
      baseUrl: "http://ask.test/ask",
      token: "t",
      fetch: async () => (++calls === 1 ? unavailable("1") : Response.json({ id: "c_1", created_at: "2026-01-01T00:00:00Z" }, { status: 201 })),
      retry: { attempts: 2, maxRetryAfterMs: bound },
      onRetry: () => {},
    });
    assert.equal((await d.createConversation()).id, "c_1", `maxRetryAfterMs ${bound}`);
    assert.equal(calls, 2, `maxRetryAfterMs ${bound}: waited, then tried again`);
  }
});

test("a Retry-After in the past, negative, not a number or not an HTTP date asks for no wait", async () => {
  // Date.parse reads "-5" as 2001 and "3000-01-01" as a date a thousand years on.
  for (const value of ["Wed, 21 Oct 2015 07:28:00 GMT", "-5", "soon", "1.5", "3000-01-01"]) {
    const causes: unknown[] = [];
    let calls = 0;
    const c = new AskClient({
      baseUrl: "http://ask.test/ask",
      token: "t",
      fetch: async () => (++calls === 1 ? unavailable(value) : created()),
      retry: { initialMs: 1, maxMs: 2 },
      onRetry: (_, __, cause) => causes.push(cause),
    });
    assert.equal((await c.createConversation()).id, "c_1", value);
    assert.equal(causes.length, 1, value);
    assert.ok(causes[0] instanceof ApiError && causes[0].retryAfterMs === 0, `${value}: ${String(causes[0])}`);
  }
});

/** A local service: the first ask's connection is reset once the request has been read (its 202 lost), then 503 on every ask. */
async function losingService(): Promise<{ url: string; asks: () => number; close: () => Promise<void> }> {
  let asks = 0;
  const srv = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      if (req.url === "/ask/v1/conversations") {
        res.writeHead(201, { "Content-Type": "application/json" }).end(conversation);
        return;
      }
      asks++;
      if (asks === 1) {
        req.socket.resetAndDestroy();
        return;
      }
      res.writeHead(503, { "Content-Type": "application/problem+json" }).end(JSON.stringify({ type: "about:blank", title: "Service Unavailable", status: 503, detail: "the store is unavailable" }));
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}/ask`;
  return { url, asks: () => asks, close: () => new Promise((resolve) => { srv.closeAllConnections(); srv.close(() => resolve()); }) };
}

test("a create that fails for good after an attempt whose reply was lost says it may have been made, and where", async () => {
  const svc = await losingService();
  try {
    const c = new AskClient({ baseUrl: svc.url, token: "t", retry: { attempts: 3, initialMs: 1, maxMs: 2 }, onRetry: () => {} });
    const conv = await c.createConversation();
    await assert.rejects(c.ask(conv.id, "q"), (err) => {
      assert.ok(err instanceof MayHaveBeenMadeError, `a plain refusal: ${String(err)}`);
      assert.equal(err.operation, "createAsk");
      assert.equal(err.conversationId, "c_1");
      assert.ok(err.cause instanceof ApiError && err.cause.status === 503, String(err.cause));
      assert.match(err.message, /^createAsk: 503 Service Unavailable: the store is unavailable \(an earlier attempt's reply was lost: the ask may have been made and be running in conversation c_1\)$/);
      return true;
    });
    assert.equal(svc.asks(), 3);
  } finally {
    await svc.close();
  }
  // Control: refused every time, nothing lost, is the refusal itself.
  const c = new AskClient({ baseUrl: "http://ask.test/ask", token: "t", fetch: async () => unavailable(), retry: { attempts: 2, initialMs: 1 }, onRetry: () => {} });
  await assert.rejects(c.ask("c_1", "q"), (err) => err instanceof ApiError);
});

test("a password in baseUrl is never sent, printed or told to onRetry", async () => {
  const seen: { auth: string | undefined; url: string | undefined }[] = [];
  const srv = createServer((req, res) => {
    seen.push({ auth: req.headers.authorization, url: req.url });
    res.writeHead(200, { "Content-Type": "text/html" }).end("<html>sign in</html>");
  });
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  const port = (srv.address() as AddressInfo).port;
  try {
    const told: string[] = [];
    const c = new AskClient({ baseUrl: `http://u:s3cret@127.0.0.1:${port}/ask/`, token: "t", retry: { initialMs: 1, maxMs: 2 }, onRetry: (_, __, cause) => told.push(String(cause)) });
    await assert.rejects(c.createConversation(), (err) => {
      // It was a TypeError quoting the URL (fetch refuses one with credentials), retried as a failed connection.
      assert.ok(err instanceof ProtocolError, String(err));
      assert.ok(!err.message.includes("s3cret"), err.message);
      assert.ok(err.message.includes(`http://u:xxxxx@127.0.0.1:${port}/ask the ask service`), err.message);
      return true;
    });
    assert.deepEqual(told, []);
    assert.deepEqual(seen, [{ auth: "Bearer t", url: "/ask/v1/conversations" }]);
  } finally {
    await new Promise<void>((resolve) => srv.close(() => resolve()));
  }
  assert.throws(() => new AskClient({ baseUrl: "ftp://u:s3cret@ask.test/ask", token: "t" }), (err: Error) => err instanceof TypeError && !err.message.includes("s3cret") && err.message.includes("u:xxxxx@"));
});
