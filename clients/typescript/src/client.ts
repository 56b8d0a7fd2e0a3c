// The ask service's TypeScript client: typed calls through openapi-fetch over the types that
// openapi-typescript generates from openapi/ask.openapi.yaml (src/schema.d.ts), and an event
// stream reader that sends the bearer (the browser's EventSource cannot) and resumes a dropped
// connection with Last-Event-ID, so its caller sees every event once, in order.

import createClient, { type Client, type Middleware } from "openapi-fetch";
import type { components, paths } from "./schema.js";
import { SSEParser, frames } from "./sse.js";

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

export interface AskClientOptions {
  /** The service root including its base path, e.g. http://127.0.0.1:8080/ask. */
  baseUrl: string;
  /** The caller's bearer. The same token is what every source sees for this user. */
  token: TokenSource;
  /** Replaces globalThis.fetch (for tests and proxies). */
  fetch?: (input: Request) => Promise<Response>;
  reconnect?: ReconnectOptions;
}

/** A refusal of a call by the service: its HTTP status and RFC 9457 problem. */
export class ApiError extends Error {
  constructor(
    readonly operation: string,
    readonly status: number,
    readonly problem: Partial<Problem> | undefined,
  ) {
    super(`${operation}: ${status}${problem?.title ? ` ${problem.title}` : ""}${problem?.detail ? `: ${problem.detail}` : ""}`);
    this.name = "ApiError";
  }
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

const transient = (status: number) => status === 429 || status === 502 || status === 503 || status === 504;

/**
 * AskClient makes the service's calls as one identity. Safe to share; each call is independent.
 */
export class AskClient {
  /** The generated, typed client: every operation of the contract, for what this class does not wrap. */
  readonly api: Client<paths>;
  readonly #reconnect: Required<ReconnectOptions>;

  constructor(opts: AskClientOptions) {
    const baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.api = createClient<paths>({ baseUrl, ...(opts.fetch ? { fetch: opts.fetch } : {}) });
    const token = opts.token;
    const bearer: Middleware = {
      async onRequest({ request }) {
        const t = typeof token === "function" ? await token() : token;
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
  }

  /** Opens a conversation to ask within. */
  async createConversation(): Promise<Conversation> {
    const { data, error, response } = await this.api.POST("/v1/conversations", { body: {} });
    if (!data) throw new ApiError("createConversation", response.status, error);
    return data;
  }

  /** Asks a question in a conversation; the ticket arrives before any work runs. */
  async ask(conversationId: string, question: string): Promise<Ticket> {
    const { data, error, response } = await this.api.POST("/v1/conversations/{conversation_id}/asks", {
      params: { path: { conversation_id: conversationId } },
      body: { question },
    });
    if (!data) throw new ApiError("createAsk", response.status, error);
    return data;
  }

  /** A ticket's state, and its outcome once there is one. waitSeconds long-polls (at most 60). */
  async status(ticket: string, waitSeconds?: number): Promise<AskStatus> {
    const { data, error, response } = await this.api.GET("/v1/asks/{ticket}", {
      params: { path: { ticket }, header: waitSeconds ? { Prefer: `wait=${waitSeconds}` } : {} },
    });
    if (!data) throw new ApiError("getAsk", response.status, error);
    return data;
  }

  /** Cancels a run. Idempotent; after done it changes nothing. */
  async cancel(ticket: string): Promise<CancelAccepted> {
    const { data, error, response } = await this.api.POST("/v1/asks/{ticket}/cancel", { params: { path: { ticket } } });
    if (!data) throw new ApiError("cancelAsk", response.status, error);
    return data;
  }

  /**
   * events yields a ticket's events in order, each once, until done.
   *
   * When the connection drops or fails transiently it reconnects with Last-Event-ID after a
   * backoff, so the caller sees no gap and no duplicate; the budget of attempts is reset whenever
   * an event arrives. A 400, 401 or 404 is final and thrown as an ApiError; a frame whose data is
   * not JSON is final (SyntaxError); so is running out of attempts. Breaking out of the loop closes the connection. It never cancels the run: a client
   * leaving on a person's behalf should call cancel.
   */
  async *events(ticket: string, opts: EventsOptions = {}): AsyncGenerator<Event> {
    let lastId = opts.after ? String(opts.after) : "";
    let lastSeq = opts.after ?? 0;
    let failures = 0;
    let retryMs = 0;
    for (let connection = 0; ; connection++) {
      opts.signal?.throwIfAborted();
      opts.onConnect?.(connection, lastId);
      let cause: unknown;
      try {
        const { response, error } = await this.api.GET("/v1/asks/{ticket}/events", {
          params: { path: { ticket }, header: lastId ? { "Last-Event-ID": lastId } : {} },
          headers: { Accept: "text/event-stream" },
          parseAs: "stream",
          ...(opts.signal ? { signal: opts.signal } : {}),
        });
        if (!response.ok) {
          const apiErr = new ApiError("streamEvents", response.status, error as Partial<Problem> | undefined);
          if (!transient(response.status)) throw apiErr;
          retryMs = Math.max(retryMs, Number(response.headers.get("Retry-After") ?? "0") * 1000);
          cause = apiErr;
        } else if (!response.body) {
          cause = new Error("streamEvents: no body");
        } else {
          const parser = new SSEParser(lastId);
          for await (const frame of frames(response.body, parser)) {
            lastId = frame.id;
            // The event is its data's `type`, never the frame's `event:` name, and a connection
            // failure is an exception, never an event: so the contract's terminal `event: error`
            // cannot be mistaken for a dropped connection (EventSource's `error`), nor the reverse.
            const ev = JSON.parse(frame.data) as Event;
            if (ev.seq <= lastSeq) continue; // replayed: already delivered
            lastSeq = ev.seq;
            failures = 0;
            yield ev;
            if (ev.type === "done") return;
          }
          if (parser.retryMs !== undefined) retryMs = parser.retryMs;
          cause = new Error("streamEvents: the stream ended before done");
        }
      } catch (err) {
        // A refusal, a frame that is not JSON (the service is not speaking this contract), or
        // the caller leaving: final. Anything else is the connection: resume.
        if (err instanceof ApiError || err instanceof SyntaxError || opts.signal?.aborted) throw err;
        cause = err;
      }
      failures++;
      if (failures > this.#reconnect.attempts) {
        throw new Error(`streamEvents: no progress after ${this.#reconnect.attempts} reconnects`, { cause });
      }
      const base = Math.min(this.#reconnect.initialMs * 2 ** (failures - 1), this.#reconnect.maxMs);
      // The server's retry raises the wait, up to the cap: a server cannot park the client.
      await sleep(Math.min(Math.max(Math.random() * base, retryMs), this.#reconnect.maxMs), opts.signal);
    }
  }

  /**
   * follow streams a ticket to its end and returns its outcome and done, calling onEvent for
   * every event on the way.
   */
  async follow(ticket: string, opts: EventsOptions & { onEvent?: (ev: Event) => void } = {}): Promise<{ outcome: Outcome; done: DoneEvent }> {
    let outcome: Outcome | undefined;
    for await (const ev of this.events(ticket, opts)) {
      opts.onEvent?.(ev);
      if (isOutcome(ev)) outcome = ev;
      if (ev.type === "done") {
        if (!outcome) throw new Error(`ticket ${ticket}: done arrived without a terminal event`);
        return { outcome, done: ev };
      }
    }
    throw new Error(`ticket ${ticket}: the stream ended without done`);
  }
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
