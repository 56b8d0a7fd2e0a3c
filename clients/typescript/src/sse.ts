// A Server-Sent Events parser for fetch bodies, following the WHATWG "event stream
// interpretation" rules: lines end in CRLF, LF or CR; a leading BOM is dropped; lines starting
// with ':' are comments (the service's keep-alives); "data" lines accumulate with '\n'; "id"
// without NUL sets the last event ID, which persists across frames; "retry" with only digits sets
// the reconnection time; a blank line dispatches; an event with no data is not dispatched.

/** One dispatched event. */
export interface Frame {
  /** The last event ID when this frame was dispatched: what Last-Event-ID carries on resume. */
  id: string;
  /** The event type; "message" when the server named none. */
  type: string;
  /** The data lines, joined with '\n'. */
  data: string;
}

/** SSEParser is fed decoded text in arbitrary pieces and returns the frames they complete. */
export class SSEParser {
  #buf = "";
  #data: string[] = [];
  #type = "";
  #id: string | null = null;
  #started = false;
  /** The last event ID seen so far. */
  lastId: string;
  /** The reconnection time the server last set with "retry", in milliseconds. */
  retryMs: number | undefined;

  constructor(lastId = "") {
    this.lastId = lastId;
  }

  /** push takes the next piece of decoded text and returns the frames it completed. */
  push(text: string): Frame[] {
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    this.#buf += text;
    const frames: Frame[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buf);
      if (!m) break;
      // A CR at the very end may be the first half of a CRLF: wait for the next piece.
      if (m[0] === "\r" && m.index === this.#buf.length - 1) break;
      const line = this.#buf.slice(0, m.index);
      this.#buf = this.#buf.slice(m.index + m[0].length);
      const f = this.#line(line);
      if (f) frames.push(f);
    }
    return frames;
  }

  #line(line: string): Frame | undefined {
    if (line === "") {
      if (this.#id !== null) this.lastId = this.#id;
      this.#id = null;
      const data = this.#data;
      const type = this.#type || "message";
      this.#data = [];
      this.#type = "";
      return data.length > 0 ? { id: this.lastId, type, data: data.join("\n") } : undefined;
    }
    if (line.startsWith(":")) return undefined;
    const i = line.indexOf(":");
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? "" : line.slice(i + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "event":
        this.#type = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#id = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
    }
    return undefined;
  }
}

/** The stream was silent (not even a keep-alive comment) for longer than the idle timeout. */
export class IdleTimeoutError extends Error {
  constructor(readonly ms: number) {
    super(`the event stream was silent for longer than ${ms} ms`);
    this.name = "IdleTimeoutError";
  }
}

/** How frames reads: when to give up on a silent connection, and when the caller has left. */
export interface FramesOptions {
  /** Ends the read with the signal's reason (the connection is closed). */
  signal?: AbortSignal;
  /** Ends the read with an IdleTimeoutError when no byte arrives for this long; 0 or absent: never. */
  idleMs?: number;
}

/**
 * frames reads a byte stream as UTF-8 and yields its frames as they complete. The signal and the
 * idle bound act on the reader itself, not only through fetch's signal, which Node follows
 * through a weak reference that a garbage collection may drop.
 */
export async function* frames(body: ReadableStream<Uint8Array>, parser: SSEParser, opts: FramesOptions = {}): AsyncGenerator<Frame> {
  const reader = body.getReader();
  const decoder = new TextDecoder("utf-8");
  try {
    for (;;) {
      const { value, done } = await readWithin(reader, opts);
      if (done) return;
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** readWithin is one read, ended early by the signal or by idleMs of silence. */
function readWithin(reader: ReadableStreamDefaultReader<Uint8Array>, opts: FramesOptions): Promise<Awaited<ReturnType<ReadableStreamDefaultReader<Uint8Array>["read"]>>> {
  const { signal, idleMs } = opts;
  if (!signal && !idleMs) return reader.read();
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => settle(() => reject(signal?.reason));
    const settle = (then: () => void) => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      then();
    };
    if (signal?.aborted) return reject(signal.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    if (idleMs) timer = setTimeout(() => settle(() => reject(new IdleTimeoutError(idleMs))), idleMs);
    reader.read().then(
      (r) => settle(() => resolve(r)),
      (err) => settle(() => reject(err)),
    );
  });
}
