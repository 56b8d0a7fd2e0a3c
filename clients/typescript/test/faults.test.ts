// The faults the Go client and CLI were probed with (a Retry-After longer than a call waits, a
// create's reply lost then refused, a password in the base URL), against this client: offline,
// or against local servers on ephemeral ports.

import assert from "node:assert/strict";
import { test } from "node:test";

import { AskClient, ApiError } from "../src/client.js";

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

