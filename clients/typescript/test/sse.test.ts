// The SSE parser by the WHATWG rules, fed in awkward pieces.

import assert from "node:assert/strict";
import { test } from "node:test";

import { SSEParser, type Frame } from "../src/sse.js";

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
