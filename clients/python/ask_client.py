#!/usr/bin/env python3
"""A client of the ask service in Python, with the standard library only.

Ask a question, follow the work as Server-Sent Events (resuming a dropped connection with
Last-Event-ID, so no event is missed or seen twice), and print the outcome as what it is:
an answer with its caveats and what it rests on, an abstention, a refusal, or an error.

    python3 ask_client.py [--url URL] [--idp URL] [--as OID | --token TOKEN] [--branches] [--webhook URL] QUESTION...

--url defaults to $ASK_URL or http://127.0.0.1:8080/ask. Without --token (or $ASK_TOKEN) a token
is minted for --as (default alice) from the development identity provider at --idp ($ASK_IDP,
default http://127.0.0.1:8090), which answers loopback callers only. Progress goes to stderr,
the outcome to stdout. Exit status: 0 answer, 2 abstention, 3 refusal, 4 error (a cancelled run
included), 1 anything else. Ctrl-C (SIGTERM, or SIGHUP: the terminal closing, unless ignored as
nohup does) cancels the ask on the service, naming its ticket, waits at most 5 s for the run to
confirm it, prints "Cancelled." and exits 4, as the Go CLI; a second Ctrl-C leaves at once.

A create (a conversation, an ask) carries an Idempotency-Key, the same on every attempt, and is
retried after what a retry can cure: a lost connection, a 502/503/504, or the 409 of an earlier
attempt with the same key still in progress. Each retry is said on stderr, never silently. A
Retry-After longer than a minute is not waited for: the error says when to try again. An ask whose
reply was lost and whose retries were then refused may have been made all the same: the CLI says
so, and in which conversation (MayHaveBeenMade). A password in --url is never sent (the bearer is
the credential) and shows as xxxxx in every message.
"""

from __future__ import annotations

import argparse
import base64
import email.utils
import http.client
import json
import math
import os
import random
import re
import secrets
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable, Iterator

OUTCOMES = ("answer", "abstention", "refusal", "error")


class APIError(Exception):
    """The service refused a call: its HTTP status and RFC 9457 problem, whose detail and
    violations the message says. retry_after is the Retry-After it asked for (a 429, a 503, the
    409 of an Idempotency-Key in progress), in seconds, or 0."""

    def __init__(self, operation: str, status: int, problem: dict, retry_after: float = 0.0):
        if not isinstance(problem, dict):
            problem = {}  # a body that is JSON but not a problem (a gateway's, say)
        self.operation, self.status, self.problem, self.retry_after = operation, status, problem, retry_after
        detail = problem.get("detail") or problem.get("title") or ""
        # A 400's violations (`errors`) say what to change; the detail alone often does not.
        violations = problem.get("errors")
        if isinstance(violations, list) and violations:
            detail += f" ({'; '.join(str(v) for v in violations)})"
        again = f" (try again in {math.ceil(retry_after)} s)" if retry_after > 0 else ""
        super().__init__(f"{operation}: HTTP {status}" + (f": {detail}" if detail else "") + again)

    @property
    def running_ticket(self) -> str:
        """For a 409, the ticket already running in the conversation ("" when none is named)."""
        return str(self.problem.get("ticket") or "")


class ProtocolError(Exception):
    """The service answered something this client cannot read as the contract (an event whose data
    is not JSON, a stream that is not text/event-stream, a call's success whose body is not a JSON
    object). Final: a retry would read the same."""


class BaseURLError(ValueError):
    """The base URL cannot be the service's: not an absolute http(s) URL, or one with a query."""


class TokenError(ValueError):
    """The token cannot be sent as a bearer credential: empty, or holding white space or a control
    character (a token read from a file with its line break, say). Raised when the client is made,
    before any request; the message names the fault, never the token (http.client's own refusal
    quotes the header, token and all). As the Go and TypeScript clients."""


def check_bearer(token: str) -> None:
    """Raises TokenError unless token can follow "Bearer " in an Authorization header. A token
    given with its scheme ("Bearer eyJ…", pasted from a header) is told to be given alone, as
    the Go CLI: "white space at index 6" did not say what to change."""
    if not isinstance(token, str) or token == "":
        raise TokenError("the token is empty")
    if len(token) > len("Bearer ") and token[:len("Bearer ")].lower() == "bearer ":
        raise TokenError('the token starts with "Bearer ": give the token alone (the client sends the '
                         "Authorization header itself)")
    for i, ch in enumerate(token):
        if ord(ch) <= 0x20 or ord(ch) == 0x7F:
            raise TokenError(f"the token holds white space or a control character at index {i}: not a bearer token")


# MAX_EVENT_SIZE bounds one line and one event's data of the stream, in bytes: the Go client's default.
MAX_EVENT_SIZE = 16 << 20


class NothingListening(ConnectionError):
    """A connection was refused (or the host name did not resolve) before the service had ever
    answered this client: a wrong URL or a stopped service, not a blip worth retrying."""


class MayHaveBeenMade(Exception):
    """A create (create_conversation, ask) failed for good after an earlier attempt of it was sent
    and its reply lost (the connection dropped, or no answer came in time): that attempt may have
    made the conversation or the ticket, and the ask may be running. cause (also __cause__) is what
    ended the call (an APIError, a ProtocolError, a failed connection); conversation_id is, for
    ask, the conversation it may be running in. Asking again makes a new ask, perhaps a second
    one. As the Go client's ErrMayHaveBeenMade and the TypeScript client's MayHaveBeenMadeError."""

    def __init__(self, operation: str, cause: BaseException, conversation_id: str = ""):
        self.operation, self.cause, self.conversation_id = operation, cause, conversation_id
        what = (f"the ask may have been made and be running in conversation {conversation_id}" if conversation_id
                else "the conversation may have been made")
        super().__init__(f"{cause} (an earlier attempt's reply was lost: {what})")


def _nothing_there(e: BaseException) -> bool:
    """Whether e says that nothing is at the URL: the connection was refused, or the host name does
    not resolve. Not a lookup that failed for want of an answer from the resolver (EAI_AGAIN), which
    may pass and is retried, as in Go and TypeScript."""
    if isinstance(e, socket.gaierror):
        return e.errno in _NO_SUCH_HOST
    return isinstance(e, ConnectionRefusedError)


# The getaddrinfo errors that say the name does not resolve (EAI_NODATA: it has no address).
_NO_SUCH_HOST = {socket.EAI_NONAME} | ({socket.EAI_NODATA} if hasattr(socket, "EAI_NODATA") else set())


def _may_have_been_sent(e: BaseException) -> bool:
    """Whether a request that failed with e may have reached the service. urllib raises a URLError
    for a failure to connect or to send: only a connection cut while sending may have carried the
    request. Whatever fails after it was sent (no answer, a reset, a cut reply) may have."""
    if isinstance(e, urllib.error.URLError):
        return isinstance(e.reason, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError))
    return True


# What a call's reply names, by operation: without it (or with it empty) the reply is not the
# service's, as in Go and TypeScript.
_NAMES = {"createConversation": "id", "createAsk": "ticket", "getAsk": "ticket", "cancelAsk": "ticket"}


# The problem type of a 409 for an Idempotency-Key whose first request is still in progress.
PROBLEM_IDEMPOTENCY_IN_PROGRESS = "urn:ask:problem:idempotency-key-in-progress"


def _transient(status: int) -> bool:
    """Whether an event stream refused with this status may be resumed: a 408, a 429, or a 5xx
    but 501 and 505 (which say the server does not do what was asked), as the Go client."""
    return status in (408, 429) or (status >= 500 and status not in (501, 505))


def _retryable(e: APIError) -> bool:
    """Whether a refused call is retried: a 502, 503 or 504 (a gateway or a replica going away),
    or a 409 saying an earlier attempt with the same Idempotency-Key is still in progress. A 429
    is not: the identity has too many asks in flight, and the caller decides (retry_after)."""
    return e.status in (502, 503, 504) or (e.status == 409 and e.problem.get("type") == PROBLEM_IDEMPOTENCY_IN_PROGRESS)


@dataclass
class Retry:
    """How a call (create, status, cancel) is retried: attempts in all (1: no retry), and a
    backoff from initial seconds, doubled per attempt with full jitter, capped at maximum, and
    never shorter than the service's Retry-After. A Retry-After longer than max_retry_after
    seconds is not waited for: the call ends at once with the APIError, whose retry_after (and
    message) says when to try again, rather than sit for an hour; 0 or less is the default,
    60 s, as in the Go and TypeScript clients. The Go client's defaults."""

    attempts: int = 8
    initial: float = 0.25
    maximum: float = 5.0
    max_retry_after: float = 60.0


def _say_retry(operation: str, attempt: int, delay: float, cause: BaseException) -> None:
    print(f"ask_client: {operation}: retrying (attempt {attempt}) in {delay:.2f} s: {cause}", file=sys.stderr)


def _idempotency_key() -> str:
    """A fresh Idempotency-Key, as the IETF draft's Structured Field string."""
    return f'"{secrets.token_hex(16)}"'


_PASSWORD_IN_URL = re.compile(r"(//[^/?#@:\s]*:)[^/?#\s]*@")


def _redacted(text: str) -> str:
    """text with the password of any URL in it (//user:password@) shown as "xxxxx", as Go's
    url.URL.Redacted."""
    return _PASSWORD_IN_URL.sub(r"\1xxxxx@", text)


def mint_dev_token(idp_url: str, oid: str) -> str:
    """A bearer for oid from the development identity provider (POST /token, loopback only).
    A reply that names no access_token (a page, another server at --idp) is a ProtocolError, and
    a failure to reach it an OSError, each naming the provider: the CLI printed a traceback (a
    JSONDecodeError, a KeyError) or a bare "Connection refused" that read as the service's."""
    body = urllib.parse.urlencode({"oid": oid}).encode()
    req = urllib.request.Request(idp_url.rstrip("/") + "/token", data=body, method="POST")
    shown = _redacted(idp_url.rstrip("/"))
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
    except (OSError, http.client.HTTPException) as e:
        reason = e.reason if isinstance(e, urllib.error.URLError) and not isinstance(e, urllib.error.HTTPError) else e
        raise OSError(f"could not mint a token from the development identity provider at {shown}: {reason}") from None
    try:
        token = json.loads(raw).get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or token == "":
        raise ProtocolError(f"the development identity provider at {shown} sent no access_token")
    return token


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows no redirect: the service answers none, and urllib would send the Authorization
    header (and a POST's body, the question) to wherever one points, another host included. A
    redirect is then an APIError with its status, as on the event stream."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


class AskClient:
    """The service's calls as one identity. Each call is independent; not for concurrent use
    of one EventStream.

    Calls are retried as Retry says (see _retryable), each retry told to on_retry (default: a
    line on stderr); sleep is the wait between attempts (tests pass a fake clock). A connection
    refused, or a host name that does not resolve, before the service has ever answered this
    client is final at once: nothing is listening at the URL, and eight retries would only hide
    that. Once the service has answered, a refusal is a restart in progress and is retried."""

    def __init__(self, base_url: str, token: str, timeout: float = 30.0, retry: Retry | None = None,
                 on_retry: Callable[[str, int, float, BaseException], None] = _say_retry,
                 sleep: Callable[[float], None] = time.sleep):
        # A user name and password in base_url are not sent (the bearer is the credential, as in
        # Go): urllib took "user:password@host" for the host's name, and the error that it does not
        # resolve quoted the URL, password and all. Messages show shown_url: its password as
        # "xxxxx", as the Go CLI.
        self.shown_url = _redacted(base_url.rstrip("/"))
        parts = urllib.parse.urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise BaseURLError(f"the base URL {self.shown_url!r} is not an absolute http or https URL")
        if "?" in base_url or "#" in base_url:
            # The service's paths are joined to the base path: with a query there, they were
            # joined to the query ("…/ask?k=1/v1/conversations"). Refused, as in Go and TypeScript;
            # only what comes before it is quoted (a query may hold a key).
            before = _redacted(re.split(r"[?#]", base_url, maxsplit=1)[0])
            raise BaseURLError(f"the base URL {before!r} must not carry a query or a fragment: the service's paths are joined to it")
        self.base = parts._replace(netloc=parts.netloc.rpartition("@")[2])
        self.base_url = urllib.parse.urlunsplit(self.base)
        check_bearer(token)
        self.token = token
        self.timeout = timeout
        self.retry = retry or Retry()
        self.on_retry = on_retry
        self.sleep = sleep
        self.reached = False  # the service has answered this client once

    def _once(self, operation: str, method: str, path: str, body: dict | None, headers: dict[str, str],
              timeout: float | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for name, value in headers.items():
            req.add_header(name, value)
        try:
            with _opener.open(req, timeout=timeout or self.timeout) as resp:
                self.reached = True
                raw, status = resp.read(), resp.status
                content_type = resp.headers.get("Content-Type") or "no Content-Type"
        except urllib.error.HTTPError as e:
            self.reached = True
            try:
                problem = json.load(e)
            except ValueError:
                problem = {}
            raise APIError(operation, e.code, problem, _retry_after(e.headers.get("Retry-After"))) from None
        # A success whose body is not a JSON object (a captive portal's or a web server's page at
        # a wrong --url) is not the contract: final, said as such, never a traceback from the CLI.
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            raise ProtocolError(f"{operation}: the response (HTTP {status}, {content_type}) is not the service's JSON; "
                                f"is {self.shown_url} the ask service?")
        # A reply without what it names (a 201 conversation to an ask, a {}, an empty ticket) is
        # not the contract either: the CLI's ["ticket"] was a KeyError, a traceback, and an empty
        # ticket would be followed nowhere.
        field = _NAMES.get(operation)
        if field and not (isinstance(doc.get(field), str) and doc[field]):
            raise ProtocolError(f"{operation}: the response (HTTP {status}, {content_type}) has no {field}; "
                                f"is {self.shown_url} the ask service?")
        return doc

    def _call(self, operation: str, method: str, path: str, body: dict | None = None, create: bool = False,
              headers: dict[str, str] | None = None, timeout: float | None = None,
              conversation_id: str = "") -> dict:
        """Makes a call until it succeeds, fails for good or runs out of attempts (see Retry). A
        create that fails for good after an attempt whose reply was lost raises MayHaveBeenMade."""
        # One key for every attempt of a create: a retry answers the same conversation or ticket.
        headers = dict(headers or {})
        if create:
            headers["Idempotency-Key"] = _idempotency_key()
        lost: list[bool] = []
        try:
            return self._attempts(operation, method, path, body, headers, timeout, lost)
        except Exception as e:
            if create and lost:
                raise MayHaveBeenMade(operation, e, conversation_id) from e
            raise

    def _attempts(self, operation: str, method: str, path: str, body: dict | None, headers: dict[str, str],
                  timeout: float | None, lost: list[bool]) -> dict:
        for attempt in range(1, self.retry.attempts + 1):
            floor = 0.0
            try:
                return self._once(operation, method, path, body, headers, timeout)
            except APIError as e:
                if not _retryable(e):
                    raise
                cause, floor = e, e.retry_after
            except (OSError, http.client.HTTPException) as e:
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                if not self.reached and _nothing_there(reason):
                    said = "no such host for" if isinstance(reason, socket.gaierror) else "nothing is listening at"
                    raise NothingListening(f"{operation}: {said} {self.shown_url} ({reason})") from None
                cause = e  # the connection failed or was reset, or no answer came in time
                if _may_have_been_sent(e):
                    lost.append(True)
            if attempt >= self.retry.attempts:
                raise cause
            if floor > (self.retry.max_retry_after if self.retry.max_retry_after > 0 else 60.0):
                # Asked to come back later than a call waits (an hour, or 10^12 s, which time.sleep
                # refused with an OverflowError, a traceback from the CLI): the refusal is the answer.
                raise cause
            delay = max(random.uniform(0, min(self.retry.initial * 2 ** (attempt - 1), self.retry.maximum)), floor)
            self.on_retry(operation, attempt + 1, delay, cause)
            self.sleep(delay)
        raise AssertionError("unreachable")

    def create_conversation(self) -> dict:
        """Opens a conversation. Retried with one Idempotency-Key: a retry answers the same one."""
        return self._call("createConversation", "POST", "/v1/conversations", {}, create=True)

    def ask(self, conversation_id: str, question: str, webhook: str | None = None) -> dict:
        """Returns the ticket, which arrives before any work runs. Retried with one
        Idempotency-Key: a retry answers the same ticket, never a second ask. With webhook, the
        service also POSTs the run's end there (signed; it must be under a prefix the operator
        allows, else a 400 and no ticket); status(ticket)["webhook"] says how delivery goes."""
        cid = urllib.parse.quote(conversation_id, safe="")
        body: dict = {"question": question}
        if webhook:
            body["webhook"] = {"url": webhook}
        return self._call("createAsk", "POST", f"/v1/conversations/{cid}/asks", body, create=True,
                          conversation_id=conversation_id)

    def status(self, ticket: str, wait_seconds: int | None = None) -> dict:
        """A ticket's state, and its outcome once there is one. With wait_seconds (1 to 60: the
        service waits at most 60), a running ticket is answered when it ends or when the wait is
        over, whichever is first (Prefer: wait); the request's timeout is raised to cover it."""
        path = f"/v1/asks/{urllib.parse.quote(ticket, safe='')}"
        if not wait_seconds:
            return self._call("getAsk", "GET", path)
        if not 1 <= wait_seconds <= 60:
            raise ValueError("wait_seconds must be 1 to 60")
        return self._call("getAsk", "GET", path, headers={"Prefer": f"wait={int(wait_seconds)}"},
                          timeout=max(self.timeout, wait_seconds + 10))

    def cancel(self, ticket: str) -> dict:
        """Cancels a run. Idempotent; after done it changes nothing."""
        return self._call("cancelAsk", "POST", f"/v1/asks/{urllib.parse.quote(ticket, safe='')}/cancel")

    def events(self, ticket: str, after: int = 0) -> "EventStream":
        return EventStream(self, ticket, after)


# What an event must carry for a client to say it (the contract's required fields that
# describe_outcome and follow read, with their types; the optional ones they read, typed when
# present). An event that breaks it is a ProtocolError naming its type, seq and field, never its
# values: an answer without text made describe_outcome raise a KeyError, a branch whose branch_id
# was a list made follow raise a TypeError, and the CLI print a traceback.


def _strs(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _objects(v, *fields: str) -> bool:
    return isinstance(v, list) and all(isinstance(x, dict) and all(isinstance(x.get(f), str) for f in fields) for x in v)


def _headline(v) -> bool:
    return isinstance(v, dict) and isinstance(v.get("label"), str) and "value" in v


def _result(v) -> bool:
    return (isinstance(v, dict) and _strs(v.get("columns")) and isinstance(v.get("rows"), list)
            and all(isinstance(r, list) for r in v["rows"]) and isinstance(v.get("truncated"), bool))


def _divergence(v) -> bool:
    return (isinstance(v, dict) and _strs(v.get("without")) and _result(v.get("result"))
            and (v.get("headline") is None or _headline(v["headline"])))


# Per event type: (field, required, check). A field not required may be absent or null.
_EVENT_FIELDS: dict[str, list[tuple[str, bool, Callable[[object], bool]]]] = {
    "answer": [("text", True, lambda v: isinstance(v, str)),
               ("caveats", True, lambda v: _objects(v, "term", "text", "source")),
               ("provenance", True, lambda v: _objects(v, "term", "statement", "source")),
               ("sql", True, _strs),
               ("path", True, lambda v: isinstance(v, dict) and isinstance(v.get("speed"), str)),
               ("headline", False, _headline), ("result", False, _result), ("divergence", False, _divergence)],
    "abstention": [("terms", True, _strs), ("sources", False, _strs), ("text", False, lambda v: isinstance(v, str))],
    "refusal": [(f, True, lambda v: isinstance(v, str)) for f in ("tool", "source", "reason")],
    "error": [(f, True, lambda v: isinstance(v, str)) for f in ("kind", "message")],
    "branch": [(f, True, lambda v: isinstance(v, str)) for f in ("branch_id", "role", "state")]
              + [("source", False, lambda v: isinstance(v, str))],
    "milestone": [(f, True, lambda v: isinstance(v, str)) for f in ("phase", "subject", "source")]
                 + [("branch_id", False, lambda v: isinstance(v, str))],
}


def _event_fault(event: dict) -> str | None:
    """What in an event is not the contract's (a field missing, or of another type), or None; None
    for a type _EVENT_FIELDS does not name. Names the field, never its value."""
    for field, required, ok in _EVENT_FIELDS.get(event["type"], []):
        v = event.get(field)
        if v is None:
            if required:
                return f"the field {field} is missing"
        elif not ok(v):
            return f"the field {field} is not of the contract's type"
    return None


class EventStream:
    """A ticket's events, in order, each once, until done.

    A connection that drops, fails or ends before done, or that is refused transiently (a 408,
    a 429, a 5xx but 501 and 505), is resumed with Last-Event-ID after a short backoff with
    jitter, each reconnect told to the client's on_retry (as "streamEvents"), never silently; the
    budget of attempts is reset whenever an event arrives. The server's SSE `retry:`
    and a Retry-After raise that wait, never beyond max_wait seconds (so a server cannot park the
    client). Any other refusal (a 400, 401, 404) is final (APIError); so is an answer that is not
    the contract's (ProtocolError: an event that is not JSON, or an outcome missing a field it
    must carry or holding one of another type, a branch or milestone likewise), and a connection refused before the service has ever answered
    the client (NothingListening: nothing is listening at the URL). `last_event_ids` records the
    Last-Event-ID sent on each connection ("" for none). A line or one event's data longer than
    max_event_size bytes (16 MiB, as the Go client's MaxEventSize) is a ProtocolError, final, after
    the events before it: a broken server's endless line is an error, not memory without end.
    """

    def __init__(self, client: AskClient, ticket: str, after: int = 0, attempts: int = 8, max_wait: float = 5.0,
                 max_event_size: int = MAX_EVENT_SIZE):
        self.client, self.ticket, self.attempts, self.max_wait = client, ticket, attempts, max_wait
        self.max_event_size = max_event_size
        self.steps = 0  # step events delivered
        # Once done has been delivered: how many of the run's tool calls (done's steps) this stream
        # did not deliver. Steps are the only events the service drops from a full buffer, and with
        # `after` the steps at or before it count as missed (as the Go client's MissedSteps).
        self.missed_steps = 0
        self.last_id = str(after) if after else ""
        self.last_seq = after
        self.last_event_ids: list[str] = []
        self._conn: http.client.HTTPConnection | None = None
        self._resp: http.client.HTTPResponse | None = None

    def drop(self) -> None:
        """Closes the current connection mid-stream, as a network failure would. The next
        iteration reconnects with Last-Event-ID."""
        if self._resp is not None:
            self._resp.close()
        if self._conn is not None:
            self._conn.close()

    def _connect(self) -> http.client.HTTPResponse:
        base = self.client.base
        conn_type = http.client.HTTPSConnection if base.scheme == "https" else http.client.HTTPConnection
        self._conn = conn_type(base.netloc, timeout=self.client.timeout)
        headers = {"Authorization": f"Bearer {self.client.token}", "Accept": "text/event-stream"}
        if self.last_id:
            headers["Last-Event-ID"] = self.last_id
        self.last_event_ids.append(self.last_id)
        path = f"{base.path}/v1/asks/{urllib.parse.quote(self.ticket, safe='')}/events"
        try:
            self._conn.request("GET", path, headers=headers)
        except (ConnectionRefusedError, socket.gaierror) as e:
            if not self.client.reached and _nothing_there(e):
                said = "no such host for" if isinstance(e, socket.gaierror) else "nothing is listening at"
                raise NothingListening(f"streamEvents: {said} {self.client.shown_url} ({e})") from None
            raise
        resp = self._conn.getresponse()
        self.client.reached = True
        return resp

    def __iter__(self) -> Iterator[dict]:
        failures = 0
        retry_field = 0.0  # the server's retry: field, which holds until it sends another
        while True:
            cause: BaseException = ConnectionError(f"event stream for {self.ticket}: the stream ended before done")
            # A refusal's Retry-After is that refusal's: it raises the wait before the next
            # connection only, as in Go (it held for every reconnect after it).
            refused_floor = 0.0
            try:
                self._resp = resp = self._connect()
                if resp.status != 200:
                    try:
                        problem = json.loads(resp.read() or b"{}")
                    except ValueError:
                        problem = {}
                    err = APIError("streamEvents", resp.status, problem, _retry_after(resp.getheader("Retry-After")))
                    if not _transient(resp.status):
                        raise err
                    refused_floor = err.retry_after
                    cause = err
                elif resp.getheader("Content-Type", "").split(";")[0].strip().lower() != "text/event-stream":
                    raise ProtocolError(f"event stream for {self.ticket}: the response is not text/event-stream")
                else:
                    def said_retry(ms: int) -> None:
                        nonlocal retry_field
                        retry_field = ms / 1000
                    def said_id(last_id: str) -> None:
                        # The last event ID, set by an event with an id and no data too (WHATWG,
                        # as the Go and TypeScript clients): it was taken from events with data only.
                        self.last_id = last_id
                    for frame_id, data in _frames(resp, said_retry, self.max_event_size, self.ticket, said_id):
                        try:
                            event = json.loads(data)
                            seq, kind = event["seq"], event["type"]
                            if type(seq) is not int or not isinstance(kind, str):
                                raise TypeError
                        except (ValueError, TypeError, KeyError, IndexError):
                            # Never quote the data: the accepted event's holds the question.
                            raise ProtocolError(f"event {frame_id or '(no id)'} of ticket {self.ticket} is not an event") from None
                        if seq <= self.last_seq:
                            continue  # replayed after a resume: already delivered
                        fault = _event_fault(event)
                        if fault is not None:
                            # Final, as any data that is not the contract's: a retry reads the same.
                            raise ProtocolError(f"{kind} event {seq} of ticket {self.ticket} is not the contract's: {fault}")
                        self.last_seq = seq
                        failures = 0
                        if kind == "step":
                            self.steps += 1
                        elif kind == "done" and type(event.get("steps")) is int:
                            self.missed_steps = max(0, event["steps"] - self.steps)
                        yield event
                        if kind == "done":
                            return
            except NothingListening:
                raise
            except (OSError, ValueError, http.client.HTTPException) as e:
                cause = e  # a dropped or failed connection: resume below
            finally:
                self.drop()
            failures += 1
            if failures > self.attempts:
                raise ConnectionError(f"event stream for {self.ticket}: no progress after {self.attempts} reconnects")
            backoff = random.uniform(0, min(0.1 * 2 ** failures, self.max_wait))
            delay = min(max(backoff, retry_field, refused_floor), self.max_wait)
            # Never silently, as a call's retry and the Go CLI: the person sees why the stream paused.
            self.client.on_retry("streamEvents", failures + 1, delay, cause)
            self.client.sleep(delay)


# The longest Retry-After read, in seconds: Go's longest time.Duration, about 292 years. A longer
# run of digits is read as this, not as a float's inf.
_RETRY_AFTER_CAP = float((2**63 - 1) // 10**9)


def _retry_after(value: str | None) -> float:
    """Seconds a Retry-After asks for (delay-seconds or an HTTP date), 0 when absent or unreadable,
    at most _RETRY_AFTER_CAP."""
    if not value:
        return 0.0
    value = value.strip()
    if re.fullmatch("[0-9]+", value):
        return min(float(value), _RETRY_AFTER_CAP)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return min(max(0.0, when.timestamp() - time.time()), _RETRY_AFTER_CAP)


def _frames(resp: http.client.HTTPResponse, on_retry: Callable[[int], None] = lambda ms: None,
            max_size: int = MAX_EVENT_SIZE, ticket: str = "",
            on_id: Callable[[str], None] = lambda last_id: None) -> Iterator[tuple[str, str]]:
    """Server-Sent Events frames as (last event id, data), per the WHATWG rules: comments (the
    keep-alives) ignored, data lines joined with newlines, the id persisting across frames, a
    `retry:` of digits only handed to on_retry (milliseconds). Each event's end hands the last
    event ID to on_id (once this connection has set one), before its frame, whether or not the
    event has data. A line or one event's data beyond max_size bytes is a ProtocolError."""
    data: list[str] = []
    size = 0
    frame_id = None
    too_large = lambda: ProtocolError(f"event stream for {ticket}: a line or an event exceeds {max_size} bytes")
    first = True
    for raw in _lines(resp, max_size, too_large):
        if first:
            # A BOM opening the stream is dropped (WHATWG, as the Go and TypeScript clients): it
            # made the first line's field "\ufeffdata", ignored, and its event was lost.
            first = False
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        # As the WHATWG rules and a browser: bytes that are not UTF-8 are U+FFFD, not a failed connection.
        line = raw.decode("utf-8", errors="replace")
        if line == "":
            if frame_id is not None:
                on_id(frame_id)
            if data:
                yield frame_id or "", "\n".join(data)
            data, size = [], 0
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            # In bytes as received, as the line's bound and the Go client: the field and its
            # space are ASCII, so the value is the rest of the raw line. Counted in characters,
            # data of "é" passed a bound of n bytes at up to 2n.
            size += len(raw) - (len(line) - len(value)) + 1
            if size > max_size + 1:
                raise too_large()
            data.append(value)
        elif field == "id" and "\0" not in value:
            frame_id = value
        elif field == "retry" and re.fullmatch("[0-9]+", value):
            on_retry(int(value))
    # End of stream (before done: the caller resumes).


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _lines(resp: http.client.HTTPResponse, max_size: int, too_large: Callable[[], Exception]) -> Iterator[bytes]:
    """The stream's lines without their ends, as each arrives. A line ends at CRLF, LF or a lone
    CR, as the WHATWG rules say (readline knew only LF: a stream of bare CRs was one line, held
    until it passed the bound). A CR that ends one read may be half of a CRLF, so a LF that opens
    the next read is its end, not an empty line. A line longer than max_size raises too_large();
    a line the stream ends in the middle of is not one, and is dropped. Each read is scanned once
    and a long line is kept in its reads' pieces, joined once it ends."""
    parts: list[bytes] = []  # the line so far, from earlier reads
    size = 0
    after_cr = False
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            return
        start = 1 if after_cr and chunk[:1] == b"\n" else 0
        for m in _LINE_END.finditer(chunk, start):
            size += m.start() - start
            if size > max_size:
                raise too_large()
            parts.append(chunk[start:m.start()])
            yield b"".join(parts)
            parts, size = [], 0
            start = m.end()
        after_cr = chunk.endswith(b"\r")  # then it ended a line, and start is past it
        if start < len(chunk):
            size += len(chunk) - start
            if size > max_size:
                raise too_large()
            parts.append(chunk[start:])


# ---- presentation: this client's own words --------------------------------------------------


def milestone_words(m: dict) -> str:
    subject = m.get("subject", "")
    phase = m.get("phase")
    # "catalog" and "query" are the service's placeholders when it can name no term or table
    # (MilestoneBody.subject): they read 'Checking what "catalog" means' and "Querying query".
    if phase == "grounding":
        return "Looking in the catalog" if subject in ("", "catalog") else f'Checking what "{subject}" means in the catalog'
    if phase == "discovering":
        return "Seeing which tables there are" if subject == "tables" else f"Reading how the {subject} table is laid out"
    if phase == "querying":
        return f"Querying the {m.get('source', '')} data" if subject in ("", "query") else f"Querying {subject}"
    if phase == "reconciling":
        # The subject is the terms or tables reconciled, or "sources" when there are none (the
        # source field names the sources): "Combining sources across sources" said nothing.
        return "Combining what the sources found" if subject in ("", "sources") else f"Combining what the sources found on {subject}"
    return f"Working on {subject}"


def divergence_words(d: dict) -> str:
    """What the answer would have been without the catalog's definitions (answer.divergence, a
    phase-2 run): "Without the catalog's definition of …, the answer would have been …"."""
    without = d.get("without") or []
    defs = "definitions" if len(without) > 1 else "definition"
    result = d.get("result") or {}
    rows, columns = result.get("rows") or [], result.get("columns") or []
    what = "a different result"
    if d.get("headline"):
        what = f"{d['headline']['value']} ({d['headline']['label']})"
    elif len(rows) == 1:
        what = ", ".join(f"{c} {v}" for c, v in zip(columns, rows[0]))
    elif len(rows) > 1:
        what = f"{len(rows)} rows of {', '.join(columns)}"
    return f"Without the catalog's {defs} of {', '.join(without)}, the answer would have been {what}."


def describe_outcome(o: dict) -> str:
    kind = o["type"]
    if kind == "answer":
        lines = []
        if o.get("headline"):
            lines.append(f"{o['headline']['value']} ({o['headline']['label']})")
        lines.append(o["text"])
        result = o.get("result")
        if result and result.get("rows") and not (o.get("headline") and len(result["rows"]) == 1):
            lines.append("  " + " | ".join(result["columns"]))
            lines.extend("  " + " | ".join(str(v) for v in row) for row in result["rows"])
        if result and result.get("truncated"):
            # Else the rows read as the whole answer.
            lines.append("  (the source capped these rows: there are more)")
        for c in o.get("caveats", []):
            lines.append(f"Keep in mind — {c['term']}: {c['text']} ({c['source']})")
        for p in o.get("provenance", []):
            lines.append(f"Rests on — {p['term']}: {p['statement']} ({p['source']})")
        if o.get("divergence"):
            lines.append(divergence_words(o["divergence"]))
        fast = o.get("path", {}).get("speed") == "fast"
        lines.append("Answered from the catalog alone." if fast else "Answered by querying the data.")
        return "\n".join(lines)
    if kind == "abstention":
        # What was really tried (no lookup claimed when no tool ran), then the agent's own words.
        terms, sources = o.get("terms", []), o.get("sources") or []
        if not terms and not sources:
            line = "No answer: nothing was looked up (the agent called no tool)."
        elif not terms:
            line = f"No answer: nothing found in {', '.join(sources)} answers this."
        else:
            line = f"No answer: the catalog has nothing to answer this from. Looked for: {', '.join(terms)}."
        if o.get("text"):
            line += f"\nThe agent said: {o['text']}"
        return line
    if kind == "refusal":
        return (f"Refused: the {o['source']} source refused {o['tool']} for you ({o['reason']}). "
                "This is recorded in its audit log; it is not an empty result.")
    if kind == "error":
        return "Cancelled." if o["kind"] == "cancelled" else f"Not answered ({o['kind']}): {o['message']}"
    return f"(an outcome of a kind this client does not know: {kind})"


def branch_words(b: dict) -> str | None:
    """The line that stands for a branch below the supervisor's as it opens (a phase-2 run), or
    None for the supervisor's own branch and for a close."""
    if b.get("role") == "supervisor" or b.get("state") != "open":
        return None
    if b.get("role") == "withheld":
        return "Also answering without the catalog, to compare"
    return f"Asking {b.get('source') or b.get('branch_id')}"


def follow(stream: EventStream, progress: Callable[[str], None] = lambda s: None,
           on_event: Callable[[dict], None] = lambda e: None, branches: bool = False) -> tuple[dict, dict]:
    """Follows a stream to done; returns (outcome, done). Milestones go to progress, in words,
    each said once. A phase-2 run's branches are collapsed: one line as each opens, and a
    branch's own milestones only with branches=True, marked with the branch (phase 1 names no
    branch, so nothing changes for it)."""
    outcome, said = None, None
    labels: dict[str, str] = {}  # branch_id -> label, for the branches below the supervisor's
    said_in: dict[str, str] = {}  # a branch's label -> its last milestone said
    for event in stream:
        on_event(event)
        if event["type"] == "branch":
            words = branch_words(event)
            if words is not None:
                b = event
                labels[b.get("branch_id", "")] = "without the catalog" if b.get("role") == "withheld" else (b.get("source") or b.get("branch_id", ""))
                progress(words)
        elif event["type"] == "milestone":
            words = milestone_words(event)
            of = labels.get(event.get("branch_id")) if "branch_id" in event else None
            if of is not None:
                if branches and said_in.get(of) != words:
                    progress(f"  [{of}] {words}")
                    said_in[of] = words
                continue
            if words != said:
                progress(words)
                said = words
        elif event["type"] in OUTCOMES:
            outcome = event
        elif event["type"] == "done":
            if outcome is None:
                raise RuntimeError("done arrived without a terminal event")
            return outcome, event
    raise RuntimeError("the stream ended without done")


# Control characters a terminal acts on (C0 but line feed and tab, DEL, C1, and the bidirectional
# controls): what the service sends comes from a model and from sources, which data can steer, and
# ESC [2K with CR would overwrite a line with a forged one. The CLI shows them as escapes.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str, one_line: bool = False) -> str:
    """text as a terminal should show it: every control character as its escape (\\x1b), line
    breaks and tabs kept unless one_line."""
    def escape(m: re.Match) -> str:
        c = ord(m.group())
        return f"\\x{c:02x}" if c < 0x80 else f"\\u{c:04x}"
    text = _CONTROLS.sub(escape, text)
    if one_line:
        text = text.replace("\n", "\\x0a").replace("\t", "\\x09")
    return text


# CANCEL_GRACE bounds what Ctrl-C waits for, in seconds: the cancel request and the run's
# confirmation (error{cancelled}, then done) together, as the Go CLI.
CANCEL_GRACE = 5.0


def interrupt_signals() -> list[signal.Signals]:
    """The signals that cancel the run as Ctrl-C does, as the Go CLI: SIGINT, SIGTERM, and
    SIGHUP, the terminal closing, unless it is ignored (nohup: the run is meant to outlive the
    terminal). SIGTERM's default (and SIGHUP's) killed the client at once, exit 143 (129), and
    left the run going on the service, uncancelled, spending its owner's quota."""
    sigs = [signal.SIGINT]
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            sigs.append(sig)
    return sigs


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class _Interruptible:
    """While in it, every one of interrupt_signals() is a Ctrl-C (KeyboardInterrupt); the
    handlers before are put back on leaving. Off the main thread there is no signal to take."""

    def __init__(self, handler=_interrupt):
        self._handler = handler
        self._previous: dict = {}

    def __enter__(self):
        try:
            for sig in interrupt_signals():
                self._previous[sig] = signal.signal(sig, self._handler)
        except ValueError:
            pass  # not the main thread
        return self

    def __exit__(self, *exc) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()


class _HeldInterrupt(_Interruptible):
    """Holds a Ctrl-C (or SIGTERM, SIGHUP) while the ask is being made: once the ask may exist,
    its request completes, so that the ticket it returns can be cancelled. A second one leaves at
    once."""

    def __init__(self):
        super().__init__(self._hold)
        self.pressed = False

    def _hold(self, signum, frame):
        if self.pressed:
            raise KeyboardInterrupt
        self.pressed = True


def _cancel_and_wait(client: AskClient, ticket: str, last_seq: int, outcome: dict | None, stderr) -> dict | None:
    """After Ctrl-C: one cancel, then the stream from last_seq until done, all within
    CANCEL_GRACE. Returns the run's outcome (error{cancelled}, or whatever the run ended with
    first), or None when it was not confirmed in time; says why on stderr. A second Ctrl-C
    leaves at once."""
    # The ticket is named so that a second Ctrl-C, which leaves at once, leaves it findable.
    print(f"Cancelling ticket {ticket}… (Ctrl-C again leaves at once; ask --follow {ticket} shows how it ended)",
          file=stderr)
    deadline = time.monotonic() + CANCEL_GRACE
    left = lambda: max(0.05, deadline - time.monotonic())
    quick = AskClient(client.base_url, client.token, timeout=left(), retry=Retry(attempts=1))
    try:
        try:
            quick.cancel(ticket)
        except (APIError, OSError) as e:
            print(f"ask_client: interrupted; ticket {ticket} could not be cancelled and may still be running "
                  f"({printable(str(e), True)})", file=stderr)
            return None
        quick.timeout = left()
        for event in EventStream(quick, ticket, after=last_seq, attempts=0):
            if event["type"] in OUTCOMES:
                outcome = event
            elif event["type"] == "done" and outcome is not None:
                return outcome
            if event["type"] == "done" or time.monotonic() >= deadline:
                break
    except (KeyboardInterrupt, APIError, ProtocolError, OSError):
        pass  # a second Ctrl-C, or the stream failed: leave without the confirmation
    print(f"ask_client: interrupted; the cancel of ticket {ticket} was sent, but the run did not confirm it "
          f"within {CANCEL_GRACE:g} s", file=stderr)
    return None


def _oid_of(token: str) -> str:
    """The oid claim of a JWT, read without verifying it (the service verifies); "" if none."""
    parts = token.split(".")
    if len(parts) != 3:
        return ""
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, TypeError):
        return ""
    oid = claims.get("oid") if isinstance(claims, dict) else None
    return oid if isinstance(oid, str) else ""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 1, as the docstring and the Go CLI say: argparse's own 2
    is this CLI's abstention, so a mistyped flag read as "the agent abstained"."""

    def error(self, message: str):
        # The message quotes what was mistyped, a --url with its password perhaps.
        self.print_usage(sys.stderr)
        self.exit(1, f"{self.prog}: error: {_redacted(message)}\n")


def main(argv: list[str] | None = None, stdout=sys.stdout, stderr=sys.stderr) -> int:
    """The CLI. Ctrl-C (or SIGTERM, or SIGHUP unless ignored: interrupt_signals) cancels the run
    on the service (one cancel, its ticket named), waits for the run to confirm it (at most
    CANCEL_GRACE, the cancel included), prints "Cancelled." and returns 4, as the Go CLI does;
    before the ask was made it asks nothing and returns 4 too. Never a traceback."""
    ap = _Parser(
        description="Ask the ask service a question. Progress goes to stderr, the outcome to stdout.",
        epilog="Exit status: 0 answer, 2 abstention, 3 refusal, 4 error (a cancelled run included), "
               "1 anything else. Ctrl-C (SIGTERM, or the terminal closing unless under nohup) cancels the ask "
               "and waits at most 5 s for the run to confirm.")
    url = os.environ.get("ASK_URL", "http://127.0.0.1:8080/ask")
    ap.add_argument("--url", default=url,  # the help shows a password in $ASK_URL as xxxxx
                    help=f"the service, gateway prefix included ($ASK_URL; default {_redacted(url).replace('%', '%%')})")
    ap.add_argument("--idp", default=os.environ.get("ASK_IDP", "http://127.0.0.1:8090"),
                    help="the development identity provider that mints a token without --token ($ASK_IDP; default %(default)s)")
    ap.add_argument("--as", dest="oid", metavar="OID", default=None,
                    help=f"the identity to mint a token for ($ASK_OID; default {os.environ.get('ASK_OID', 'alice')})")
    ap.add_argument("--token", default=os.environ.get("ASK_TOKEN", ""),
                    help="the bearer token ($ASK_TOKEN); default: one minted from --idp for --as")
    ap.add_argument("--branches", action="store_true", help="a phase-2 run: also show each branch's own progress")
    ap.add_argument("--webhook", metavar="URL", default="",
                    help="also have the service POST the run's end to URL (under a prefix the operator allows)")
    ap.add_argument("question", nargs="+")
    args = ap.parse_args(argv)
    # A token asks as its own identity: an --as naming another beside it was ignored, and the
    # ask made as the token's owner (--as bob with alice's token read what bob may not).
    owner = _oid_of(args.token)
    if args.oid is not None and owner and owner != args.oid:
        ap.error(f"--as {args.oid}, but the token from --token (or $ASK_TOKEN) is {owner}'s, and a token asks "
                 f"as its own identity: drop --as, or give {args.oid}'s token")
    if args.oid is None:
        args.oid = os.environ.get("ASK_OID", "alice")
    with _Interruptible():
        return _ask(args, stdout, stderr)


def _ask(args: argparse.Namespace, stdout, stderr) -> int:
    """main's ask, made, followed and printed, with every interrupt signal a KeyboardInterrupt."""
    progress = lambda s: print(f"… {printable(s, True)}", file=stderr)
    try:
        try:
            token = args.token or mint_dev_token(args.idp, args.oid)
            client = AskClient(args.url, token, on_retry=lambda op, n, delay, cause: print(
                f"ask_client: {op}: retrying (attempt {n}) in {delay:.2f} s: {printable(str(cause), True)}", file=stderr))
            conversation = client.create_conversation()
        except KeyboardInterrupt:
            print("ask_client: interrupted; nothing was asked", file=stderr)
            return 4
        try:
            with _HeldInterrupt() as held:
                ticket = client.ask(conversation["id"], " ".join(args.question), webhook=args.webhook or None)["ticket"]
        except KeyboardInterrupt:
            print("ask_client: interrupted while asking; the ask may have been made, and was not cancelled", file=stderr)
            return 4
        seen = {"seq": 0, "outcome": None}

        def on_event(event: dict) -> None:
            seen["seq"] = event["seq"]
            if event["type"] in OUTCOMES:
                seen["outcome"] = event

        try:
            if held.pressed:
                raise KeyboardInterrupt
            outcome, _ = follow(client.events(ticket), progress=progress, on_event=on_event, branches=args.branches)
        except KeyboardInterrupt:
            # The person has gone: stop spending their quota, and say how the run ended.
            confirmed = _cancel_and_wait(client, ticket, seen["seq"], seen["outcome"], stderr)
            if confirmed is None:
                return 4
            outcome = confirmed
    except (APIError, ProtocolError, TokenError, BaseURLError, MayHaveBeenMade, OSError, RuntimeError) as e:
        print(f"ask_client: {printable(str(e))}", file=stderr)
        return 1
    print(printable(describe_outcome(outcome)), file=stdout)
    return {"answer": 0, "abstention": 2, "refusal": 3}.get(outcome["type"], 4)


if __name__ == "__main__":
    sys.exit(main())
