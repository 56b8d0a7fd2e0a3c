// A connection that stalls rather than drops, against local HTTP servers: the stream's idle
// timeout resumes it, and the caller's signal and the header timeout still end a wait after a
// garbage collection (Node's fetch follows a Request's signal through a weak reference, so a
// bound that rests on the signal alone is lost when the Request is collected).

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { connect } from "node:net";
import { test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { Worker } from "node:worker_threads";

import { AskClient, HeaderTimeoutError, MayHaveBeenMadeError, type Event } from "../src/index.js";

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const envelope = (seq: number, type: string) => ({ seq, ticket: "t_1", conversation_id: "c_1", ts: "2026-12-01T20:00:00Z", type });
const frame = (ev: { seq: number; type: string; [k: string]: unknown }) => `id: ${ev.seq}\nevent: ${ev.type}\ndata: ${JSON.stringify(ev)}\n\n`;
const events = [
  frame({ ...envelope(1, "accepted"), question: "q" }),
  frame({ ...envelope(2, "branch"), branch_id: "b1", role: "supervisor", state: "open" }),
  frame({ ...envelope(3, "error"), kind: "cancelled", message: "the ask was cancelled" }),
  frame({ ...envelope(4, "done"), outcome: "error", steps: 0, model_calls: 0, input_tokens: 0, output_tokens: 0, elapsed_ms: 5 }),
];

/** serve runs handler on a loopback port until the test ends. */
async function serve(t: { after: (fn: () => void) => void }, handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const srv = createServer(handler);
  await new Promise<void>((resolve) => srv.listen(0, "127.0.0.1", resolve));
  t.after(() => {
    srv.closeAllConnections();
    srv.close();
  });
  const addr = srv.address();
  if (addr === null || typeof addr === "string") throw new Error("no address");
  return `http://127.0.0.1:${addr.port}/ask`;
}

test("a stream that goes silent beyond idleTimeoutMs is resumed with Last-Event-ID", { timeout: 10000 }, async (t) => {
  const lastEventIds: string[] = [];
  const url = await serve(t, (req, res) => {
    const last = String(req.headers["last-event-id"] ?? "");
    lastEventIds.push(last);
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    if (last === "") res.write(": ask events\n\n" + events[0] + events[1]); // then silence: no keep-alive, no close
    else res.end(events.slice(Number(last)).join(""));
  });
  const c = new AskClient({ baseUrl: url, token: "t", idleTimeoutMs: 300, reconnect: { initialMs: 10 } });
  const seen: Event[] = [];
  const { outcome } = await c.follow("t_1", { onEvent: (e) => seen.push(e) });
  assert.equal(outcome.type, "error");
  assert.deepEqual(seen.map((e) => e.seq), [1, 2, 3, 4], "no gap, no duplicate");
  assert.deepEqual(lastEventIds, ["", "2"]);
});

test("the caller's signal ends a stalled stream, even after a garbage collection", { timeout: 10000 }, async (t) => {
  const url = await serve(t, (_req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write(": ask events\n\n" + events[0]);
  });
  const c = new AskClient({ baseUrl: url, token: "t", idleTimeoutMs: 0 });
  const ac = new AbortController();
  const started = Date.now();
  const read = (async () => {
    for await (const ev of c.events("t_1", { signal: ac.signal })) {
      if (ev.seq === 1) {
        gc();
        setTimeout(() => ac.abort(new Error("the caller left")), 100);
      }
    }
  })();
  await assert.rejects(read, /the caller left/);
  assert.ok(Date.now() - started < 3000, `ended ${Date.now() - started} ms after it began`);
});

test("the header timeout holds after a garbage collection", { timeout: 10000 }, async (t) => {
  const url = await serve(t, () => {}); // never answers
  const c = new AskClient({ baseUrl: url, token: "t", headerTimeoutMs: 300, retry: { attempts: 1 } });
  const started = Date.now();
  const call = c.createConversation();
  setTimeout(gc, 50);
  // The request was sent and no reply came: the conversation may have been made.
  await assert.rejects(call, (err) => err instanceof MayHaveBeenMadeError && err.cause instanceof HeaderTimeoutError);
  assert.ok(Date.now() - started < 3000, `ended ${Date.now() - started} ms after it began`);
});

test("a create whose connection never came is not one that may have been made, as in Go", { timeout: 10000 }, async (t) => {
  // A listener that accepts nothing (its thread held) with a queue of two, filled: the kernel
  // drops every later SYN, so each attempt's connect hangs until the header timeout cuts it and
  // no byte of the request is written. It said "the conversation may have been made".
  const held = new Int32Array(new SharedArrayBuffer(4));
  const listener = new Worker(`
    const { parentPort, workerData } = require("node:worker_threads");
    const srv = require("node:net").createServer();
    srv.listen({ port: 0, host: "127.0.0.1", backlog: 1 }, () => {
      parentPort.postMessage(srv.address().port);
      Atomics.wait(workerData, 0, 0);
    });`, { eval: true, workerData: held });
  t.after(async () => {
    Atomics.store(held, 0, 1);
    Atomics.notify(held, 0);
    await listener.terminate();
  });
  const port = (await new Promise((resolve) => listener.once("message", resolve))) as number;
  for (let i = 0; i < 2; i++) {
    const fill = connect(port, "127.0.0.1");
    t.after(() => fill.destroy());
    await new Promise((resolve, reject) => fill.once("connect", resolve).once("error", reject));
  }
  const c = new AskClient({ baseUrl: `http://127.0.0.1:${port}/ask`, token: "t", headerTimeoutMs: 300, retry: { attempts: 2, initialMs: 1 }, onRetry: () => {} });
  for (const call of [() => c.createConversation(), () => c.ask("cv", "q")]) {
    await assert.rejects(call(), (err) => err instanceof HeaderTimeoutError, "the header timeout, not MayHaveBeenMadeError");
  }
});
