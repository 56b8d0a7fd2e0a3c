// The reference page for the ask service. Plain browser JavaScript, no build step, no
// dependencies. Everything the service says is rendered with textContent, never as HTML.
//
// What a client owes, and where this page pays it:
//   - milestones in its own words (milestoneWords); steps only for someone who opens "Show the work";
//   - refusal and abstention as what they are (renderRefusal, renderAbstention), never as an answer;
//   - every caveat shown (renderAnswer), and what the answer would have been without the catalog
//     (renderDivergence);
//   - a phase-2 run's branches collapsed, one line each, opened on request (addBranch);
//   - cancel when the person has gone (the Cancel button, and pagehide);
//   - latency is the service's business: the page only reports path.speed.
'use strict';

(() => {
  // The page is mounted at {base}/ui/; the API is at {base}/v1/... A user name and password in
  // the page's own address (http://user:password@host/ask/ui/) are dropped: the bearer is the
  // credential, and fetch refuses a URL that holds them, with a message that shows the password.
  const withoutCredentials = (u) => { u.username = ''; u.password = ''; return u; };
  const apiBase = withoutCredentials(new URL('..', document.baseURI));
  const uiBase = withoutCredentials(new URL('.', document.baseURI));

  const state = {
    token: '',
    oid: '',
    conversation: '', // the conversation id the next ask goes to
    running: null, // {ticket, controller, waits, turn, cancelled} while an ask runs
    // retake: {conversation, question, key} of an ask that may have been made (its reply was
    // lost): the same question asked again in that conversation reuses its Idempotency-Key.
    retake: null,
  };

  const $ = (id) => document.getElementById(id);

  // ---- the service ----------------------------------------------------------------------------

  // ProblemError is a refusal by the service; its message is the problem's detail and, for a 400,
  // its violations (`errors`), which say what to change. retryAfterMs is the Retry-After it asked
  // for (a 429, a 503), 0 when none.
  // ProtocolError: the stream carried something that is not the contract's (a frame whose data is
  // not a JSON event). Final, as in the Go, TypeScript and Python clients: a retry reads the same.
  // Its message names the frame's id, never its data (the accepted event's holds the question).
  class ProtocolError extends Error {}
  // UnreachableError is a call whose every attempt failed to connect (fetch's TypeError), told
  // apart from a TypeError of the page's own.
  class UnreachableError extends Error {}

  // MayHaveBeenMadeError: a create failed for good (or was cancelled) after an attempt whose reply
  // was lost, so the service may have made it all the same, as the Go client's ErrMayHaveBeenMade.
  // cause is what ended the call; key is its Idempotency-Key, which asking the same question again
  // in the same conversation reuses, so that the service answers with that ticket, if it made one,
  // instead of asking twice.
  class MayHaveBeenMadeError extends Error {
    constructor(cause, key) {
      super(cause && cause.message ? cause.message : String(cause));
      this.cause = cause;
      this.key = key;
    }
  }

  class ProblemError extends Error {
    constructor(status, problem, retryAfterMs) {
      const said = problem && (problem.detail || problem.title) ? (problem.detail || problem.title) : `HTTP ${status}`;
      const errors = problem && Array.isArray(problem.errors) && problem.errors.length > 0 ? ` (${problem.errors.join('; ')})` : '';
      super(said + errors);
      this.status = status;
      this.problem = problem || {};
      this.retryAfterMs = retryAfterMs || 0;
    }
  }

  function authHeaders(extra) {
    return Object.assign({ Authorization: `Bearer ${state.token}` }, extra || {});
  }

  // A call is retried as the Go client retries it: after a failed connection (fetch's
  // TypeError), a 502, 503 or 504, or the 409 of an earlier attempt with the same
  // Idempotency-Key still in progress; 8 attempts in all, backoff from 250 ms doubled per attempt
  // with full jitter, capped at 5 s, never shorter than Retry-After. A create carries an
  // Idempotency-Key, the same on every attempt, so a retry answers the same conversation or
  // ticket and never asks twice. A 429 is not retried: the person is told when to try again. Nor
  // is a Retry-After over MAX_RETRY_AFTER_MS waited for (the Go client's Retry.MaxRetryAfter): the
  // call ends at once with that refusal, which says when to try again; a wait of an hour behind a
  // "Working…" is worse than the refusal said now, and setTimeout fires at once for a wait beyond
  // 2^31-1 ms, which would spin through every attempt.
  // (A connection refused is retried too: the page came from this origin, so the service has
  // answered before, and a refusal is a restart.)
  const RETRY = { attempts: 8, initialMs: 250, maxMs: 5000 };
  const MAX_RETRY_AFTER_MS = 60000;
  const IDEMPOTENCY_IN_PROGRESS = 'urn:ask:problem:idempotency-key-in-progress';

  const retryable = (e) => [502, 503, 504].includes(e.status) ||
    (e.status === 409 && e.problem.type === IDEMPOTENCY_IN_PROGRESS);

  // idempotencyKey is a fresh key, as the IETF draft's Structured Field string. getRandomValues,
  // not randomUUID, which a page served over plain HTTP from a non-loopback host does not have.
  function idempotencyKey() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return `"${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}"`;
  }

  // HEADER_MS bounds the wait for a response's headers, on every call and every connection of
  // the stream, as the Go and TypeScript clients' 15 s header timeout: a service or gateway that
  // accepts the connection and then says nothing would otherwise hold the page "Working…" for ever.
  const HEADER_MS = 15000;

  // fetchWithin is fetch whose response headers must come within HEADER_MS: past it the request
  // is abandoned and fails as a failed connection does (a TypeError), so that a call is retried
  // and the stream resumed. signal, when given, ends the request and then its body (the person
  // has gone); the body itself is not bounded here (the stream's reads are, by IDLE_MS).
  async function fetchWithin(url, init, signal) {
    const ctl = new AbortController();
    const leave = () => ctl.abort(signal.reason);
    if (signal) {
      if (signal.aborted) leave();
      else signal.addEventListener('abort', leave, { once: true });
    }
    let late = false;
    const timer = setTimeout(() => { late = true; ctl.abort(); }, HEADER_MS);
    try {
      return await fetch(url, Object.assign({}, init, { signal: ctl.signal }));
    } catch (e) {
      if (late && !(signal && signal.aborted)) throw new TypeError(`no response within ${HEADER_MS / 1000} s`);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  // call makes one of the service's calls, retried as above; signal ends the waits between
  // attempts (the person cancelled or signed out), and onWait(cause, ms) hears of each wait. Every
  // attempt carries the bearer of the person who made the call: a cancel sent as they sign out is
  // retried as theirs, not with the empty bearer (or the next person's) the page holds by then.
  // A create (key: its Idempotency-Key, fresh when not given) answers the service's JSON object or
  // fails: a success that is not one (a sign-in page, a proxy's) is a final ProtocolError. A
  // create that fails after an attempt that failed in a way a lost reply explains (the connection,
  // a 502, 503 or 504, the 409 of its key in progress) fails with a MayHaveBeenMadeError. Unlike the Go
  // client, the page cannot tell a lost reply from a request that never left: fetch says neither,
  // and Chromium resends by itself, unseen, a request whose reused connection fails before any reply.
  async function call(method, path, body, { create = false, key, signal, onWait } = {}) {
    const headers = body === undefined ? { Accept: 'application/json' }
      : { Accept: 'application/json', 'Content-Type': 'application/json' };
    if (create) headers['Idempotency-Key'] = key || idempotencyKey();
    headers.Authorization = `Bearer ${state.token}`;
    let lost = false;
    const fail = (e) => (lost ? new MayHaveBeenMadeError(e, headers['Idempotency-Key']) : e);
    for (let attempt = 1; ; attempt++) {
      if (signal && signal.aborted) throw fail(signal.reason);
      let cause;
      let floorMs = 0;
      try {
        const resp = await fetchWithin(new URL(path, apiBase), {
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          cache: 'no-store',
        });
        const text = await resp.text();
        let json = null;
        try { json = text ? JSON.parse(text) : null; } catch { json = null; }
        if (resp.ok) {
          if (create && (json === null || typeof json !== 'object' || Array.isArray(json))) {
            throw fail(new ProtocolError(`The reply to ${method} ${path} (HTTP ${resp.status}, ${resp.headers.get('Content-Type') || 'no type'}) `
              + 'is not the service’s JSON: a sign-in page or a proxy may have answered in its place.'));
          }
          return json;
        }
        cause = new ProblemError(resp.status, json, retryAfterMs(resp.headers.get('Retry-After')));
        if (retryable(cause)) lost = lost || create;
        if (!retryable(cause) || cause.retryAfterMs > MAX_RETRY_AFTER_MS) throw fail(cause);
        floorMs = cause.retryAfterMs;
      } catch (e) {
        if (!(e instanceof TypeError)) throw e; // a refusal, or the person leaving
        cause = e; // the connection failed, perhaps once the request had reached the service
        lost = lost || create;
      }
      if (attempt >= RETRY.attempts) throw fail(cause instanceof TypeError ? new UnreachableError(cause.message) : cause);
      const wait = Math.max(Math.random() * Math.min(RETRY.initialMs * 2 ** (attempt - 1), RETRY.maxMs), floorMs);
      console.warn(`ask: ${method} ${path}: retrying (attempt ${attempt + 1}) in ${Math.round(wait)} ms: ${cause.message}`);
      if (onWait) onWait(cause, wait);
      try {
        await sleep(wait, signal);
      } catch (e) {
        throw fail(e);
      }
    }
  }

  // The creates check that the reply names what was made: a 201 or 202 of `{}` (a proxy's, or a
  // broken service's) would have the page ask in conversation "undefined" and say that it expired,
  // or follow ticket "undefined".
  async function createConversation(signal, onWait) {
    const conv = await call('POST', 'v1/conversations', {}, { create: true, signal, onWait });
    if (typeof conv.id !== 'string' || conv.id === '') {
      throw new ProtocolError('The reply to creating a conversation names none: a sign-in page or a proxy may have answered in the service’s place.');
    }
    return conv;
  }

  async function createAsk(cid, question, { key, signal, onWait } = {}) {
    const ticket = await call('POST', `v1/conversations/${encodeURIComponent(cid)}/asks`, { question }, { create: true, key, signal, onWait });
    if (typeof ticket.ticket !== 'string' || ticket.ticket === '') {
      throw new ProtocolError('The reply to the question names no ticket, so the page cannot follow it: a sign-in page or a proxy may have answered in the service’s place.');
    }
    return ticket;
  }
  const cancelAsk = (ticket) => call('POST', `v1/asks/${encodeURIComponent(ticket)}/cancel`);

  // ---- Server-Sent Events over fetch ------------------------------------------------------------
  // EventSource cannot send a bearer, so the stream is read with fetch. The parser follows the
  // WHATWG event stream rules: CRLF, LF or CR line ends, comments, multi-line data, the last
  // event ID persisting across frames.

  // MAX_EVENT_SIZE bounds one line and one event's data, in bytes of UTF-8 as on the wire (the Go
  // client's 16 MiB, as the TypeScript and Python clients count it): beyond it the stream is a
  // ProtocolError rather than memory without end. It was counted in UTF-16 code units, so data of
  // "é" or "€" passed at twice or three times the bound.
  const MAX_EVENT_SIZE = 16 << 20;

  // MAX_QUESTION is the contract's bound on a question (createAsk's maxLength), in characters.
  const MAX_QUESTION = 4000;

  // utf8Length is the length of s in UTF-8, what it was on the wire (a byte that was not UTF-8 is
  // counted as its U+FFFD, 3 bytes), as the TypeScript client's.
  function utf8Length(s) {
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

  class SSEParser {
    // lastId is the last event ID carried over from an earlier connection of the same stream.
    constructor(lastId = '') { this.partial = []; this.partialLen = 0; this.cr = false; this.data = []; this.dataLen = 0; this.type = ''; this.id = null; this.lastId = lastId; }

    // push takes decoded text and returns the frames it completed. Each piece is scanned once, so
    // a large event (a result of many rows) costs its length, not its length squared.
    push(text) {
      const frames = [];
      let pos = 0;
      if (this.cr && text.length > 0) {
        this.cr = false;
        if (text.charCodeAt(0) === 0x0a) pos = 1; // the LF of a CRLF split across pieces
      }
      const eol = /\r\n|\r|\n/g;
      for (;;) {
        eol.lastIndex = pos;
        const m = eol.exec(text);
        if (!m) break;
        let line = text.slice(pos, m.index);
        if (this.partial.length) {
          this.grow(utf8Length(line));
          line = this.partial.join('') + line;
          this.partial = []; this.partialLen = 0;
        } else if (utf8Length(line) > MAX_EVENT_SIZE) {
          throw this.tooLarge();
        }
        pos = m.index + m[0].length;
        if (m[0] === '\r' && pos === text.length) this.cr = true;
        const f = this.line(line);
        if (f) frames.push(f);
      }
      if (pos < text.length) {
        const rest = text.slice(pos);
        this.grow(utf8Length(rest));
        this.partial.push(rest);
      }
      return frames;
    }

    grow(n) {
      this.partialLen += n;
      if (this.partialLen > MAX_EVENT_SIZE) throw this.tooLarge();
    }

    tooLarge() {
      return new ProtocolError(`The stream sent an event larger than ${MAX_EVENT_SIZE} bytes: the page stopped following this question.`);
    }

    line(line) {
      if (line === '') {
        if (this.id !== null) this.lastId = this.id;
        this.id = null;
        const f = this.data.length ? { id: this.lastId, type: this.type || 'message', data: this.data.join('\n') } : null;
        this.data = []; this.dataLen = 0; this.type = '';
        return f;
      }
      if (line.startsWith(':')) return null; // a comment: keep-alive
      const i = line.indexOf(':');
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? '' : line.slice(i + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') {
        this.dataLen += utf8Length(value) + 1; // the data is its lines joined by '\n': over the bound when this passes it + 1
        if (this.dataLen > MAX_EVENT_SIZE + 1) throw this.tooLarge();
        this.data.push(value);
      }
      else if (field === 'event') this.type = value;
      else if (field === 'id' && !value.includes('\0')) this.id = value;
      else if (field === 'retry' && /^[0-9]+$/.test(value)) this.retryMs = Number(value);
      return null;
    }
  }

  const sleep = (ms, signal) => new Promise((resolve, reject) => {
    if (signal && signal.aborted) { reject(signal.reason); return; }
    const t = setTimeout(resolve, Math.min(Math.max(ms, 0), 2 ** 31 - 1)); // beyond, it fires at once
    if (signal) signal.addEventListener('abort', () => { clearTimeout(t); reject(signal.reason); }, { once: true });
  });

  // IDLE_MS: a stream silent this long (not a byte, not even the service's keep-alive, sent every
  // 10 s by default) is a dead connection, a half-open socket or a frozen gateway, and is resumed.
  const IDLE_MS = 45000;
  // MAX_WAIT_MS caps every wait between two connections: the server's retry: and Retry-After raise
  // the backoff up to it, never beyond.
  const MAX_WAIT_MS = 5000;

  // read is one read of the stream, which fails when nothing arrives within IDLE_MS.
  function read(reader) {
    let timer;
    const silent = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error('the event stream went silent')), IDLE_MS);
    });
    return Promise.race([reader.read(), silent]).finally(() => clearTimeout(timer));
  }

  // retryAfterMs reads a Retry-After (seconds or an HTTP date); 0 when absent or unreadable.
  function retryAfterMs(value) {
    const v = (value || '').trim();
    if (/^[0-9]+$/.test(v)) return Number(v) * 1000;
    const when = Date.parse(v);
    return Number.isNaN(when) ? 0 : Math.max(0, when - Date.now());
  }

  // resumable: a refusal of the stream that may pass, as the Go client: a 408, a 429, or a 5xx
  // but 501 and 505 (which say the server does not do what was asked).
  const resumable = (status) => status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);

  // follow yields a ticket's events in order, each once, until done. A dropped or stalled
  // connection is resumed with Last-Event-ID after a short backoff, which the server's retry: and
  // a resumable refusal's Retry-After raise (up to MAX_WAIT_MS); any other refusal of the stream
  // itself (401, 404, 400) is final and thrown, and so is a success that is not an event stream
  // (a sign-in page or a proxy's, which would otherwise read as a stream that ends at once).
  async function* follow(ticket, signal) {
    let lastId = '';
    let lastSeq = 0;
    let failures = 0;
    let retryMs = 0; // the server's retry: field, which holds until it sends another
    for (;;) {
      let resp = null;
      let cause = 'the stream ended before its last event';
      // A refusal's Retry-After is that refusal's: it raises the wait before the next connection
      // only, as in Go (it held for every reconnect after it).
      let floorMs = 0;
      try {
        const headers = authHeaders({ Accept: 'text/event-stream' });
        if (lastId) headers['Last-Event-ID'] = lastId;
        resp = await fetchWithin(new URL(`v1/asks/${encodeURIComponent(ticket)}/events`, apiBase), { headers, cache: 'no-store' }, signal);
      } catch (e) {
        if (signal.aborted) throw e;
        cause = e.message;
      }
      if (resp && !resp.ok) {
        let problem = null;
        try { problem = await resp.json(); } catch { problem = null; }
        const err = new ProblemError(resp.status, problem, retryAfterMs(resp.headers.get('Retry-After')));
        if (!resumable(resp.status)) throw err;
        floorMs = err.retryAfterMs;
        cause = `HTTP ${resp.status}: ${err.message}`;
      }
      if (resp && resp.ok && !/^text\/event-stream\s*(;|$)/i.test(resp.headers.get('Content-Type') || '')) {
        resp.body?.cancel().catch(() => {});
        throw new ProtocolError(`The reply to the event stream (HTTP ${resp.status}, ${resp.headers.get('Content-Type') || 'no type'}) is not an event stream: `
          + 'a sign-in page or a proxy may have answered in the service’s place. The page stopped following this question.');
      }
      if (resp && resp.ok) {
        const parser = new SSEParser(lastId);
        const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { value, done } = await read(reader);
            if (done) break;
            for (const frame of parser.push(value)) {
              // The event is its data's type, never the frame's `event:` name, and a failed
              // connection is an exception below, never an event: the contract's terminal
              // `event: error` and a dropped connection (EventSource's `error`) cannot be confused.
              let ev = null;
              try { ev = JSON.parse(frame.data); } catch { ev = null; }
              if (!ev || typeof ev !== 'object' || typeof ev.seq !== 'number' || typeof ev.type !== 'string') {
                throw new ProtocolError(`Event ${frame.id || '(no id)'} of the stream is not one the service's contract allows: the page stopped following this question.`);
              }
              if (ev.seq <= lastSeq) continue; // already seen
              // An outcome, branch or milestone without what the contract promises was rendered
              // with "undefined" (an answer without text, an error without kind said as "Something
              // went wrong: undefined") or broke the rendering: final, as in the Go, TypeScript and
              // Python clients, naming its type, seq and field, never a value.
              const fault = eventFault(ev);
              if (fault) {
                throw new ProtocolError(`The ${ev.type} event ${ev.seq} of the stream is not one the service's contract allows (${fault}): the page stopped following this question.`);
              }
              lastSeq = ev.seq;
              failures = 0;
              yield ev;
              if (ev.type === 'done') return;
            }
          }
        } catch (e) {
          if (signal.aborted || e instanceof ProtocolError) throw e;
          cause = e.message;
        } finally {
          reader.cancel().catch(() => {});
          if (parser.retryMs !== undefined) retryMs = parser.retryMs;
          // The parser's last event ID, which an event with an id and no data sets too (WHATWG, as
          // the Go client): it was taken from dispatched frames only, so such an id was not sent.
          lastId = parser.lastId;
        }
      }
      failures++;
      if (failures > 8) throw new Error('the event stream could not be resumed');
      const backoff = Math.min(250 * 2 ** failures, MAX_WAIT_MS) * Math.random() + 100;
      const wait = Math.min(Math.max(backoff, retryMs, floorMs), MAX_WAIT_MS);
      // Never silently, as a call's retry: the console says why the stream paused.
      console.warn(`ask: the event stream: reconnecting (attempt ${failures + 1}) in ${Math.round(wait)} ms: ${cause}`);
      await sleep(wait, signal);
    }
  }

  // What an event must carry for the page to say it: per type, [field, required, check] for the
  // contract's required fields, and the optional ones it reads (absent or null, or of their
  // type). The TypeScript and Python clients' rules (eventFields, _EVENT_FIELDS), a refusal's
  // call_id and a provenance's kind, which the page says too, and the step and done fields it shows.
  const isString = (v) => typeof v === 'string';
  const isNumber = (v) => typeof v === 'number' && Number.isFinite(v);
  const isBool = (v) => typeof v === 'boolean';
  const isStrings = (v) => Array.isArray(v) && v.every(isString);
  const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
  const isObjects = (...fields) => (v) => Array.isArray(v) && v.every((x) => isObject(x) && fields.every((f) => isString(x[f])));
  const isHeadline = (v) => isObject(v) && isString(v.label) && 'value' in v;
  const isResult = (v) => isObject(v) && isStrings(v.columns) && Array.isArray(v.rows) && v.rows.every((r) => Array.isArray(r)) && typeof v.truncated === 'boolean';
  const isDivergence = (v) => isObject(v) && isStrings(v.without) && isResult(v.result) && (v.headline == null || isHeadline(v.headline));
  const eventFields = {
    answer: [['text', true, isString], ['caveats', true, isObjects('term', 'text', 'source')],
      ['provenance', true, isObjects('term', 'statement', 'source', 'kind')], ['sql', true, isStrings],
      ['path', true, (v) => isObject(v) && isString(v.speed)],
      ['headline', false, isHeadline], ['result', false, isResult], ['divergence', false, isDivergence]],
    abstention: [['terms', true, isStrings], ['sources', false, isStrings], ['text', false, isString]],
    refusal: [['tool', true, isString], ['source', true, isString], ['call_id', true, isString], ['reason', true, isString]],
    error: [['kind', true, isString], ['message', true, isString]],
    branch: [['branch_id', true, isString], ['role', true, isString], ['state', true, isString], ['source', false, isString]],
    milestone: [['phase', true, isString], ['subject', true, isString], ['source', true, isString], ['branch_id', false, isString]],
    // The page also says every step and the done line, so it checks what it shows of them.
    step: [['call_id', true, isString], ['tool', true, isString], ['source', true, isString], ['ms', true, isNumber],
      ['refused', true, isBool], ['branch_id', false, isString]],
    done: [['outcome', true, isString], ['steps', true, isNumber], ['model_calls', true, isNumber],
      ['input_tokens', true, isNumber], ['output_tokens', true, isNumber], ['elapsed_ms', true, isNumber]],
  };

  // eventFault says which field of an event is not the contract's, never its value; '' when none
  // is, and for a type eventFields does not name.
  function eventFault(ev) {
    for (const [field, required, ok] of eventFields[ev.type] || []) {
      const v = ev[field];
      if (v === undefined || v === null) {
        if (required) return `the field ${field} is missing`;
      } else if (!ok(v)) {
        return `the field ${field} is not of the contract's type`;
      }
    }
    return '';
  }

  // ---- the page's own words ---------------------------------------------------------------------

  function milestoneWords(m) {
    const subject = m.subject || '';
    switch (m.phase) {
      // "catalog", "tables" and "query" are the service's placeholders when it can name no term
      // or table (the contract's MilestoneBody.subject): said as progress without a subject.
      case 'grounding':
        return subject === '' || subject === 'catalog' ? 'Looking in the catalog' : `Checking what “${subject}” means in the catalog`;
      case 'discovering':
        return subject === 'tables' ? 'Seeing which tables there are' : `Reading how the ${subject} table is laid out`;
      case 'querying':
        return subject === '' || subject === 'query' ? `Querying the ${m.source} data` : `Querying ${subject}`;
      case 'reconciling':
        // The subject is the terms or tables reconciled, or "sources" when there are none.
        return subject === '' || subject === 'sources' ? 'Combining what the sources found' : `Combining what the sources found on ${subject}`;
      default:
        return `Working on ${subject}`;
    }
  }

  function errorWords(e) {
    switch (e.kind) {
      case 'cancelled': return 'Cancelled. Nothing more will run for this question.';
      case 'timeout': return 'This took too long and was stopped.';
      case 'transport': return `A source could not be reached or did not accept your sign-in: ${e.message}`;
      case 'model': return `The model failed: ${e.message}`;
      case 'shutdown': return 'The service was stopping and ended this question.';
      case 'interrupted': return 'The server running this question stopped before it finished.';
      default: return `Something went wrong: ${e.message}`;
    }
  }

  // ---- rendering --------------------------------------------------------------------------------

  // shown returns text as the page may put it on screen: a Unicode control of bidirectional text
  // (an override, an embedding, an isolate, a mark) is shown as its escape (\u202e), as the Go
  // and Python CLIs show it, rather than obeyed. What the service says comes from a model and from
  // sources, which data can steer, and an override reorders what is read beyond its own words: a
  // figure 0001 read as 1000, a caveat's term turning the caveat and the page's words after it
  // backwards.
  const bidiControls = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function shown(text) {
    return String(text).replace(bidiControls, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  }

  function textNode(s) { return document.createTextNode(shown(s)); }

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = shown(v);
      else node.setAttribute(k, v);
    }
    for (const c of children) if (c) node.append(c);
    return node;
  }

  function cellText(v) {
    if (v === null || v === undefined) return '—';
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }

  function resultTable(result) {
    const table = el('table', { class: 'result' });
    const head = el('tr');
    for (const c of result.columns || []) head.append(el('th', { text: c, scope: 'col' }));
    table.append(el('thead', null, head));
    const body = el('tbody');
    for (const row of result.rows || []) {
      const tr = el('tr');
      for (const v of row) tr.append(el('td', { text: cellText(v) }));
      body.append(tr);
    }
    table.append(body);
    return table;
  }

  function renderAnswer(out, a) {
    out.className = 'outcome answer';
    out.append(el('h3', { text: 'Answer' }));
    if (a.headline) {
      out.append(el('p', { class: 'headline' },
        el('span', { class: 'figure', text: cellText(a.headline.value) }),
        el('span', { class: 'label', text: ` ${a.headline.label.replaceAll('_', ' ')}` })));
    }
    out.append(el('p', { class: 'text', text: a.text }));
    if (a.result && (a.result.rows || []).length > 0 && !(a.headline && a.result.rows.length === 1)) {
      out.append(resultTable(a.result));
      if (a.result.truncated) out.append(el('p', { class: 'note', text: 'The source capped these rows; there are more.' }));
    }
    if ((a.caveats || []).length > 0) {
      const list = el('ul');
      for (const c of a.caveats) {
        list.append(el('li', null, el('strong', { text: `${c.term}: ` }), textNode(c.text),
          el('span', { class: 'source', text: ` (${c.source})` })));
      }
      out.append(el('section', { class: 'caveats' }, el('h4', { text: 'Keep in mind' }), list));
    }
    if ((a.provenance || []).length > 0) {
      const list = el('dl');
      for (const p of a.provenance) {
        list.append(el('dt', { text: p.term }));
        list.append(el('dd', null, textNode(p.statement),
          el('span', { class: 'source', text: ` — ${p.source}, ${p.kind.replaceAll('_', ' ')}` })));
      }
      out.append(el('section', { class: 'provenance' }, el('h4', { text: 'What this answer rests on' }), list));
    }
    if (a.divergence) renderDivergence(out, a.divergence);
    const path = a.path && a.path.speed === 'fast'
      ? 'Answered from the catalog alone: no data was queried.'
      : 'Answered by querying the data.';
    out.append(el('p', { class: 'path', text: path }));
    if ((a.sql || []).length > 0) {
      const sql = el('details', { class: 'sql' }, el('summary', { text: a.sql.length === 1 ? 'The query that ran' : `The ${a.sql.length} queries that ran` }));
      for (const s of a.sql) sql.append(el('pre', { text: s }));
      out.append(sql);
    }
  }

  // divergenceWords: what the answer would have been without the catalog's definitions.
  function divergenceWords(d) {
    const defs = d.without.length > 1 ? 'definitions' : 'definition';
    let what = 'a different result';
    const rows = (d.result && d.result.rows) || [];
    if (d.headline) what = `${cellText(d.headline.value)} (${d.headline.label.replaceAll('_', ' ')})`;
    else if (rows.length === 1) what = d.result.columns.map((c, i) => `${c.replaceAll('_', ' ')} ${cellText(rows[0][i])}`).join(', ');
    return `Without the catalog’s ${defs} of ${d.without.join(', ')}, the answer would have been ${what}.`;
  }

  function renderDivergence(out, d) {
    const section = el('section', { class: 'divergence' }, el('h4', { text: 'Without the catalog' }),
      el('p', { text: divergenceWords(d) }));
    if (!d.headline && ((d.result && d.result.rows) || []).length > 1) section.append(resultTable(d.result));
    if ((d.sql || []).length > 0) {
      const sql = el('details', { class: 'sql' }, el('summary', { text: 'The query without the catalog' }));
      for (const s of d.sql) sql.append(el('pre', { text: s }));
      section.append(sql);
    }
    out.append(section);
  }

  // renderAbstention says exactly what was tried (nothing, when no tool was called: never a lookup
  // that did not happen) and shows the agent's own words, such as a question back to the person.
  function renderAbstention(out, a) {
    out.className = 'outcome abstention';
    const terms = a.terms || [];
    const sources = a.sources || [];
    if (sources.length === 0 && terms.length === 0) {
      out.append(el('h3', { text: 'No answer: nothing was looked up' }));
      out.append(el('p', { text: 'The agent called no tool for this question, so it did not guess. This is not an error.' }));
    } else if (terms.length === 0) {
      out.append(el('h3', { text: 'No answer: nothing found answers this' }));
      out.append(el('p', { text: 'The agent looked but found nothing to answer from, so it did not guess. This is not an error.' }));
    } else {
      out.append(el('h3', { text: 'No answer: the catalog has nothing to answer this from' }));
      out.append(el('p', { text: 'The agent looked in the catalog and could not find what this question is about, so it did not guess. '
        + 'This is not an error: it is a gap in the catalog that a data steward can fill.' }));
      out.append(el('p', { class: 'terms', text: `Looked for: ${terms.join(', ')}` }));
    }
    if (sources.length > 0) out.append(el('p', { class: 'note', text: `Consulted: ${sources.join(', ')}` }));
    if (a.text) {
      out.append(el('blockquote', { class: 'agent-said' },
        el('span', { class: 'who', text: 'The agent said: ' }), textNode(a.text)));
      if (a.text.trim().endsWith('?')) out.append(el('p', { class: 'note', text: 'To answer it, ask again below: the conversation remembers this turn.' }));
    }
  }

  function renderRefusal(out, r) {
    out.className = 'outcome refusal';
    out.append(el('h3', { text: 'Refused: you are not permitted to see this' }));
    out.append(el('p', { text: `The ${r.source} source refused the ${r.tool} call made on your behalf.` }));
    out.append(el('p', { class: 'reason', text: `Its reason: ${r.reason}` }));
    out.append(el('p', { class: 'note', text: 'This is not an empty result. The refusal is recorded in the source’s audit log with your identity '
      + `(call ${r.call_id}). Ask the data’s owner for access if you need it.` }));
  }

  function renderError(out, e) {
    out.className = `outcome error error-${e.kind}`;
    out.append(el('h3', { text: e.kind === 'cancelled' ? 'Cancelled' : 'Not answered' }));
    out.append(el('p', { text: errorWords(e) }));
  }

  function renderDone(turn, d) {
    const secs = (d.elapsed_ms / 1000).toFixed(1);
    turn.querySelector('.outcome').append(el('p', { class: 'usage',
      text: `${d.steps} tool call${d.steps === 1 ? '' : 's'} · ${d.model_calls} model call${d.model_calls === 1 ? '' : 's'} · ${secs} s` }));
  }

  // A phase-2 run's branches, collapsed by default: one line per branch as it opens, which a
  // person may open to see that branch's own progress; the supervisor's milestones (and a
  // phase-1 run's, which name no branch) go to the main list.
  function addBranch(turn, b) {
    if (b.role === 'supervisor' || b.state !== 'open') return;
    const label = b.role === 'withheld' ? 'Also answering without the catalog, to compare' : `Asking ${b.source || b.branch_id}`;
    const item = el('li', { class: 'branch', 'data-branch': b.branch_id },
      el('details', null, el('summary', { text: label }), el('ol', { class: 'branch-progress' })));
    const list = turn.querySelector('.progress');
    if (list.lastElementChild) list.lastElementChild.classList.add('past');
    list.append(item);
  }

  function milestoneList(turn, m) {
    if (m.branch_id) {
      for (const item of turn.querySelectorAll('.progress li.branch')) {
        if (item.dataset.branch === m.branch_id) return item.querySelector('.branch-progress');
      }
    }
    return turn.querySelector('.progress');
  }

  function addMilestone(turn, m) {
    const list = milestoneList(turn, m);
    const words = milestoneWords(m);
    const last = list.lastElementChild;
    if (last && last.dataset.words === words && !last.classList.contains('refused')) return; // the same thing again: say it once
    if (last) last.classList.add('past');
    const li = el('li', { text: words });
    li.dataset.words = words;
    li.dataset.source = m.source || '';
    list.append(li);
  }

  // markRefused marks the milestone a refused call belongs to (the last one of its source: a
  // milestone is emitted when its call starts) as refused, in words and mark, never ✓.
  function markRefused(turn, source) {
    const items = [...turn.querySelectorAll('.progress li')].filter((li) => !source || li.dataset.source === source);
    const li = items[items.length - 1];
    if (!li || li.classList.contains('refused')) return;
    li.classList.add('refused');
    li.append(el('span', { class: 'mark', text: ' — refused' }));
  }

  function addStep(turn, s) {
    const work = turn.querySelector('.work');
    work.hidden = false;
    const steps = turn.querySelector('.steps');
    const args = JSON.stringify(s.args);
    const status = s.refused ? 'refused' : (s.error ? `error: ${s.error}` : `${s.ms} ms`);
    if (s.refused) markRefused(turn, s.source);
    steps.append(el('li', { class: s.refused ? 'refused' : '' },
      el('code', { text: `${s.source}.${s.tool}` }), textNode(` ${args} — ${status}`)));
    work.querySelector('summary').textContent = `Show the work (${steps.children.length} tool call${steps.children.length === 1 ? '' : 's'})`;
  }

  function handle(turn, ev) {
    const out = turn.querySelector('.outcome');
    switch (ev.type) {
      case 'accepted': turn.dataset.seqAccepted = String(ev.seq); break;
      case 'branch': addBranch(turn, ev); break;
      case 'milestone': addMilestone(turn, ev); break;
      case 'step': addStep(turn, ev); break;
      case 'answer': renderAnswer(out, ev); break;
      case 'abstention': renderAbstention(out, ev); break;
      case 'refusal': markRefused(turn, ev.source); renderRefusal(out, ev); break;
      case 'error': renderError(out, ev); break;
      case 'done': renderDone(turn, ev); break;
      default: break; // types this page does not know yet
    }
    if (['answer', 'abstention', 'refusal', 'error'].includes(ev.type)) {
      turn.dataset.outcome = ev.type;
      turn.querySelector('.progress').classList.add('finished');
      stopWorking(turn);
    } else if (ev.type !== 'done') {
      working(turn).since = Date.now();
    }
  }

  // ---- the working state --------------------------------------------------------------------------
  // A model turn can be silent for many seconds: the turn shows that work is going on, and for
  // how long since anything was heard, until the outcome arrives.

  const workers = new WeakMap();

  function working(turn) {
    let w = workers.get(turn);
    if (w) return w;
    const line = turn.querySelector('.working');
    line.hidden = false;
    w = { since: Date.now(), start: Date.now(), timer: 0 };
    // The words are in a live region; the seconds are not (aria-hidden), so a screen reader
    // hears the line when it changes, not a count every second.
    const words = line.querySelector('.words');
    const tick = () => {
      const quiet = Math.floor((Date.now() - w.since) / 1000);
      const started = turn.querySelector('.progress li') !== null;
      const said = started ? 'Working…' : 'Working: the agent is thinking about the question…';
      if (words.textContent !== said) words.textContent = said;
      line.querySelector('.secs').textContent = started
        ? ` ${quiet} s since the last step`
        : ` ${Math.floor((Date.now() - w.start) / 1000)} s`;
    };
    tick();
    w.timer = setInterval(tick, 1000);
    workers.set(turn, w);
    return w;
  }

  function stopWorking(turn) {
    const w = workers.get(turn);
    if (w) clearInterval(w.timer);
    const line = turn.querySelector('.working');
    if (line) line.hidden = true;
  }

  // ---- the flow -----------------------------------------------------------------------------------

  function showProblem(id, message) {
    const p = $(id);
    p.textContent = message ? shown(message) : '';
    p.hidden = !message;
  }

  function setRunning(run) {
    state.running = run;
    // A button that is disabled while it has focus drops it to the page's start: keyboard users
    // go on from Cancel while a question runs, and from the question box once it has ended.
    const focused = document.activeElement;
    $('ask-button').disabled = !!run;
    $('cancel-button').disabled = !run;
    if (run && focused === $('ask-button')) $('cancel-button').focus();
    if (!run && focused === $('cancel-button')) $('question').focus();
    $('cancel-button').textContent = 'Cancel';
    $('question').readOnly = !!run;
    $('follow-up-hint').hidden = !!run || !state.conversation;
    $('conversation').dataset.running = run ? 'true' : 'false';
  }

  // leaveRunning cancels the running question the person is leaving (a new conversation, another
  // sign-in, signing out): left alone it went on at the service, holding one of the identity's
  // asks in flight until it ended. The cancel carries the bearer it was asked with (call reads
  // state.token at once), so call it before the token changes.
  function leaveRunning() {
    const run = state.running;
    if (run && run.ticket) cancelAsk(run.ticket).catch(() => {});
  }

  function signedIn(token, oid) {
    leaveRunning();
    state.token = token;
    state.oid = oid;
    resetConversation();
    $('whoami-text').textContent = oid ? `Signed in as ${oid}.` : 'Using your bearer token.';
    $('whoami').hidden = false;
    $('conversation').hidden = false;
    $('question').focus();
  }

  function resetConversation() {
    if (state.running) state.running.controller.abort();
    setRunning(null);
    state.conversation = '';
    state.retake = null;
    delete $('conversation').dataset.conversationId;
    $('turns').replaceChildren();
    $('follow-up-hint').hidden = true;
    showProblem('ask-error', '');
  }

  // signOut forgets the token (it lived in this page's memory only), cancels a running question
  // (the person is leaving it) and returns to the sign-in.
  function signOut() {
    leaveRunning();
    resetConversation();
    state.token = '';
    state.oid = '';
    $('whoami').hidden = true;
    $('conversation').hidden = true;
    $('identity').focus();
  }

  async function signIn(event) {
    event.preventDefault();
    showProblem('signin-error', '');
    const oid = $('identity').value;
    try {
      const resp = await fetch(new URL('token', uiBase), {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ oid }),
        cache: 'no-store',
      });
      if (resp.status === 404) throw new Error('Development sign-in is not available here: paste a bearer token instead.');
      let body = null;
      try { body = await resp.json(); } catch { body = null; }
      if (!body || typeof body !== 'object') {
        throw new Error(`The sign-in’s reply (HTTP ${resp.status}, ${resp.headers.get('Content-Type') || 'no type'}) is not JSON: a proxy may have answered in its place.`);
      }
      if (!resp.ok || typeof body.access_token !== 'string') throw new Error(body.error || `sign-in failed (HTTP ${resp.status})`);
      signedIn(body.access_token, oid);
    } catch (e) {
      showProblem('signin-error', e.message);
    }
  }

  async function ask(event) {
    event.preventDefault();
    if (state.running) return;
    const question = $('question').value.trim();
    if (!question) return;
    // The contract's bound, in characters (code points); the box's maxlength counts UTF-16 units,
    // so it is twice this, and an emoji-heavy question of 4000 characters still fits in it.
    const length = [...question].length;
    if (length > MAX_QUESTION) {
      showProblem('ask-error', `A question can be at most ${MAX_QUESTION} characters; this one has ${length}. Shorten it and ask again.`);
      return;
    }
    showProblem('ask-error', '');
    const turn = $('turn-template').content.firstElementChild.cloneNode(true);
    turn.querySelector('.question').textContent = question;
    const controller = new AbortController();
    // waits ends the creates' waits when the person cancels before there is a ticket; a request
    // already on its way is let finish, so that a ticket it brings back can be cancelled.
    const waits = new AbortController();
    const run = { ticket: '', controller, waits, turn, cancelled: false };
    setRunning(run);
    const signal = AbortSignal.any([controller.signal, waits.signal]);
    const onWait = (cause, ms) => showWaiting(cause, ms, signal);
    let asking = false; // the create under way is the ask's (not the conversation's)
    try {
      let ticket;
      for (let attempt = 0; ; attempt++) {
        asking = false;
        if (!state.conversation) {
          const conv = await createConversation(signal, onWait);
          state.conversation = conv.id;
          $('conversation').dataset.conversationId = conv.id;
        }
        const retake = state.retake;
        const key = retake && retake.conversation === state.conversation && retake.question === question ? retake.key : undefined;
        try {
          asking = true;
          ticket = await createAsk(state.conversation, question, { key, signal, onWait });
          state.retake = null;
          break;
        } catch (e) {
          // The conversation outlived its memory (DAS_ASK_TTL_S): start a new one, and say so.
          if (e instanceof ProblemError && e.status === 404 && attempt === 0) {
            state.conversation = '';
            $('turns').append(el('li', { class: 'notice', text: 'The earlier conversation had expired; this question starts a new one.' }));
            continue;
          }
          // The conversation holds as many questions as the service allows (a 409 that names no
          // running ask): start a new one, and say so.
          if (e instanceof ProblemError && e.status === 409 && !(e.problem && e.problem.ticket) && attempt === 0) {
            state.conversation = '';
            $('turns').append(el('li', { class: 'notice', text: 'The conversation was full; this question starts a new one.' }));
            continue;
          }
          throw e;
        }
      }
      showWaiting(null);
      turn.dataset.ticket = ticket.ticket;
      run.ticket = ticket.ticket;
      $('turns').append(turn);
      working(turn);
      $('question').value = '';
      // Cancelled while the ask was on its way: the ticket it brought back is cancelled now.
      if (run.cancelled) cancelAsk(ticket.ticket).catch((e) => showProblem('ask-error', `Cancel failed: ${e.message}`));
      for await (const ev of follow(ticket.ticket, controller.signal)) handle(turn, ev);
    } catch (e) {
      showWaiting(null);
      if (!controller.signal.aborted) {
        const made = e instanceof MayHaveBeenMadeError;
        const cause = made ? e.cause : e;
        let said;
        if (run.cancelled && !run.ticket) said = 'Cancelled: the page stopped asking.';
        else if (cause instanceof ProblemError && cause.status === 401) said = 'Your sign-in was not accepted (it may have expired): sign in again.';
        else if (cause instanceof ProblemError && cause.status === 429) {
          said = `You have too many questions running, or too many kept; try again ${againWords(cause.retryAfterMs)}.`;
        } else if (cause instanceof ProblemError && cause.retryAfterMs > 0) said = `${cause.message}; try again ${againWords(cause.retryAfterMs)}.`;
        else if (cause instanceof UnreachableError) {
          // The browser's own words for a connection that failed ("Failed to fetch", "NetworkError
          // when attempting to fetch resource.") say nothing a person can act on.
          said = `The ask service could not be reached (${cause.message}) after trying again for a while: `
            + 'check that it is running and that this page can reach it, then ask again.';
        } else said = cause.message;
        if (made && asking) {
          // The question may be running: asking it again here picks up its ticket, not a second ask.
          state.retake = { conversation: state.conversation, question, key: e.key };
          said += ' The service may have received the question all the same: '
            + 'asking it again here picks it up instead of asking twice.';
        }
        showProblem('ask-error', said);
      }
    } finally {
      stopWorking(turn);
      if (state.running && state.running.controller === controller) setRunning(null);
    }
  }

  // againWords says a Retry-After as a person reads it, however absurd the value.
  function againWords(ms) {
    if (!(ms > 0)) return 'in a moment';
    const s = Math.ceil(ms / 1000);
    if (s < 120) return `in ${s} s`;
    if (s < 2 * 3600) return `in ${Math.ceil(s / 60)} min`;
    if (s < 2 * 86400) return `in ${Math.ceil(s / 3600)} h`;
    return 'much later (the service asked for more than two days)';
  }

  // showWaiting says, while a create waits to be tried again, why and for how long, counting down;
  // showWaiting(null) clears it. The wait ends early if signal does (Cancel).
  let waitingTimer = 0;
  function showWaiting(cause, ms, signal) {
    clearInterval(waitingTimer);
    const line = $('ask-status');
    if (!cause || ms < 1000) { line.hidden = true; line.textContent = ''; return; }
    const why = cause instanceof ProblemError
      ? `The service is busy (HTTP ${cause.status}: ${cause.message})`
      : `The service could not be reached (${cause.message})`;
    const until = Date.now() + ms;
    const tick = () => {
      if (signal && signal.aborted) { showWaiting(null); return; }
      const left = Math.ceil((until - Date.now()) / 1000);
      line.textContent = left > 0 ? `${why}: trying again in ${left} s. Cancel stops trying.` : `${why}: trying again…`;
    };
    tick();
    line.hidden = false;
    waitingTimer = setInterval(tick, 1000);
  }

  async function cancel() {
    const run = state.running;
    if (!run) return;
    const button = $('cancel-button');
    if (document.activeElement === button) $('question').focus();
    button.disabled = true;
    button.textContent = 'Cancelling…';
    if (!run.ticket) {
      // Nothing to cancel yet: stop the creates' waits; a ticket that still comes is cancelled then.
      run.cancelled = true;
      run.waits.abort();
      return;
    }
    try {
      await cancelAsk(run.ticket); // the stream then ends with error{cancelled} and done
    } catch (e) {
      showProblem('ask-error', `Cancel failed: ${e.message}`);
      button.disabled = false;
      button.textContent = 'Cancel';
    }
  }

  // Cancel when the person has gone: the run is spending their quota.
  window.addEventListener('pagehide', () => {
    const run = state.running;
    if (!run || !run.ticket) return;
    fetch(new URL(`v1/asks/${encodeURIComponent(run.ticket)}/cancel`, apiBase),
      { method: 'POST', headers: authHeaders(), keepalive: true }).catch(() => {});
  });

  $('signin-form').addEventListener('submit', signIn);
  $('token-use').addEventListener('click', () => {
    const token = $('token-input').value.trim();
    $('token-input').value = '';
    if (token) signedIn(token, '');
  });
  // Enter in the token field uses the token: left to the form, it would submit the development
  // sign-in and sign in as whoever the list shows instead.
  $('token-input').addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { e.preventDefault(); $('token-use').click(); }
  });
  $('ask-form').addEventListener('submit', ask);
  $('question').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('ask-form').requestSubmit(); }
  });
  $('cancel-button').addEventListener('click', cancel);
  $('signout-button').addEventListener('click', signOut);
  $('new-conversation').addEventListener('click', () => { leaveRunning(); resetConversation(); $('question').focus(); });
  for (const b of document.querySelectorAll('button.example')) {
    b.addEventListener('click', () => { $('question').value = b.textContent; $('question').focus(); });
  }
})();
