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

/** One line, or one event's data, exceeded the parser's bound (maxSize bytes). Final: a retry reads the same. */
export class FrameTooLargeError extends Error {
  constructor(readonly maxSize: number) {
    super(`the event stream sent a line or an event larger than ${maxSize} bytes`);
    this.name = "FrameTooLargeError";
  }
}

/** The default bound on one line and one event's data, in bytes: 16 MiB, as the Go client's MaxEventSize. */
export const defaultMaxEventSize = 16 << 20;

/**
 * utf8Length is the length of s in UTF-8, what it was on the wire (a byte that was not UTF-8 is
 * counted as its U+FFFD, 3). The bound counted UTF-16 code units: data of "é" or "€" passed a
 * bound of n bytes at 2n or 3n, where the Go and Python clients end the stream.
 */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) n += 1;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 2; // a pair: two code units, four bytes
      i++;
    } else n += 2; // three bytes (a lone surrogate is sent as U+FFFD, three too)
  }
  return n;
}

/**
 * SSEParser is fed decoded text in arbitrary pieces and returns the frames they complete. Each
 * piece is scanned once (a long event arriving in many pieces costs its length, not its length
 * squared), and one line or one event's data longer than maxSize bytes (UTF-8) is a
 * FrameTooLargeError rather than memory without end.
 */
export class SSEParser {
  /** The pieces of the line not yet ended. */
  #partial: string[] = [];
  #partialLen = 0;
  /** The last piece ended in CR: a LF that starts the next one is the same line end. */
  #cr = false;
  #data: string[] = [];
  #dataLen = 0;
  #type = "";
  #id: string | null = null;
  #started = false;
  readonly #maxSize: number;
  /** The last event ID seen so far. */
  lastId: string;
  /** The reconnection time the server last set with "retry", in milliseconds. */
  retryMs: number | undefined;

  constructor(lastId = "", maxSize = defaultMaxEventSize) {
    this.lastId = lastId;
    this.#maxSize = maxSize > 0 ? maxSize : defaultMaxEventSize;
  }

  /**
   * push takes the next piece of decoded text and returns the frames it completed. When the
   * piece exceeds the bound after completing frames, those are returned and the error is kept in
   * failure (and thrown by the next push), so no event before the fault is lost.
   */
  push(text: string): Frame[] {
    if (this.failure) throw this.failure;
    const frames: Frame[] = [];
    try {
      this.#push(text, frames);
    } catch (err) {
      if (!(err instanceof FrameTooLargeError) || frames.length === 0) throw err;
      this.failure = err;
    }
    return frames;
  }

  /** The bound this parser exceeded after returning the frames before it; undefined until then. */
  failure: FrameTooLargeError | undefined;

  #push(text: string, frames: Frame[]): void {
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    let pos = 0;
    if (this.#cr && text.length > 0) {
      this.#cr = false;
      if (text.charCodeAt(0) === 0x0a) pos = 1;
    }
    const eol = /\r\n|\r|\n/g;
    for (;;) {
      eol.lastIndex = pos;
      const m = eol.exec(text);
      if (!m) break;
      let line = text.slice(pos, m.index);
      if (this.#partial.length > 0) {
        this.#grow(utf8Length(line));
        line = this.#partial.join("") + line;
        this.#partial = [];
        this.#partialLen = 0;
      } else if (utf8Length(line) > this.#maxSize) {
        throw new FrameTooLargeError(this.#maxSize);
      }
      pos = m.index + m[0].length;
      // A CR at the very end may be the first half of a CRLF: the next piece says.
      if (m[0] === "\r" && pos === text.length) this.#cr = true;
      const f = this.#line(line);
      if (f) frames.push(f);
    }
    if (pos < text.length) {
      const rest = text.slice(pos);
      this.#grow(utf8Length(rest));
      this.#partial.push(rest);
    }
  }

  /** #grow counts n more bytes of the unfinished line against the bound. */
  #grow(n: number): void {
    this.#partialLen += n;
    if (this.#partialLen > this.#maxSize) throw new FrameTooLargeError(this.#maxSize);
  }

  #line(line: string): Frame | undefined {
    if (line === "") {
      if (this.#id !== null) this.lastId = this.#id;
      this.#id = null;
      const data = this.#data;
      const type = this.#type || "message";
      this.#data = [];
      this.#dataLen = 0;
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
        this.#dataLen += utf8Length(value) + 1;
        if (this.#dataLen > this.#maxSize + 1) throw new FrameTooLargeError(this.#maxSize);
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
      if (parser.failure) throw parser.failure;
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
