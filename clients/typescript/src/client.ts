// The ask service's TypeScript client: typed calls through openapi-fetch over the types that
// openapi-typescript generates from openapi/ask.openapi.yaml (src/schema.d.ts), and an event
// stream reader that sends the bearer (the browser's EventSource cannot) and resumes a dropped
// connection with Last-Event-ID, so its caller sees every event once, in order.

import { subscribe, unsubscribe } from "node:diagnostics_channel";

import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { FrameTooLargeError, SSEParser, defaultMaxEventSize, frames } from "./sse.js";

type Schemas = components["schemas"];

/** One event of a ticket's stream: a union discriminated by `type`. */
export type Event = Schemas["Event"];
/** The event types this client was generated with. Others may arrive and are passed through. */
export type EventType = Event["type"];
/** The terminal events: exactly one per run, before done. */
export type Outcome = Extract<Event, { type: "answer" | "abstention" | "refusal" | "error" }>;
export type AnswerEvent = Schemas["AnswerEvent"];
export type AbstentionEvent = Schemas["AbstentionEvent"];
export type RefusalEvent = Schemas["RefusalEvent"];
export type ErrorEvent = Schemas["ErrorEvent"];
export type MilestoneEvent = Schemas["MilestoneEvent"];
export type BranchEvent = Schemas["BranchEvent"];
export type StepEvent = Schemas["StepEvent"];
export type Divergence = Schemas["Divergence"];
export type DoneEvent = Schemas["DoneEvent"];
export type Conversation = Schemas["Conversation"];
export type Ticket = Schemas["Ticket"];
export type AskStatus = Schemas["AskStatus"];
export type CancelAccepted = Schemas["CancelAccepted"];
export type Problem = Schemas["Problem"];

/** A bearer, or a function that returns the current one (called for every request). */
export type TokenSource = string | (() => string | Promise<string>);

/** How the event stream reconnects after a drop. Zero values mean defaults. */
export interface ReconnectOptions {
  /** Reconnects in a row without progress before giving up (default 8). */
  attempts?: number;
  /** The first backoff in milliseconds (default 100); doubled per attempt, with full jitter. */
  initialMs?: number;
  /**
   * The cap on every wait between two connections, in milliseconds (default 5000): the backoff,
   * and the server's `retry:` and `Retry-After`, which raise the wait up to it and never beyond.
   */
  maxMs?: number;
}

/**
 * How calls other than the event stream are retried: after a connection error, no response
 * headers within headerTimeoutMs, a 502, 503 or 504, or a 409 saying an earlier attempt with
 * the same Idempotency-Key is still in progress. createConversation and ask send an
 * Idempotency-Key, the same on every attempt, so a retry never creates a second conversation
 * or ticket; status is a read and cancel is idempotent. Zero values mean defaults.
 */
export interface RetryOptions {
  /** Attempts in all (default 8; 1 means no retry). */
  attempts?: number;
  /** The first backoff in milliseconds (default 250); doubled per attempt, with full jitter, never below Retry-After. */
  initialMs?: number;
  /** The backoff cap in milliseconds (default 5000). */
  maxMs?: number;
  /**
   * The longest Retry-After a call waits for before its retry, in milliseconds (default 60000): a
   * longer one ends the call at once with its ApiError, whose retryAfterMs (and message) says when
   * to try again, rather than a wait of an hour the caller cannot see the end of. As the Go
   * client's Retry.MaxRetryAfter; 0 or less (or NaN) is the default.
   */
  maxRetryAfterMs?: number;
}

export interface AskClientOptions {
  /** The service root including its base path, e.g. http://127.0.0.1:8080/ask. */
  baseUrl: string;
  /** The caller's bearer. The same token is what every source sees for this user. */
  token: TokenSource;
  /** Replaces globalThis.fetch (for tests and proxies). */
  fetch?: (input: Request) => Promise<Response>;
  reconnect?: ReconnectOptions;
  retry?: RetryOptions;
  /**
   * Bounds the wait for a response's headers, in milliseconds, on every request (a stream's
   * connection included; `Prefer: wait` adds its wait), so a frozen replica costs seconds.
   * Default 15000; 0 disables.
   */
  headerTimeoutMs?: number;
  /**
   * How long an event stream may stay completely silent (not even a keep-alive comment) before
   * the connection is taken for dead and resumed with Last-Event-ID, in milliseconds. Keep it
   * above the service's keep-alive interval (10 s by default). Default 45000; 0 disables.
   */
  idleTimeoutMs?: number;
  /**
   * Bounds one line and one event's data of an event stream, in bytes of UTF-8 (default 16 MiB,
   * as the Go client's MaxEventSize): a stream that exceeds it ends in a FrameTooLargeError,
   * final, rather than in memory without end.
   */
  maxEventSize?: number;
  /**
   * Told of every retry of a call and every reconnect of an event stream (as "streamEvents"): the
   * client never retries silently. Default: console.warn.
   */
  onRetry?: (operation: string, attempt: number, cause: unknown) => void;
}

/** The problem type of a 409 for an Idempotency-Key whose first request is in progress. */
export const problemIdempotencyInProgress = "urn:ask:problem:idempotency-key-in-progress";

/** No response headers came within headerTimeoutMs. */
export class HeaderTimeoutError extends Error {
  constructor(readonly ms: number) {
    super(`no response headers within ${ms} ms`);
    this.name = "HeaderTimeoutError";
  }
}

/**
 * A refusal of a call by the service: its HTTP status and RFC 9457 problem, whose detail and
 * violations the message says, and the Retry-After it asked for (a 429, a 503, the 409 of an
 * Idempotency-Key still in progress) in milliseconds, 0 when none: a 429 is not retried by the
 * client, and retryAfterMs says when the caller may try again.
 */
/**
 * TokenError: the token cannot be sent as a bearer credential (empty, or holding white space or
 * a control character: a token read from a file with its line break, say). Final, before any
 * request: fetch would refuse the header with a TypeError that reads as a failed connection and
 * is retried. The message names the fault, never the token. As the Go and Python clients.
 */
export class TokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TokenError";
  }
}

function checkBearer(t: string): void {
  if (typeof t !== "string" || t === "") throw new TokenError("the token is empty");
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c <= 0x20 || c === 0x7f) throw new TokenError(`the token holds white space or a control character at index ${i}: not a bearer token`);
  }
}

export class ApiError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly problem: Partial<Problem> | undefined,
    readonly retryAfterMs = 0,
  ) {
    // The violations (a 400's `errors`) say what to change; the detail alone often does not.
    const violations = Array.isArray(problem?.errors) && problem.errors.length > 0 ? ` (${problem.errors.join("; ")})` : "";
    const again = retryAfterMs > 0 ? ` (try again in ${Math.ceil(retryAfterMs / 1000)} s)` : "";
    super(`${operation}: ${status}${problem?.title ? ` ${problem.title}` : ""}${problem?.detail ? `: ${problem.detail}` : ""}${violations}${again}`);
    this.name = "ApiError";
  }

  /** For a 409, the ticket already running in the conversation; "" when the problem names none. */
  get runningTicket(): string {
    return typeof this.problem?.ticket === "string" ? this.problem.ticket : "";
  }
}

/** The service answered the event stream with something that is not one (not text/event-stream). Final. */
export class StreamProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StreamProtocolError";
  }
}

/**
 * The service answered a call with a success that is not the contract's JSON (a captive portal's
 * or a web server's page at a wrong baseUrl, say). Final: a retry reads the same. As Python's
 * ProtocolError.
 */
export class ProtocolError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ProtocolError";
  }
}

/**
 * A create (createConversation, ask) that failed for good after an earlier attempt of it was sent
 * and its reply lost (the connection dropped, or no response headers came within
 * headerTimeoutMs): that attempt may have made the conversation or the ticket, and the ask may be
 * running. `cause` is what ended the call (an ApiError, a ProtocolError, a failed connection);
 * `conversationId` is, for ask, the conversation it may be running in. Asking again makes a new
 * ask, perhaps a second one. As the Go client's ErrMayHaveBeenMade.
 */
export class MayHaveBeenMadeError extends Error {
  constructor(
    readonly operation: string,
    override readonly cause: unknown,
    readonly conversationId?: string,
  ) {
    const what = conversationId ? `the ask may have been made and be running in conversation ${conversationId}` : "the conversation may have been made";
    super(`${cause instanceof Error ? cause.message : String(cause)} (an earlier attempt's reply was lost: ${what})`, { cause });
    this.name = "MayHaveBeenMadeError";
  }
}

/** Options of one ask. */
export interface AskOptions {
  /**
   * A URL the service POSTs the run's end to (terminal event and done, signed per Standard
   * Webhooks), for a caller that does not hold the stream; it must be under a prefix the operator
   * allows, or the ask is a 400 and makes no ticket. status(ticket).webhook says how delivery goes.
   * As the Go client's AskOptions.Webhook.
   */
  webhook?: string;
}

/** Options of one event stream. */
export interface EventsOptions {
  /** Resume after this seq; 0 (the default) starts at the first event. */
  after?: number;
  /** Ends the stream (and any wait between reconnects). It does not cancel the run. */
  signal?: AbortSignal;
  /** Called before every connection, with the Last-Event-ID it will send ("" for none). */
  onConnect?: (attempt: number, lastEventId: string) => void;
}

/**
 * Whether a refused event stream may be resumed: a 408, a 429, or a 5xx but 501 and 505 (which
 * say the server does not do what was asked, and will not at the next try either), as the Go client.
 */
const transient = (status: number) => status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);

/**
 * AskClient makes the service's calls as one identity. Safe to share; each call is independent.
 */
export class AskClient {
  /** The generated, typed client: every operation of the contract, for what this class does not wrap. */
  readonly api: Client<paths>;
  readonly #reconnect: Required<ReconnectOptions>;
  readonly #retry: Required<RetryOptions>;
  readonly #onRetry: (operation: string, attempt: number, cause: unknown) => void;
  readonly #idleTimeoutMs: number;
  readonly #maxEventSize: number;
  readonly #baseUrl: string;
  /** Whether the service has answered this client once: a refusal after that is a restart. */
  #reached = false;

  constructor(opts: AskClientOptions) {
    // A base URL that is not one would fail every request with fetch's TypeError, which reads as
    // a failed connection and was retried eight times: refuse it here, once.
    let parsed: URL | undefined;
    try {
      parsed = new URL(opts.baseUrl.replace(/\/+$/, ""));
    } catch {
      parsed = undefined;
    }
    if (!parsed || (parsed.protocol !== "http:" && parsed.protocol !== "https:")) {
      throw new TypeError(`AskClient: baseUrl ${JSON.stringify(redacted(opts.baseUrl))} is not an http or https URL`);
    }
    // The service's paths are joined to the base path: with a query or fragment there, they were
    // joined to that instead ("…/ask?k=1/v1/conversations"). Refused, as in Go and Python; the
    // message quotes what comes before it only (a query may hold a key).
    if (/[?#]/.test(opts.baseUrl)) {
      const before = opts.baseUrl.split(/[?#]/)[0] ?? "";
      throw new TypeError(`AskClient: baseUrl ${JSON.stringify(redacted(before))} must not carry a query or a fragment: the service's paths are joined to it`);
    }
    // A user name and password in baseUrl are not sent (the bearer is the credential, as in Go),
    // and fetch refuses a URL that holds them with a TypeError quoting it, password and all, which
    // was retried as a failed connection and told to onRetry (console.warn) eight times. Messages
    // show baseUrl with its password as "xxxxx", as the Go CLI.
    this.#baseUrl = redacted(parsed.href).replace(/\/+$/, "");
    parsed.username = "";
    parsed.password = "";
    const baseUrl = parsed.href.replace(/\/+$/, "");
    const headerTimeoutMs = opts.headerTimeoutMs ?? 15000;
    // No redirect is followed: the service answers none, and fetch would resend a 307's body (the
    // question) to wherever it points, another origin included. A redirect is an ApiError with
    // its status, as in the Go and Python clients.
    const given = opts.fetch ?? ((req: Request) => globalThis.fetch(req));
    const base = (req: Request) => given(new Request(req, { redirect: "manual" }));
    const fetch = headerTimeoutMs > 0 ? withHeaderTimeout(base, headerTimeoutMs) : base;
    this.api = createClient<paths>({ baseUrl, fetch });
    const token = opts.token;
    const bearer: Middleware = {
      async onRequest({ request }) {
        const t = typeof token === "function" ? await token() : token;
        checkBearer(t);
        request.headers.set("Authorization", `Bearer ${t}`);
        return request;
      },
    };
    this.api.use(bearer);
    this.#reconnect = {
      attempts: opts.reconnect?.attempts ?? 8,
      initialMs: opts.reconnect?.initialMs ?? 100,
      maxMs: opts.reconnect?.maxMs ?? 5000,
    };
    this.#retry = {
      attempts: opts.retry?.attempts ?? 8,
      initialMs: opts.retry?.initialMs ?? 250,
      maxMs: opts.retry?.maxMs ?? 5000,
      maxRetryAfterMs: (opts.retry?.maxRetryAfterMs ?? 0) > 0 ? opts.retry!.maxRetryAfterMs! : 60000,
    };
    this.#idleTimeoutMs = opts.idleTimeoutMs ?? 45000;
    this.#maxEventSize = opts.maxEventSize && opts.maxEventSize > 0 ? opts.maxEventSize : defaultMaxEventSize;
    this.#onRetry =
      opts.onRetry ?? ((op, attempt, cause) => console.warn(`ask ${op}: retrying (attempt ${attempt}): ${String(cause)}`));
  }

  /** Opens a conversation to ask within. Retried with one Idempotency-Key: a retry answers the same conversation. */
  async createConversation(): Promise<Conversation> {
    const key = idempotencyKey();
    return this.#retrying("createConversation", () =>
      this.api.POST("/v1/conversations", { params: { header: { "Idempotency-Key": key } }, body: {} }),
      { creates: true, key, names: "id" },
    );
  }

  /**
   * Asks a question in a conversation; the ticket arrives before any work runs. Retried with one
   * Idempotency-Key: a retry answers the same ticket, never a second ask.
   */
  async ask(conversationId: string, question: string, opts: AskOptions = {}): Promise<Ticket> {
    const key = idempotencyKey();
    const body: Schemas["AskRequest"] = { question, ...(opts.webhook ? { webhook: { url: opts.webhook } } : {}) };
    return this.#retrying("createAsk", () =>
      this.api.POST("/v1/conversations/{conversation_id}/asks", {
        params: { path: { conversation_id: conversationId }, header: { "Idempotency-Key": key } },
        body,
      }),
      { creates: true, key, conversationId, names: "ticket" },
    );
  }

  /** A ticket's state, and its outcome once there is one. waitSeconds long-polls (at most 60). */
  async status(ticket: string, waitSeconds?: number): Promise<AskStatus> {
    return this.#retrying("getAsk", () =>
      this.api.GET("/v1/asks/{ticket}", {
        params: { path: { ticket }, header: waitSeconds ? { Prefer: `wait=${waitSeconds}` } : {} },
      }),
      { creates: false, names: "ticket" },
    );
  }

  /** Cancels a run. Idempotent; after done it changes nothing. */
  async cancel(ticket: string): Promise<CancelAccepted> {
    return this.#retrying("cancelAsk", () => this.api.POST("/v1/asks/{ticket}/cancel", { params: { path: { ticket } } }), {
      creates: false,
      names: "ticket",
    });
  }

  /**
   * Makes a call until it succeeds, is refused for good, or runs out of attempts (see
   * RetryOptions). A create that fails for good after an attempt whose reply was lost throws a
   * MayHaveBeenMadeError: the service may have acted on that attempt.
   */
  async #retrying<T>(
    op: string,
    call: () => Promise<{ data?: T; error?: unknown; response: Response }>,
    create?: { creates: boolean; key?: string; conversationId?: string; names?: string },
  ): Promise<T> {
    let lost = false;
    const trace = create?.creates && create.key ? new SendTrace(create.key) : undefined;
    try {
      return await this.#attempts(op, call, () => {
        lost = true;
      }, create?.names, trace);
    } catch (err) {
      if (lost && create?.creates) throw new MayHaveBeenMadeError(op, err, create.conversationId);
      throw err;
    } finally {
      trace?.close();
    }
  }

  async #attempts<T>(
    op: string,
    call: () => Promise<{ data?: T; error?: unknown; response: Response }>,
    replyLost: () => void,
    names?: string,
    trace?: SendTrace,
  ): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      let cause: unknown;
      let floorMs = 0;
      trace?.attempt();
      try {
        const { data, error, response } = await call();
        this.#reached = true;
        if (response.ok && (typeof data !== "object" || data === null || Array.isArray(data))) {
          throw new ProtocolError(`${op}: the response (HTTP ${response.status}) is not the service's JSON; is ${this.#baseUrl} the ask service?`);
        }
        // A success that names nothing (a 202 `{}`, a conversation where a ticket belongs) is not
        // the operation's reply: a ticket whose id is undefined would be followed nowhere.
        if (response.ok && names) {
          const id = (data as Record<string, unknown>)[names];
          if (typeof id !== "string" || id === "") {
            throw new ProtocolError(`${op}: the response (HTTP ${response.status}) names no ${names}; is ${this.#baseUrl} the ask service?`);
          }
        }
        if (data !== undefined && response.ok) return data;
        const problem = error as Partial<Problem> | undefined;
        const apiErr = new ApiError(op, response.status, problem, retryAfterMs(response.headers.get("Retry-After")));
        const busy = response.status === 409 && problem?.type === problemIdempotencyInProgress;
        if (!(response.status === 502 || response.status === 503 || response.status === 504 || busy)) throw apiErr;
        floorMs = apiErr.retryAfterMs;
        cause = apiErr;
      } catch (err) {
        if (err instanceof TokenError || err instanceof ProtocolError) throw err;
        // openapi-fetch parses a success's body as JSON: a SyntaxError is a whole body that is not
        // JSON (a cut one fails the read with a TypeError), the same at every attempt. Final.
        if (err instanceof SyntaxError) {
          throw new ProtocolError(`${op}: the response is not the service's JSON; is ${this.#baseUrl} the ask service?`, { cause: err });
        }
        if (err instanceof ApiError && err.status !== 502 && err.status !== 503 && err.status !== 504 &&
            !(err.status === 409 && err.problem?.type === problemIdempotencyInProgress)) throw err;
        this.#nothingListening(op, err);
        cause = err; // the connection failed, or no headers came in time
        if (trace ? trace.maySent(err) : maySent(err)) replyLost();
      }
      if (attempt >= this.#retry.attempts) throw cause;
      // Asked to come back later than a call waits (an hour; or 10^12 s, which setTimeout took for
      // 1 ms and retried at once): the refusal, with its Retry-After, is the answer.
      if (floorMs > this.#retry.maxRetryAfterMs) throw cause;
      this.#onRetry(op, attempt + 1, cause);
      const base = Math.min(this.#retry.initialMs * 2 ** (attempt - 1), this.#retry.maxMs);
      await sleep(Math.max(Math.random() * base, floorMs));
    }
  }

  /**
   * A connection refused (or a host name that does not exist) before the service has ever
   * answered this client is final: nothing listens at the URL, and the caller hears so at once,
   * not after a round of retries. Once the service has answered, a refusal is a restart in
   * progress and is retried. As the Go client.
   */
  #nothingListening(op: string, err: unknown): void {
    if (this.#reached) return;
    const code = errorCode(err);
    if (code !== "ECONNREFUSED" && code !== "ENOTFOUND") return;
    const cause = (err as { cause?: { message?: string } }).cause;
    const said = code === "ENOTFOUND" ? "no such host for" : "nothing is listening at";
    throw new Error(`${op}: ${said} ${this.#baseUrl}${cause?.message ? ` (${cause.message})` : ""}`, { cause: err });
  }

  /**
   * events yields a ticket's events in order, each once, until done.
   *
   * When the connection drops, fails transiently or stays silent beyond idleTimeoutMs it reconnects with Last-Event-ID after a
   * backoff, so the caller sees no gap and no duplicate; the budget of attempts is reset whenever
   * an event arrives; a refusal that may pass (408, 429, a 5xx but 501 and 505) is resumed the
   * same way, no sooner than its Retry-After. A 400, 401, 404 or other refusal is final and
   * thrown as an ApiError; a response that is not text/event-stream is final (StreamProtocolError);
   * a frame whose data is
   * not JSON, or JSON without a numeric seq and a type, or an outcome missing a field it must carry or holding one of another type, is final (SyntaxError); so is a line or an event beyond maxEventSize (FrameTooLargeError); so is running out of attempts. Breaking out of the loop closes the connection. It never cancels the run: a client
   * leaving on a person's behalf should call cancel.
   */
  async *events(ticket: string, opts: EventsOptions = {}): AsyncGenerator<Event> {
    let lastId = opts.after ? String(opts.after) : "";
    let lastSeq = opts.after ?? 0;
    let failures = 0;
    let retryMs = 0; // the server's retry: field, which holds until it sends another
    for (let connection = 0; ; connection++) {
      opts.signal?.throwIfAborted();
      opts.onConnect?.(connection, lastId);
      let cause: unknown;
      // A refusal's Retry-After is that refusal's: it raises the wait before the next connection
      // only, as in Go (it held for every reconnect after it, however the later ones ended).
      let floorMs = 0;
      let parser: SSEParser | undefined;
      try {
        const { response, error } = await this.api.GET("/v1/asks/{ticket}/events", {
          params: { path: { ticket }, header: lastId ? { "Last-Event-ID": lastId } : {} },
          headers: { Accept: "text/event-stream" },
          parseAs: "stream",
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        this.#reached = true;
        if (!response.ok) {
          const apiErr = new ApiError("streamEvents", response.status, error as Partial<Problem> | undefined, retryAfterMs(response.headers.get("Retry-After")));
          if (!transient(response.status)) throw apiErr;
          floorMs = apiErr.retryAfterMs;
          cause = apiErr;
        } else if ((response.headers.get("Content-Type") ?? "").split(";")[0]?.trim().toLowerCase() !== "text/event-stream") {
          // Not the contract's stream (a gateway's page, say): final, as in Go; a retry reads the same.
          throw new StreamProtocolError(`streamEvents: the response for ticket ${ticket} is not text/event-stream`);
        } else if (!response.body) {
          cause = new Error("streamEvents: no body");
        } else {
          parser = new SSEParser(lastId, this.#maxEventSize);
          const reading = { idleMs: this.#idleTimeoutMs, ...(opts.signal ? { signal: opts.signal } : {}) };
          for await (const frame of frames(response.body, parser, reading)) {
            lastId = frame.id;
            // The event is its data's `type`, never the frame's `event:` name, and a connection
            // failure is an exception, never an event: so the contract's terminal `event: error`
            // cannot be mistaken for a dropped connection (EventSource's `error`), nor the reverse.
            const ev = parseEvent(ticket, frame);
            if (ev.seq <= lastSeq) continue; // replayed: already delivered
            lastSeq = ev.seq;
            failures = 0;
            yield ev;
            if (ev.type === "done") return;
          }
          cause = new Error("streamEvents: the stream ended before done");
        }
      } catch (err) {
        // A refusal, a frame that is not JSON or too large (the service is not speaking this contract), or
        // the caller leaving: final. Anything else is the connection: resume.
        if (err instanceof ApiError || err instanceof TokenError || err instanceof SyntaxError || err instanceof StreamProtocolError || err instanceof FrameTooLargeError || opts.signal?.aborted) throw err;
        this.#nothingListening("streamEvents", err);
        cause = err;
      }
      // The server's retry counts however the connection ended: a reset or a stall as much as an end.
      if (parser?.retryMs !== undefined) retryMs = parser.retryMs;
      // The last event ID is the parser's, which an id without data sets too (WHATWG, and the Go
      // client): it was taken from delivered frames only, so such an id was not sent on resume.
      if (parser) lastId = parser.lastId;
      failures++;
      if (failures > this.#reconnect.attempts) {
        throw new Error(`streamEvents: no progress after ${this.#reconnect.attempts} reconnects`, { cause });
      }
      const base = Math.min(this.#reconnect.initialMs * 2 ** (failures - 1), this.#reconnect.maxMs);
      // Never silently, as a call's retry and the Go client: told to onRetry (default console.warn).
      this.#onRetry("streamEvents", failures + 1, cause);
      // The server's retry raises the wait, up to the cap: a server cannot park the client.
      await sleep(Math.min(Math.max(Math.random() * base, retryMs, floorMs), this.#reconnect.maxMs), opts.signal);
    }
  }

  /**
   * follow streams a ticket to its end and returns its outcome and done, calling onEvent for
   * every event on the way. missedSteps is how many of the run's tool calls (done.steps) this
   * stream did not deliver: step events are the only ones the service drops when a run's buffer
   * is full, and with `after` the steps at or before it count as missed (as the Go client's
   * Event.MissedSteps).
   */
  async follow(ticket: string, opts: EventsOptions & { onEvent?: (ev: Event) => void } = {}): Promise<{ outcome: Outcome; done: DoneEvent; missedSteps: number }> {
    let outcome: Outcome | undefined;
    let steps = 0;
    for await (const ev of this.events(ticket, opts)) {
      opts.onEvent?.(ev);
      if (isOutcome(ev)) outcome = ev;
      if (ev.type === "step") steps++;
      if (ev.type === "done") {
        if (!outcome) throw new Error(`ticket ${ticket}: done arrived without a terminal event`);
        return { outcome, done: ev, missedSteps: Math.max(0, ev.steps - steps) };
      }
    }
    throw new Error(`ticket ${ticket}: the stream ended without done`);
  }
}

/**
 * parseEvent reads a frame's data. A SyntaxError from JSON.parse quotes the text around the
 * fault (V8: `Unexpected token 'x', "…" is not valid JSON`), and the accepted event's data holds
 * the question, which must not reach an error message: that error is replaced by one that names
 * the frame only.
 */
function parseEvent(ticket: string, frame: { id: string; data: string }): Event {
  let ev: unknown;
  try {
    ev = JSON.parse(frame.data);
  } catch {
    throw new SyntaxError(`streamEvents: event ${frame.id || "(no id)"} of ticket ${ticket} is not JSON`);
  }
  // JSON but not an event (null, a number, a seq that is not a number): the cursor would be lost
  // (a missing seq disabled the skipping of replays) or the read would fail as if the connection
  // had, and be retried. Final, as any data that is not the contract's.
  const head = ev as { seq?: unknown; type?: unknown } | null;
  if (typeof head !== "object" || head === null || Array.isArray(head) || !Number.isSafeInteger(head.seq) || typeof head.type !== "string") {
    throw new SyntaxError(`streamEvents: event ${frame.id || "(no id)"} of ticket ${ticket} is JSON but not an event`);
  }
  // An event without what the types promise (an answer without text or caveats, a refusal whose
  // source is a number, a milestone without its subject) was handed on, and describeOutcome threw
  // a TypeError or said "undefined" (milestoneWords: 'Checking what "undefined" means').
  const fault = eventFault(head as Record<string, unknown>);
  if (fault) throw new SyntaxError(`streamEvents: ${head.type} event ${String(head.seq)} of ticket ${ticket} is not the contract's: ${fault}`);
  return ev as Event;
}

/**
 * retryAfterMs reads a Retry-After (delay-seconds or an HTTP date) in milliseconds; 0 when absent
 * or unreadable, never NaN (which would turn every later wait into none), and never beyond
 * Number.MAX_SAFE_INTEGER (a run of digits past a float's range read as Infinity). Only what opens
 * as an HTTP date does (with a day's name) is read as one: Date.parse reads "-5" as 2001 and
 * "3000-01-01" as a date a thousand years away, which Go's http.ParseTime refuses.
 */
function retryAfterMs(value: string | null): number {
  const v = (value ?? "").trim();
  if (/^[0-9]+$/.test(v)) return Math.min(Number(v) * 1000, Number.MAX_SAFE_INTEGER);
  if (!/^[A-Za-z]/.test(v)) return 0; // an HTTP date opens with its day's name
  const when = Date.parse(v);
  return Number.isNaN(when) ? 0 : Math.min(Math.max(0, when - Date.now()), Number.MAX_SAFE_INTEGER);
}

/**
 * redacted is a URL as this client shows it: its password, if any, replaced by "xxxxx" (as Go's
 * url.URL.Redacted); a string that does not parse has whatever sits between "//user:" and "@"
 * replaced.
 */
function redacted(url: string): string {
  try {
    const u = new URL(url);
    if (u.password === "") return url;
    u.password = "xxxxx";
    return u.href;
  } catch {
    return url.replace(/(\/\/[^/@:]*:)[^/]*@/, "$1xxxxx@");
  }
}

/**
 * maySent reports whether a request that failed with err may have reached the service: any
 * failure but one to connect (refused, no such host, a connect timeout), as in Go.
 */
function maySent(err: unknown): boolean {
  const code = errorCode(err);
  return !(code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "UND_ERR_CONNECT_TIMEOUT" ||
    code === "EHOSTUNREACH" || code === "ENETUNREACH");
}

/**
 * SendTrace tells whether a create's attempt left the client, as far as Node's fetch (undici)
 * says on diagnostics_channel: it publishes each request it makes ("undici:request:create") and
 * each whose headers it writes to a connection ("undici:client:sendHeaders"), found here by the
 * create's Idempotency-Key, fresh per create. An attempt it traced and never wrote (a connection
 * that never came, cut by the header timeout) cannot have made anything; one it did not trace (a
 * fetch of the caller's own) is judged by its error (maySent). As the Go client's trace.
 */
class SendTrace {
  #traced = false; // the fetch reports this attempt (Node's does)
  #wrote = false; // it wrote the request's headers, or began to
  readonly #created = (m: unknown) => {
    if (carries(m, this.key)) this.#traced = true;
  };
  readonly #sent = (m: unknown) => {
    if (carries(m, this.key)) this.#wrote = true;
  };

  constructor(readonly key: string) {
    subscribe("undici:request:create", this.#created);
    subscribe("undici:client:sendHeaders", this.#sent);
  }

  /** Starts an attempt. */
  attempt(): void {
    this.#traced = this.#wrote = false;
  }

  /** Whether the attempt that failed with err may have reached the service. */
  maySent(err: unknown): boolean {
    return this.#traced ? this.#wrote : maySent(err);
  }

  close(): void {
    unsubscribe("undici:request:create", this.#created);
    unsubscribe("undici:client:sendHeaders", this.#sent);
  }
}

/** carries reports whether an undici diagnostics message's request has the header value v. */
function carries(m: unknown, v: string): boolean {
  const headers = (m as { request?: { headers?: unknown } } | null)?.request?.headers;
  // an array of names and values (undici 6), or the raw "name: value\r\n" lines (undici 5)
  return Array.isArray(headers) ? headers.includes(v) : typeof headers === "string" && headers.includes(v);
}

/** errorCode is the system error code (ECONNREFUSED, …) under a failed fetch, if any. */
function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === "object" && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string") return code;
    const errors = (e as { errors?: unknown }).errors; // AggregateError: every address tried
    if (Array.isArray(errors) && errors.length > 0) return errorCode(errors[0]);
  }
  return undefined;
}

/** A fresh Idempotency-Key, as the IETF draft's Structured Field string. */
function idempotencyKey(): string {
  return `"${globalThis.crypto.randomUUID()}"`;
}

/** The wait a Prefer header asks the service to hold the call (wait=N), in milliseconds. */
function preferWaitMs(prefer: string | null): number {
  const m = /(?:^|,)\s*wait\s*=\s*"?(\d+)"?/i.exec(prefer ?? "");
  return m ? Number(m[1]) * 1000 : 0;
}

/**
 * withHeaderTimeout aborts a request whose response headers do not arrive within ms (plus any
 * Prefer wait). Once they have arrived nothing is bounded: a stream stays open as long as its run.
 */
function withHeaderTimeout(fetch: (req: Request) => Promise<Response>, ms: number): (req: Request) => Promise<Response> {
  return async (req: Request) => {
    const bound = ms + preferWaitMs(req.headers.get("Prefer"));
    const ctl = new AbortController();
    const follow = () => ctl.abort(req.signal.reason);
    if (req.signal.aborted) follow();
    else req.signal.addEventListener("abort", follow, { once: true });
    const timeout = new HeaderTimeoutError(bound);
    const inner = new Request(req, { signal: ctl.signal });
    // The bound rejects by itself rather than only through the signal: Node's fetch follows a
    // Request's signal through a weak reference, which a garbage collection can drop.
    const ended = new Promise<never>((_, reject) => {
      if (ctl.signal.aborted) reject(ctl.signal.reason);
      else ctl.signal.addEventListener("abort", () => reject(ctl.signal.reason), { once: true });
    });
    ended.catch(() => undefined);
    const timer = setTimeout(() => ctl.abort(timeout), bound);
    try {
      return await Promise.race([fetch(inner), ended]);
    } catch (err) {
      if (ctl.signal.reason === timeout) throw timeout;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  };
}

/** isOutcome tells the terminal events from the others. */
export function isOutcome(ev: Event): ev is Outcome {
  return ev.type === "answer" || ev.type === "abstention" || ev.type === "refusal" || ev.type === "error";
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

const isString = (v: unknown): boolean => typeof v === "string";
const isStrings = (v: unknown): boolean => Array.isArray(v) && v.every(isString);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const isObjects = (...fields: string[]) => (v: unknown): boolean => Array.isArray(v) && v.every((x) => isObject(x) && fields.every((f) => isString(x[f])));
const isHeadline = (v: unknown): boolean => isObject(v) && isString(v.label) && "value" in v;
const isResult = (v: unknown): boolean =>
  isObject(v) && isStrings(v.columns) && Array.isArray(v.rows) && v.rows.every((r) => Array.isArray(r)) && typeof v.truncated === "boolean";
const isDivergence = (v: unknown): boolean => isObject(v) && isStrings(v.without) && isResult(v.result) && (v.headline == null || isHeadline(v.headline));

/**
 * What an event must carry for a client to say it: per type, (field, required, check) for the
 * contract's required fields that describeOutcome, milestoneWords and Branches read, and the
 * optional ones they read (absent or null, or of their type). As the Python client.
 */
const eventFields: Record<string, [string, boolean, (v: unknown) => boolean][]> = {
  answer: [
    ["text", true, isString],
    ["caveats", true, isObjects("term", "text", "source")],
    ["provenance", true, isObjects("term", "statement", "source")],
    ["sql", true, isStrings],
    ["path", true, (v) => isObject(v) && isString(v.speed)],
    ["headline", false, isHeadline],
    ["result", false, isResult],
    ["divergence", false, isDivergence],
  ],
  abstention: [
    ["terms", true, isStrings],
    ["sources", false, isStrings],
    ["text", false, isString],
  ],
  refusal: [
    ["tool", true, isString],
    ["source", true, isString],
    ["reason", true, isString],
  ],
  error: [
    ["kind", true, isString],
    ["message", true, isString],
  ],
  branch: [
    ["branch_id", true, isString],
    ["role", true, isString],
    ["state", true, isString],
    ["source", false, isString],
  ],
  milestone: [
    ["phase", true, isString],
    ["subject", true, isString],
    ["source", true, isString],
    ["branch_id", false, isString],
  ],
};

/** eventFault says which field of an event is not the contract's (missing, or of another type), never its value; undefined when none is, and for a type eventFields does not name. */
function eventFault(ev: Record<string, unknown>): string | undefined {
  for (const [field, required, ok] of eventFields[String(ev.type)] ?? []) {
    const v = ev[field];
    if (v === undefined || v === null) {
      if (required) return `the field ${field} is missing`;
    } else if (!ok(v)) {
      return `the field ${field} is not of the contract's type`;
    }
  }
  return undefined;
}
