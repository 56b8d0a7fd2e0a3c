"""The Python example against the dev stack: ask, follow the stream, print the outcome, and
resume after a dropped connection with no gap.

The stack comes from ASK_URL and ASK_IDP (set by scripts/clients-test.sh); without them this
module builds and starts cmd/clients-stack itself, and stops it when the tests end.

    python3 -m unittest -v        # in clients/python
"""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import math
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock
import urllib.error
import urllib.parse
import urllib.request

import ask_client

SEV1 = "How many sev1 incidents did we have in 2026-Q2?"
SLOW_SEV1 = "Take your time: how many sev1 incidents did we have in 2026-Q2?"

_stack: subprocess.Popen | None = None
_stack_dir: str | None = None


def setUpModule() -> None:
    global _stack, _stack_dir
    if os.environ.get("ASK_URL") and os.environ.get("ASK_IDP"):
        return
    repo = pathlib.Path(__file__).resolve().parents[2]
    _stack_dir = tempfile.mkdtemp(prefix="ask-py-stack-")
    binary = os.path.join(_stack_dir, "clients-stack")
    subprocess.run(["go", "build", "-o", binary, "./cmd/clients-stack"], cwd=repo, check=True)
    urls = os.path.join(_stack_dir, "urls.json")
    _stack = subprocess.Popen([binary, "-urls", urls], stdout=subprocess.DEVNULL)
    for _ in range(300):
        if os.path.exists(urls):
            break
        if _stack.poll() is not None:
            raise RuntimeError(f"clients-stack exited with {_stack.returncode}")
        time.sleep(0.1)
    with open(urls) as f:
        u = json.load(f)
    os.environ["ASK_URL"], os.environ["ASK_IDP"] = u["ask"], u["idp"]


def tearDownModule() -> None:
    if _stack is not None:
        _stack.terminate()
        _stack.wait(timeout=20)
        os.environ.pop("ASK_URL", None)
        os.environ.pop("ASK_IDP", None)
    if _stack_dir:
        shutil.rmtree(_stack_dir, ignore_errors=True)


def client_for(oid: str) -> ask_client.AskClient:
    return ask_client.AskClient(os.environ["ASK_URL"], ask_client.mint_dev_token(os.environ["ASK_IDP"], oid))


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = ask_client.main(["--url", os.environ["ASK_URL"], "--idp", os.environ["ASK_IDP"], *argv], out, err)
    return code, out.getvalue(), err.getvalue()


class HelpTest(unittest.TestCase):
    """--help says what docs/clients.md does: each flag's variable and default, the exit statuses
    (it listed the flags bare: --url URL, --idp IDP, …)."""

    def test_help_names_variables_defaults_and_statuses(self):
        out = io.StringIO()
        unset = {k: v for k, v in os.environ.items() if k not in ("ASK_URL", "ASK_IDP", "ASK_OID", "ASK_TOKEN")}
        with mock.patch.dict(os.environ, unset, clear=True), contextlib.redirect_stdout(out), \
                self.assertRaises(SystemExit) as done:
            ask_client.main(["--help"])
        self.assertEqual(done.exception.code, 0)
        text = " ".join(out.getvalue().split())
        for want in ("$ASK_URL", "http://127.0.0.1:8080/ask", "$ASK_IDP", "http://127.0.0.1:8090",
                     "$ASK_OID", "alice", "$ASK_TOKEN", "0 answer, 2 abstention, 3 refusal, 4 error"):
            self.assertIn(want, text)


    def test_a_usage_error_is_1_not_an_abstention(self):
        # argparse exits 2 on a usage error, which is this CLI's abstention.
        for argv in ([], ["--bogus", "q"]):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as done:
                ask_client.main(argv)
            self.assertEqual(done.exception.code, 1, argv)
            self.assertIn("usage:", err.getvalue())


    def test_as_that_is_not_the_tokens_identity_is_a_usage_error(self):
        # --as bob beside alice's token was ignored, and the ask made as alice.
        alice = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"  # {"oid":"alice"}
        for argv, env in ((["--as", "bob", "--token", alice, "q"], {}), (["--as", "bob", "q"], {"ASK_TOKEN": alice})):
            err = io.StringIO()
            with mock.patch.dict(os.environ, env), contextlib.redirect_stderr(err), \
                    self.assertRaises(SystemExit) as done:
                ask_client.main(["--url", "http://127.0.0.1:1/ask", "--idp", "http://127.0.0.1:1", *argv])
            self.assertEqual(done.exception.code, 1, argv)
            self.assertIn("--as bob, but the token from --token (or $ASK_TOKEN) is alice's", err.getvalue())
            self.assertNotIn(alice[20:], err.getvalue(), "the token is not shown")
        self.assertEqual(ask_client._oid_of(alice), "alice")
        self.assertEqual(ask_client._oid_of("opaque"), "")


class IdPFromTheEnvironmentTest(unittest.TestCase):
    """Without --idp, the token is minted by the IdP at $ASK_IDP, the name the ask CLI, make token,
    conformance and ask-eval read."""

    def test_ask_idp_mints_the_token(self):
        asked: list[str] = []

        class IdP(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                asked.append(self.path)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = b'{"access_token":"t"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        idp = FakeStreamTest.serve(self, IdP).removesuffix("/ask")
        err = io.StringIO()
        with mock.patch.dict(os.environ, {"ASK_IDP": idp}), mock.patch.dict(os.environ):
            os.environ.pop("ASK_TOKEN", None)
            code = ask_client.main(["--url", f"http://127.0.0.1:{closed_port()}/ask", "q"], io.StringIO(), err)
        self.assertEqual(asked, ["/token"], err.getvalue())
        self.assertEqual(code, 1, "nothing listens at --url")


    def test_an_idp_that_sends_no_token_is_said_without_a_traceback(self):
        # A page, JSON without access_token, JSON that is not an object: a JSONDecodeError, a
        # KeyError and a TypeError escaped main as tracebacks.
        for body in (b"<html>sign in</html>", b'{"token":"x"}', b"[1]"):
            class IdP(http.server.BaseHTTPRequestHandler):
                def log_message(self, *args):
                    pass

                def do_POST(self):
                    self.rfile.read(int(self.headers.get("Content-Length") or 0))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)

            idp = FakeStreamTest.serve(self, IdP).removesuffix("/ask")
            err = io.StringIO()
            with mock.patch.dict(os.environ):
                os.environ.pop("ASK_TOKEN", None)
                code = ask_client.main(["--url", f"http://127.0.0.1:{closed_port()}/ask", "--idp", idp, "q"], io.StringIO(), err)
            self.assertEqual(code, 1, body)
            self.assertIn(f"the development identity provider at {idp} sent no access_token", err.getvalue())

    def test_an_idp_that_is_not_listening_is_named(self):
        idp = f"http://127.0.0.1:{closed_port()}"
        err = io.StringIO()
        with mock.patch.dict(os.environ):
            os.environ.pop("ASK_TOKEN", None)
            code = ask_client.main(["--url", f"http://127.0.0.1:{closed_port()}/ask", "--idp", idp, "q"], io.StringIO(), err)
        self.assertEqual(code, 1)
        self.assertIn(f"could not mint a token from the development identity provider at {idp}", err.getvalue())


class PrintableTest(unittest.TestCase):
    def test_controls_are_shown_as_escapes(self):
        # What a steered model or source could send: erase the line, write a forged one, hide text.
        said = "Fine.\x1b[2K\rForged: 0 incidents \x1b[8mhidden\u202e\x9b\nnext\tcol"
        self.assertEqual(ask_client.printable(said),
                         "Fine.\\x1b[2K\\x0dForged: 0 incidents \\x1b[8mhidden\\u202e\\u009b\nnext\tcol")
        self.assertEqual(ask_client.printable("a\nb\tc", one_line=True), "a\\x0ab\\x09c")
        self.assertEqual(ask_client.printable("Ünïcode — fine ✓"), "Ünïcode — fine ✓")


class DivergenceTest(unittest.TestCase):
    """A phase-2 answer's divergence is said, as by the other clients (it was dropped)."""

    def test_the_divergence_sentence(self):
        answer = {"type": "answer", "text": "Team Platform, at 14.3%.", "caveats": [], "provenance": [],
                  "path": {"speed": "full"}, "divergence": {
                      "result": {"columns": ["team", "failure_rate_pct"], "rows": [["Data", 11.1]]}, "sql": ["SELECT 1"],
                      "without": ["change failure rate"]}}
        want = "Without the catalog's definition of change failure rate, the answer would have been team Data, failure_rate_pct 11.1."
        self.assertEqual(ask_client.divergence_words(answer["divergence"]), want)
        # docs/clients.md quotes this sentence as the clients say it (it quoted the page's
        # "failure rate pct", which no CLI or client library says).
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "clients.md"), encoding="utf-8") as f:
            self.assertTrue(want in " ".join(f.read().split()), "docs/clients.md does not quote the sentence the clients say")
        self.assertIn(want, ask_client.describe_outcome(answer))
        self.assertNotIn("Without the catalog", ask_client.describe_outcome({**answer, "divergence": None}))
        many = {**answer["divergence"], "without": ["a", "b"], "result": {"columns": ["team"], "rows": [["x"], ["y"]]}}
        self.assertEqual(ask_client.divergence_words(many),
                         "Without the catalog's definitions of a, b, the answer would have been 2 rows of team.")


class ResultTest(unittest.TestCase):
    def test_rows_the_source_capped_are_said_to_be_capped(self):
        answer = {"type": "answer", "text": "Per team.", "caveats": [], "provenance": [], "path": {"speed": "full"},
                  "result": {"columns": ["team", "n"], "rows": [["Data", 1], ["Mobile", 2]], "truncated": True}}
        said = ask_client.describe_outcome(answer)
        self.assertIn("  Mobile | 2", said)
        self.assertIn("the source capped these rows: there are more", said)
        whole = ask_client.describe_outcome({**answer, "result": {**answer["result"], "truncated": False}})
        self.assertNotIn("capped", whole)


class MilestoneWordsTest(unittest.TestCase):
    def test_placeholder_subject_is_said_without_it(self):
        # The service's subjects when it can name no term or table (the contract's
        # MilestoneBody.subject).
        m = lambda phase, subject: {"type": "milestone", "phase": phase, "subject": subject, "source": "demo"}
        self.assertEqual(ask_client.milestone_words(m("grounding", "catalog")), "Looking in the catalog")
        self.assertEqual(ask_client.milestone_words(m("grounding", "incident")), 'Checking what "incident" means in the catalog')
        self.assertEqual(ask_client.milestone_words(m("discovering", "tables")), "Seeing which tables there are")
        # docs/clients.md's words, and the page's: it said "Reading how incidents is laid out".
        self.assertEqual(ask_client.milestone_words(m("discovering", "incidents")), "Reading how the incidents table is laid out")
        self.assertEqual(ask_client.milestone_words(m("querying", "query")), "Querying the demo data")
        self.assertEqual(ask_client.milestone_words(m("querying", "incidents")), "Querying incidents")

    def test_reconciling_says_what_was_combined(self):
        # The subject is the terms or tables reconciled, else "sources": that read "Combining
        # sources across sources".
        m = lambda subject: {"type": "milestone", "phase": "reconciling", "subject": subject, "source": "catalog,warehouse"}
        self.assertEqual(ask_client.milestone_words(m("sources")), "Combining what the sources found")
        self.assertEqual(ask_client.milestone_words(m("change failure rate")),
                         "Combining what the sources found on change failure rate")


class BranchesTest(unittest.TestCase):
    """A phase-2 run's branches collapsed, as the other clients: every branch's milestones were
    printed in the main list."""

    def test_branches_are_collapsed(self):
        e = lambda seq, type, **kw: {"seq": seq, "type": type, **kw}
        events = [e(1, "accepted"), e(2, "branch", branch_id="b0", role="supervisor", state="open"),
                  e(3, "branch", branch_id="b1", role="source", source="catalog", state="open"),
                  e(4, "branch", branch_id="b2", role="withheld", state="open"),
                  e(5, "milestone", phase="grounding", subject="incident", source="catalog", branch_id="b1"),
                  e(5, "milestone", phase="grounding", subject="incident", source="catalog", branch_id="b1"),
                  e(6, "milestone", phase="querying", subject="incidents", source="warehouse", branch_id="b2"),
                  e(7, "milestone", phase="reconciling", subject="sources", source="catalog,warehouse", branch_id="b0"),
                  e(8, "answer", text="t"), e(9, "done", steps=0)]

        class Stream:
            def __iter__(self):
                return iter(events)

        said: list[str] = []
        ask_client.follow(Stream(), progress=said.append)
        self.assertEqual(said, ["Asking catalog", "Also answering without the catalog, to compare",
                                "Combining what the sources found"])
        said = []
        ask_client.follow(Stream(), progress=said.append, branches=True)
        self.assertIn('  [catalog] Checking what "incident" means in the catalog', said)
        self.assertIn("  [without the catalog] Querying incidents", said)
        self.assertEqual(said.count('  [catalog] Checking what "incident" means in the catalog'), 1, "a repeated milestone said once")
        phase1 = [ev for ev in events if ev.get("branch_id") in (None, "b0")]
        said = []

        class One:
            def __iter__(self):
                return iter(phase1)

        ask_client.follow(One(), progress=said.append)
        self.assertEqual(said, ["Combining what the sources found"], "phase 1: the supervisor's milestones, as before")


class FakeStreamTest(unittest.TestCase):
    """The stream against a scripted local server: what the dev stack cannot be made to do."""

    def serve(self, handler) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return f"http://127.0.0.1:{server.server_address[1]}/ask"

    def test_retry_after_is_honoured(self):
        arrivals: list[float] = []
        events = [
            {"seq": 1, "type": "accepted"},
            {"seq": 2, "type": "error", "kind": "cancelled", "message": "cancelled"},
            {"seq": 3, "type": "done", "outcome": "error"},
        ]

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                arrivals.append(time.monotonic())
                if len(arrivals) == 1:
                    body = b'{"type":"about:blank","title":"Service Unavailable","status":503}'
                    self.send_response(503)
                    self.send_header("Retry-After", "1")
                    self.send_header("Content-Type", "application/problem+json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                body = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        client = ask_client.AskClient(self.serve(Handler), "t")
        outcome, _ = ask_client.follow(client.events("t_1"))
        self.assertEqual(outcome["kind"], "cancelled")
        self.assertEqual(len(arrivals), 2)
        self.assertGreaterEqual(arrivals[1] - arrivals[0], 1.0, "the reconnect waited for Retry-After")


    def test_a_redirect_is_not_followed(self):
        seen: list[str] = []

        class Elsewhere(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                seen.append(self.headers.get("Authorization", ""))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        elsewhere = self.serve(Elsewhere)

        class Redirect(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(302)
                self.send_header("Location", elsewhere + "/v1/asks/t_1")
                self.send_header("Content-Length", "0")
                self.end_headers()

        client = ask_client.AskClient(self.serve(Redirect), "secret-bearer")
        with self.assertRaises(ask_client.APIError) as caught:
            client.status("t_1")
        self.assertEqual(caught.exception.status, 302)
        self.assertEqual(seen, [], "the bearer went to the redirect's target")


def scripted(replies: list, seen: list):
    """A handler answering each request with the next of replies, then 201 with a conversation;
    it records (method, path, headers) of every request in seen. A reply is (status, headers,
    body), or None to close the connection without answering (a reset, a lost reply)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            seen.append((self.command, self.path, dict(self.headers)))
            r = replies[len(seen) - 1] if len(seen) <= len(replies) else (201, {}, {"id": "c_1", "created_at": "2026-12-04T20:00:00Z"})
            if r is None:
                self.close_connection = True
                return
            status, headers, body = r
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            headers = {"Content-Type": "application/problem+json" if status >= 400 else "application/json", **headers}
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = reply

    return Handler


def problem(status: int, **extra) -> dict:
    return {"type": "about:blank", "title": "x", "status": status, **extra}


IN_PROGRESS = problem(409, type=ask_client.PROBLEM_IDEMPOTENCY_IN_PROGRESS)

# The least answer the contract allows.
ANSWER = {"type": "answer", "text": "t", "caveats": [], "provenance": [], "sql": [], "divergence": None,
          "path": {"speed": "fast", "detail": "catalog"}}


class RetryTest(unittest.TestCase):
    """Calls against scripted local servers: which failures a create retries, with what key, wait
    and budget (the Go client's rules); the waits go to a fake clock, never slept."""

    serve = FakeStreamTest.serve

    def client(self, url: str, **kw) -> tuple[ask_client.AskClient, list[float], list[str]]:
        waits: list[float] = []
        said: list[str] = []
        c = ask_client.AskClient(url, "t", sleep=waits.append,
                                 on_retry=lambda op, n, d, cause: said.append(f"{op}#{n}"), **kw)
        return c, waits, said

    def test_transient_failures_are_retried_with_one_key(self):
        seen: list = []
        replies = [(502, {}, problem(502)), (503, {"Retry-After": "2"}, problem(503)), None,
                   (504, {}, b"<html>gateway</html>"), (409, {"Retry-After": "1"}, IN_PROGRESS)]
        c, waits, said = self.client(self.serve(scripted(replies, seen)))
        self.assertEqual(c.create_conversation()["id"], "c_1")
        self.assertEqual(len(seen), 6)
        keys = [h.get("Idempotency-Key") for _, _, h in seen]
        self.assertRegex(keys[0], r'^"[0-9a-f]{32}"$', "an sf-string key")
        self.assertEqual(set(keys), {keys[0]}, "one key on every attempt")
        self.assertEqual(said, [f"createConversation#{n}" for n in range(2, 7)], "every retry is said")
        self.assertGreaterEqual(waits[1], 2.0, "never sooner than Retry-After")
        self.assertGreaterEqual(waits[4], 1.0, "the in-progress 409's Retry-After")
        self.assertTrue(all(0 <= w <= 5.0 for w in waits[:1] + waits[2:4]), waits)

    def test_an_ask_is_retried_with_one_key_and_a_fresh_key_per_ask(self):
        seen: list = []
        ticket = (202, {}, {"ticket": "t_1", "conversation_id": "c_1"})
        c, _, _ = self.client(self.serve(scripted([None, ticket, ticket], seen)))
        c.ask("c_1", SEV1)
        c.ask("c_1", SEV1)
        keys = [h.get("Idempotency-Key") for _, _, h in seen]
        self.assertEqual(len(keys), 3)
        self.assertEqual(keys[0], keys[1], "the retry sends the first attempt's key")
        self.assertNotEqual(keys[1], keys[2], "another ask, another key")

    def test_refusals_are_not_retried(self):
        for status, body, headers in [(400, problem(400), {}), (401, problem(401), {}), (404, problem(404), {}),
                                      (409, problem(409, ticket="t_running"), {}), (422, problem(422), {}),
                                      (429, problem(429), {"Retry-After": "7"}), (500, problem(500), {})]:
            seen: list = []
            c, waits, _ = self.client(self.serve(scripted([(status, headers, body)], seen)))
            with self.assertRaises(ask_client.APIError) as caught:
                c.ask("c_1", SEV1)
            self.assertEqual((caught.exception.status, len(seen), waits), (status, 1, []), f"status {status}")
            if status == 429:
                self.assertEqual(caught.exception.retry_after, 7.0, "a 429 carries its Retry-After for the caller")
            if status == 409:
                self.assertEqual(caught.exception.running_ticket, "t_running")

    def test_a_success_that_is_not_json_is_final_and_the_cli_says_so(self):
        # A wrong --url that lands on a web server (a captive portal, a single-page app) answers
        # 200 with a page: not the contract, so final, and never a traceback from the CLI.
        for body in (b"<html>sign in to the portal</html>", b"[]", b"null"):
            seen: list = []
            url = self.serve(scripted([(200, {"Content-Type": "text/html"}, body)] * 8, seen))
            c, waits, said = self.client(url)
            with self.assertRaises(ask_client.ProtocolError, msg=body) as caught:
                c.create_conversation()
            self.assertIn("is not the service's JSON", str(caught.exception))
            self.assertEqual((len(seen), waits, said), (1, [], []), f"{body!r}: not retried")
        stdout, stderr = io.StringIO(), io.StringIO()
        code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=stdout, stderr=stderr)
        self.assertEqual(code, 1, stderr.getvalue())
        self.assertIn("is not the service's JSON", stderr.getvalue())
        self.assertNotIn("Traceback", stderr.getvalue())

    def test_a_retry_after_longer_than_a_call_waits_ends_it_at_once(self):
        # 3600 s was slept through in silence; 10^12 s (or a date in 9999) made time.sleep raise
        # OverflowError, a traceback from the CLI.
        for value, at_least in [("3600", 3600), ("1000000000000", 9e9), ("9" * 400, 9e9),
                                ("Fri, 31 Dec 9999 23:59:59 GMT", 9e9)]:
            seen: list = []
            url = self.serve(scripted([(503, {"Retry-After": value}, problem(503))] * 2, seen))
            c, waits, said = self.client(url)
            with self.assertRaises(ask_client.APIError, msg=value[:20]) as caught:
                c.create_conversation()
            e = caught.exception
            self.assertEqual((e.status, len(seen), waits, said), (503, 1, [], []), f"{value[:20]}: not waited for")
            self.assertGreaterEqual(e.retry_after, at_least)
            self.assertTrue(math.isfinite(e.retry_after))
            self.assertRegex(str(e), r"\(try again in [0-9]+ s\)$")
        stderr = io.StringIO()
        url = self.serve(scripted([(503, {"Retry-After": "3600"}, problem(503))], []))
        code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=io.StringIO(), stderr=stderr)
        self.assertEqual(code, 1)
        self.assertIn("createConversation: HTTP 503: x (try again in 3600 s)", stderr.getvalue())
        self.assertNotIn("Traceback", stderr.getvalue())
        # The bound is the caller's: Retry.max_retry_after.
        c, waits, _ = self.client(self.serve(scripted([(503, {"Retry-After": "2"}, problem(503))], [])),
                                  retry=ask_client.Retry(max_retry_after=1))
        with self.assertRaises(ask_client.APIError):
            c.create_conversation()
        self.assertEqual(waits, [])
        # 0 or less is the default (60 s), as in Go and TypeScript: a Retry-After of 2 s is waited for.
        for bound in (0, -1):
            c, waits, _ = self.client(self.serve(scripted([(503, {"Retry-After": "2"}, problem(503))], [])),
                                      retry=ask_client.Retry(max_retry_after=bound))
            self.assertEqual(c.create_conversation()["id"], "c_1", f"max_retry_after={bound}")
            self.assertEqual(len(waits), 1, f"max_retry_after={bound}")
            self.assertGreaterEqual(waits[0], 2.0)

    def test_a_retry_after_in_the_past_negative_or_unreadable_asks_for_no_wait(self):
        for value in ("Wed, 21 Oct 2015 07:28:00 GMT", "-5", "soon", "1.5", "3000-01-01"):
            c, waits, said = self.client(self.serve(scripted([(503, {"Retry-After": value}, problem(503))], [])))
            self.assertEqual(c.create_conversation()["id"], "c_1")
            self.assertEqual(len(waits), 1)
            self.assertLessEqual(waits[0], 5.0, value)

    def test_a_create_refused_after_a_lost_reply_says_it_may_have_been_made_and_where(self):
        # A 202 lost to a reset, then 503s: it read "createAsk: HTTP 503: x", a plain refusal,
        # while the first attempt's ticket ran.
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([None, (503, {}, problem(503)), (503, {}, problem(503))], seen)),
                                  retry=ask_client.Retry(attempts=3))
        with self.assertRaises(ask_client.MayHaveBeenMade) as caught:
            c.ask("c_1", SEV1)
        e = caught.exception
        self.assertEqual((e.operation, e.conversation_id, len(seen)), ("createAsk", "c_1", 3))
        self.assertIsInstance(e.cause, ask_client.APIError)
        self.assertEqual(str(e), "createAsk: HTTP 503: x (an earlier attempt's reply was lost: "
                                 "the ask may have been made and be running in conversation c_1)")
        # Nothing lost: the refusal itself.
        c, _, _ = self.client(self.serve(scripted([(503, {}, problem(503))] * 2, [])), retry=ask_client.Retry(attempts=2))
        with self.assertRaises(ask_client.APIError):
            c.ask("c_1", SEV1)
        # The CLI says so, without a traceback.
        conv = (201, {}, {"id": "c_7", "created_at": "2026-12-05T17:00:00Z"})
        url = self.serve(scripted([conv, None] + [(503, {}, problem(503))] * 7, []))
        stderr = io.StringIO()
        with mock.patch.object(ask_client.random, "uniform", return_value=0.0):
            code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=io.StringIO(), stderr=stderr)
        self.assertEqual(code, 1, stderr.getvalue())
        self.assertIn("may have been made and be running in conversation c_7", stderr.getvalue())
        self.assertNotIn("Traceback", stderr.getvalue())

    def test_a_password_in_the_url_is_never_sent_or_printed(self):
        # It was taken for part of the host's name: "no such host for http://u:s3cret@…".
        seen: list = []
        url = self.serve(scripted([(200, {"Content-Type": "text/html"}, b"<html>sign in</html>")] * 2, seen))
        secret = url.replace("http://", "http://u:s3cret@")
        c, _, _ = self.client(secret)
        with self.assertRaises(ask_client.ProtocolError) as caught:
            c.create_conversation()
        self.assertNotIn("s3cret", str(caught.exception))
        self.assertIn(url.replace("http://", "http://u:xxxxx@"), str(caught.exception))
        self.assertEqual([(m, p, h.get("Authorization")) for m, p, h in seen], [("POST", "/ask/v1/conversations", "Bearer t")])
        port = closed_port()
        c, _, _ = self.client(f"http://u:s3cret@127.0.0.1:{port}/ask")
        for call in (c.create_conversation, lambda: list(c.events("t_1"))):
            with self.assertRaises(ask_client.NothingListening) as caught:
                call()
            self.assertIn(f"nothing is listening at http://u:xxxxx@127.0.0.1:{port}/ask", str(caught.exception))
        # The CLI: its messages, --help with $ASK_URL, and a usage error quoting a mistyped flag.
        stderr = io.StringIO()
        self.assertEqual(ask_client.main(["--url", secret, "--token", "t", "q"], stdout=io.StringIO(), stderr=stderr), 1)
        out = io.StringIO()
        with mock.patch.dict(os.environ, {"ASK_URL": secret}), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out), self.assertRaises(SystemExit):
            ask_client.main(["--help"])
        with contextlib.redirect_stderr(out), self.assertRaises(SystemExit):
            ask_client.main(["--urll", secret, "q"])
        said = stderr.getvalue() + out.getvalue()
        self.assertIn("u:xxxxx@", said)
        self.assertNotIn("s3cret", said)

    def test_a_create_whose_reply_names_nothing_created_is_final_and_the_cli_says_so(self):
        # A 201 conversation where the ask's 202 ticket belongs, or {}: the CLI's ["ticket"] was a
        # KeyError traceback.
        conv = (201, {}, {"id": "c_1", "created_at": "2026-12-05T17:00:00Z"})
        for reply in (conv, (202, {}, {}), (202, {}, {"ticket": 7})):
            seen: list = []
            url = self.serve(scripted([conv, reply] * 4, seen))
            stderr = io.StringIO()
            code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=io.StringIO(), stderr=stderr)
            self.assertEqual(code, 1, stderr.getvalue())
            self.assertIn("createAsk: the response (HTTP", stderr.getvalue())
            self.assertIn("has no ticket", stderr.getvalue())
            self.assertNotIn("Traceback", stderr.getvalue())
            self.assertEqual(len(seen), 2, "not retried")
        c, _, _ = self.client(self.serve(scripted([(201, {}, {})], [])))
        with self.assertRaises(ask_client.ProtocolError):
            c.create_conversation()

    def test_a_reply_that_names_no_ticket_or_an_empty_one_is_final_for_every_call(self):
        # As in Go and TypeScript (docs/clients.md: "in all three"): an empty id or ticket, and a
        # status or cancel that names no ticket, were returned as the service's reply.
        calls = {
            "createConversation": (lambda c: c.create_conversation(), 201, "id"),
            "createAsk": (lambda c: c.ask("c_1", "q"), 202, "ticket"),
            "getAsk": (lambda c: c.status("t_1"), 200, "ticket"),
            "cancelAsk": (lambda c: c.cancel("t_1"), 202, "ticket"),
        }
        cases = [(op, call, status, field, body) for op, (call, status, field) in calls.items() for body in ({}, {field: ""})]
        seen: list = []
        c, _, _ = self.client(self.serve(scripted([(status, {}, body) for _, _, status, _, body in cases], seen)))
        for n, (op, call, status, field, body) in enumerate(cases, 1):
            with self.assertRaises(ask_client.ProtocolError, msg=f"{op} {body}") as caught:
                call(c)
            self.assertIn(f"{op}: the response (HTTP {status}", str(caught.exception))
            self.assertIn(f"has no {field}", str(caught.exception))
            self.assertEqual(len(seen), n, f"{op} {body}: retried")

    def test_a_token_that_cannot_be_a_bearer_is_refused_before_any_request(self):
        for token in ["", "abc\n", "ab c", "a\tb", "x\x7fy"]:
            with self.assertRaises(ask_client.TokenError) as caught:
                ask_client.AskClient("http://127.0.0.1:1/ask", token)
            if len(token) > 1:
                self.assertNotIn(token, str(caught.exception), "the token is never quoted")
        stderr = io.StringIO()
        code = ask_client.main(["--url", "http://127.0.0.1:1/ask", "--token", "secret-part\nrest", "a question"],
                               stdout=io.StringIO(), stderr=stderr)
        self.assertEqual(code, 1)
        self.assertIn("not a bearer token", stderr.getvalue())
        self.assertNotIn("secret-part", stderr.getvalue())

    def test_a_base_url_with_a_query_is_refused_and_its_query_not_quoted(self):
        # The service's paths were joined to the query ("/ask?k=1/v1/conversations"): found by
        # an audit. Refused when the client is made, as in Go and TypeScript; the CLI exits 1.
        for url in ("http://127.0.0.1:1/ask?key=s3cret", "http://127.0.0.1:1/ask#top", "http://127.0.0.1:1/ask?"):
            with self.assertRaises(ask_client.BaseURLError) as caught:
                ask_client.AskClient(url, "t")
            self.assertIn("query or a fragment", str(caught.exception))
            self.assertNotIn("s3cret", str(caught.exception))
        for url in ("ftp://127.0.0.1/ask", "127.0.0.1:8080/ask", ""):
            with self.assertRaises(ask_client.BaseURLError):
                ask_client.AskClient(url, "t")
        stderr = io.StringIO()
        code = ask_client.main(["--url", "http://127.0.0.1:1/ask?key=s3cret", "--token", "t", "a question"],
                               stdout=io.StringIO(), stderr=stderr)
        self.assertEqual(code, 1)
        self.assertIn("query or a fragment", stderr.getvalue())
        self.assertNotIn("s3cret", stderr.getvalue())

    def test_a_token_given_with_its_scheme_is_told_to_be_given_alone(self):
        # "Bearer eyJ…" pasted from a header was "white space or a control character at index 6",
        # which did not say what to change; the Go CLI says to give the token alone.
        token = "eyJhbGciOiJSUzI1NiJ9.eyJvaWQiOiJhbGljZSJ9.c2VjcmV0LXNpZ25hdHVyZQ"
        for given in ("Bearer " + token, "bearer " + token):
            for argv, env in ((["--token", given], {}), ([], {"ASK_TOKEN": given})):
                stderr = io.StringIO()
                with mock.patch.dict(os.environ, env):
                    code = ask_client.main(["--url", "http://127.0.0.1:1/ask", "--idp", "http://127.0.0.1:1", *argv, "q"],
                                           stdout=io.StringIO(), stderr=stderr)
                self.assertEqual(code, 1, stderr.getvalue())
                self.assertIn('the token starts with "Bearer ": give the token alone', stderr.getvalue())
                self.assertNotIn("index 6", stderr.getvalue())
                self.assertNotIn(token[20:], stderr.getvalue(), "the token is never quoted")

    def test_the_budget_ends_with_the_last_refusal(self):
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(503, {}, problem(503))] * 3, seen)), retry=ask_client.Retry(attempts=3))
        with self.assertRaises(ask_client.APIError) as caught:
            c.create_conversation()
        self.assertEqual((caught.exception.status, len(seen), len(waits)), (503, 3, 2))

    def test_nothing_listening_is_final_at_once(self):
        port = closed_port()
        c, waits, said = self.client(f"http://127.0.0.1:{port}/ask")
        with self.assertRaises(ask_client.NothingListening) as caught:
            c.create_conversation()
        self.assertIn(f"nothing is listening at http://127.0.0.1:{port}/ask", str(caught.exception))
        self.assertEqual((waits, said), ([], []), "not retried")
        with self.assertRaises(ask_client.NothingListening):
            list(c.events("t_1"))
        self.assertEqual(waits, [], "nor is the stream")

    def test_no_such_host_is_final_at_once_a_resolver_that_did_not_answer_is_not(self):
        # As in Go and TypeScript: a name that does not resolve is a wrong URL, said at once; a
        # lookup that failed for want of an answer from the resolver (EAI_AGAIN) may pass. It was
        # final too, said as "no such host for" a host that may well exist.
        import socket
        for errno, final in ((socket.EAI_NONAME, True), (socket.EAI_AGAIN, False)):
            with self.subTest(errno=errno), mock.patch.object(ask_client.socket, "getaddrinfo",
                                                              side_effect=socket.gaierror(errno, "lookup failed")):
                c, waits, said = self.client("http://ask.test/ask", retry=ask_client.Retry(attempts=2))
                with self.assertRaises(OSError) as caught:
                    c.create_conversation()
                self.assertEqual(isinstance(caught.exception, ask_client.NothingListening), final, caught.exception)
                self.assertEqual(said, [] if final else ["createConversation#2"])
                with self.assertRaises(OSError) as caught:
                    for _ in ask_client.EventStream(c, "t_1", attempts=2, max_wait=0.0):
                        pass
                self.assertEqual(isinstance(caught.exception, ask_client.NothingListening), final, caught.exception)
                if final:
                    self.assertIn("no such host for http://ask.test/ask", str(caught.exception))

    def test_a_refusal_once_the_service_answered_is_a_restart(self):
        port = closed_port()
        c, waits, said = self.client(f"http://127.0.0.1:{port}/ask", retry=ask_client.Retry(attempts=2))
        c.reached = True
        with self.assertRaises(OSError):
            c.create_conversation()
        self.assertEqual(said, ["createConversation#2"], "retried")

    def test_the_stream_resumes_after_a_5xx_and_stops_at_401_and_404(self):
        events = [{"seq": 1, "type": "error", "kind": "internal", "message": "m"}, {"seq": 2, "type": "done"}]
        sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        seen: list = []
        c, waits, said = self.client(self.serve(scripted([(500, {}, problem(500)), (200, {"Content-Type": "text/event-stream"}, sse)], seen)))
        outcome, _ = ask_client.follow(c.events("t_1"))
        self.assertEqual((outcome["kind"], len(seen), len(waits)), ("internal", 2, 1))
        self.assertEqual(said, ["streamEvents#2"], "the reconnect is said, as a call's retry")
        for status in (401, 404):
            seen = []
            c, waits, _ = self.client(self.serve(scripted([(status, {}, problem(status, detail="no such ticket"))], seen)))
            with self.assertRaises(ask_client.APIError) as caught:
                list(c.events("t_1"))
            self.assertEqual((caught.exception.status, len(seen), waits), (status, 1, []))
            self.assertIn("no such ticket", str(caught.exception))

    def test_an_id_without_data_is_the_last_event_id_a_resume_sends(self):
        # As the WHATWG rules, the Go and the TypeScript clients: event 2 has an id and no data, so
        # nothing is delivered for it but its id is the stream's last; the resume sent 1.
        sse = lambda evs, tail="": ("".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in evs) + tail).encode()
        first = sse([{"seq": 1, "type": "accepted"}], "id: 2\n\n")
        second = sse([{"seq": 3, "type": "error", "kind": "internal", "message": "m"}, {"seq": 4, "type": "done"}])
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, first),
                                                       (200, {"Content-Type": "text/event-stream"}, second)], seen)))
        stream = c.events("t_1")
        self.assertEqual([e["seq"] for e in stream], [1, 3, 4])
        self.assertEqual(stream.last_event_ids, ["", "2"])
        self.assertEqual([h.get("Last-Event-ID") for _, _, h in seen], [None, "2"])

    def test_a_refused_reconnects_retry_after_holds_for_the_next_connection_only(self):
        # As in Go: after one 503 with Retry-After: 3, each later plain drop waited 3 s too.
        events = [{"seq": 1, "type": "error", "kind": "internal", "message": "m"}, {"seq": 2, "type": "done"}]
        sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        empty = (200, {"Content-Type": "text/event-stream"}, b"")
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(503, {"Retry-After": "3"}, problem(503)), empty, empty,
                                                       (200, {"Content-Type": "text/event-stream"}, sse)], seen)))
        outcome, _ = ask_client.follow(c.events("t_1"))
        self.assertEqual((outcome["kind"], len(seen), len(waits)), ("internal", 4, 3))
        self.assertGreaterEqual(waits[0], 3.0, "never sooner than the 503's Retry-After")
        # The drops' own backoff (jittered, at most 0.4 s and 0.8 s), not the 503's 3 s again.
        self.assertLess(max(waits[1:]), 1.0, waits)

    def test_a_bom_opening_the_stream_is_dropped(self):
        # As the WHATWG rules, the Go and TypeScript clients: the first line's field was read as
        # "\ufeffdata" and ignored, and its event lost.
        events = [{"seq": 1, "type": "error", "kind": "internal", "message": "m"}, {"seq": 2, "type": "done"}]
        sse = "\ufeff" + "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        c, _, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse.encode())], [])))
        self.assertEqual([e["seq"] for e in c.events("t_1")], [1, 2])

    def test_the_cli_says_a_stream_reconnect_on_stderr(self):
        # As the Go CLI: a stream that pauses to reconnect says so, never silently.
        events = [{"seq": 1, "type": "abstention", "terms": ["churn"]}, {"seq": 2, "type": "done", "steps": 0}]
        sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        seen: list = []
        url = self.serve(scripted([(201, {}, {"id": "c_1", "created_at": "2026-12-04T20:00:00Z"}),
                                   (202, {}, {"ticket": "t_1", "conversation_id": "c_1"}),
                                   (503, {}, problem(503, detail="a replica is restarting")),
                                   (200, {"Content-Type": "text/event-stream"}, sse)], seen))
        stdout, stderr = io.StringIO(), io.StringIO()
        code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=stdout, stderr=stderr)
        self.assertEqual(code, 2, stderr.getvalue())
        self.assertRegex(stderr.getvalue(), r"streamEvents: retrying \(attempt 2\) in [0-9.]+ s: .*a replica is restarting")

    def test_an_event_that_is_not_json_is_final_and_never_quoted(self):
        sse = b'id: 1\ndata: {"seq":1,"type":"accepted","question":zq-frame-secret}\n\n'
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)], seen)))
        with self.assertRaises(ask_client.ProtocolError) as caught:
            list(c.events("t_1"))
        self.assertNotIn("zq-frame-secret", str(caught.exception))
        self.assertEqual((len(seen), waits), (1, []), "not resumed")


    def test_an_event_that_is_json_but_not_an_event_is_final(self):
        # A seq that is not an integer (a string, null) once escaped as a TypeError, a traceback
        # from the CLI; it is the contract broken, said as such and never quoted.
        for data in (b'{"seq":"1","type":"accepted","question":"zq-frame-secret"}', b'{"seq":null,"type":"x"}',
                     b'{"seq":1,"type":7}', b'null', b'[1]'):
            seen: list = []
            sse = b"id: 1\ndata: " + data + b"\n\n"
            c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)], seen)))
            with self.assertRaises(ask_client.ProtocolError, msg=data) as caught:
                list(c.events("t_1"))
            self.assertNotIn("zq-frame-secret", str(caught.exception))
            self.assertEqual((len(seen), waits), (1, []), "not resumed")

    def test_an_outcome_that_breaks_the_contract_is_final_and_the_cli_says_so(self):
        # An answer without text (an abstention without terms, a refusal or error missing a field
        # or holding another type) made describe_outcome raise a KeyError or TypeError, and the
        # CLI print a traceback. It is said as the contract broken: its type, seq and field,
        # never its values, exit 1 (as the Go CLI, whose client cannot decode it).
        secret = "zq-outcome-secret"
        broken = [{**ANSWER, "text": None}, {k: v for k, v in ANSWER.items() if k != "text"},
                  {**ANSWER, "caveats": [secret]}, {**ANSWER, "headline": secret},
                  {**ANSWER, "result": {"columns": [secret], "rows": [secret], "truncated": False}},
                  {**ANSWER, "divergence": {"without": [secret]}},
                  {"type": "abstention"}, {"type": "abstention", "terms": secret},
                  {"type": "abstention", "terms": [], "sources": [7]},
                  {"type": "refusal", "tool": "run_query", "source": 5, "reason": secret},
                  {"type": "refusal", "tool": None, "source": "demo", "reason": secret, "call_id": "x"},
                  {"type": "error", "message": secret}, {"type": "error", "kind": ["internal"], "message": secret}]
        for outcome in broken:
            events = [{"seq": 1, "type": "accepted"}, {"seq": 2, **outcome}, {"seq": 3, "type": "done", "steps": 0}]
            sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
            seen: list = []
            url = self.serve(scripted([(201, {}, {"id": "c_1", "created_at": "2026-12-04T20:00:00Z"}),
                                       (202, {}, {"ticket": "t_1", "conversation_id": "c_1"}),
                                       (200, {"Content-Type": "text/event-stream"}, sse)], seen))
            stdout, stderr = io.StringIO(), io.StringIO()
            code = ask_client.main(["--url", url, "--token", "t", "a question"], stdout=stdout, stderr=stderr)
            self.assertEqual((code, stdout.getvalue()), (1, ""), f"{outcome}: {stderr.getvalue()}")
            self.assertRegex(stderr.getvalue(), rf"^ask_client: {outcome['type']} event 2 of ticket t_1 is not the "
                                                 r"contract's: the field \w+ (is missing|is not of the contract's type)\n$")
            self.assertNotIn(secret, stderr.getvalue())
            self.assertEqual(len(seen), 3, "not resumed")
        # The least of each that the contract allows is said.
        for outcome, code in [(ANSWER, 0), ({"type": "abstention", "terms": []}, 2),
                              ({"type": "refusal", "tool": "run_query", "source": "demo", "reason": "r", "call_id": "x"}, 3),
                              ({"type": "error", "kind": "a kind added later", "message": "m"}, 4)]:
            events = [{"seq": 1, **outcome}, {"seq": 2, "type": "done", "steps": 0}]
            sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
            url = self.serve(scripted([(201, {}, {"id": "c_1", "created_at": "2026-12-04T20:00:00Z"}),
                                       (202, {}, {"ticket": "t_1", "conversation_id": "c_1"}),
                                       (200, {"Content-Type": "text/event-stream"}, sse)], []))
            stdout, stderr = io.StringIO(), io.StringIO()
            self.assertEqual(ask_client.main(["--url", url, "--token", "t", "a question"], stdout=stdout, stderr=stderr),
                             code, stderr.getvalue())

    def test_a_branch_or_milestone_that_breaks_the_contract_is_final_and_the_cli_says_so(self):
        # A branch_id that is a list or an object made follow raise a TypeError (unhashable), a
        # traceback from the CLI; the Go client cannot decode such an event and ends the stream.
        for event in ({"type": "branch", "branch_id": ["zq-secret"], "role": "source", "state": "open"},
                      {"type": "branch", "role": "source", "state": "open"},
                      {"type": "milestone", "phase": "grounding", "subject": "x", "source": "demo", "branch_id": {}},
                      {"type": "milestone", "phase": "grounding", "source": "demo"}):
            events = [{"seq": 1, **event}, {"seq": 2, **ANSWER}, {"seq": 3, "type": "done", "steps": 0}]
            sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
            url = self.serve(scripted([(201, {}, {"id": "c_1", "created_at": "2026-12-04T20:00:00Z"}),
                                       (202, {}, {"ticket": "t_1", "conversation_id": "c_1"}),
                                       (200, {"Content-Type": "text/event-stream"}, sse)], []))
            stdout, stderr = io.StringIO(), io.StringIO()
            code = ask_client.main(["--url", url, "--token", "t", "--branches", "a question"], stdout=stdout, stderr=stderr)
            self.assertEqual((code, stdout.getvalue()), (1, ""), f"{event}: {stderr.getvalue()}")
            self.assertRegex(stderr.getvalue(), rf"^ask_client: {event['type']} event 1 of ticket t_1 is not the "
                                                 r"contract's: the field \w+ (is missing|is not of the contract's type)\n$")
            self.assertNotIn("zq-secret", stderr.getvalue())

    def test_an_event_of_a_kind_this_client_does_not_know_is_passed_on(self):
        events = [{"seq": 1, "type": "accepted"}, {"seq": 2, "type": "hint", "novel": True},
                  {"seq": 3, **ANSWER}, {"seq": 4, "type": "done"}]
        sse = "".join(f"id: {e['seq']}\nevent: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        c, _, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)], [])))
        seen: list = []
        outcome, done = ask_client.follow(c.events("t_1"), on_event=seen.append)
        self.assertEqual([e["type"] for e in seen], ["accepted", "hint", "answer", "done"])
        self.assertEqual((outcome["type"], done["seq"]), ("answer", 4))

    def test_a_line_beyond_the_bound_is_final_after_the_events_before_it(self):
        # Without a bound, readline held a line without end in memory as long as it came.
        first = json.dumps({"seq": 1, "type": "accepted"})
        sse = f"id: 1\ndata: {first}\n\nid: 2\ndata: ".encode() + b"x" * 5000 + b"\n\n"
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)], seen)))
        got: list = []
        with self.assertRaises(ask_client.ProtocolError) as caught:
            for event in ask_client.EventStream(c, "t_1", max_event_size=4096):
                got.append(event["seq"])
        self.assertIn("4096", str(caught.exception))
        self.assertEqual((got, len(seen), waits), ([1], 1, []), "the event before it delivered; not resumed")
        many = f"id: 1\ndata: {first}\n\nid: 2\n".encode() + b"data: xxxxxxxxxx\n" * 500 + b"\n"
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, many)], [])))
        with self.assertRaises(ask_client.ProtocolError):
            list(ask_client.EventStream(c, "t_1", max_event_size=4096))
        self.assertEqual(ask_client.EventStream(c, "t_1").max_event_size, 16 << 20, "16 MiB by default, as Go")


    def test_the_bound_counts_an_events_data_in_bytes(self):
        # max_event_size is bytes (UTF-8, as received), as the docs and the Go client say: an
        # event's data was counted in decoded characters, so one of 6002 bytes of "é" passed a
        # 4096-byte bound as 3002 characters, each line within it.
        first = json.dumps({"seq": 1, "type": "accepted"})
        wide = f"id: 1\ndata: {first}\n\nid: 2\n".encode() + ("data: " + "\u00e9" * 1500 + "\n").encode() * 2 + b"\n"
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, wide)], seen)))
        got: list = []
        with self.assertRaises(ask_client.ProtocolError) as caught:
            for event in ask_client.EventStream(c, "t_1", max_event_size=4096):
                got.append(event["seq"])
        self.assertIn("4096 bytes", str(caught.exception))
        self.assertEqual((got, len(seen), waits), ([1], 1, []), "the event before it delivered; not resumed")
        # As many characters of ASCII are within it.
        narrow = wide.replace("\u00e9".encode(), b"e")
        c, _, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, narrow)] * 2, [])))
        with self.assertRaises(ask_client.ProtocolError) as caught:
            list(ask_client.EventStream(c, "t_1", max_event_size=4096, attempts=0))
        self.assertIn("is not an event", str(caught.exception), "read to its end: its data is not JSON")

    def test_the_bound_is_on_the_events_data_at_the_bound_and_a_byte_over(self):
        # An event's data is its lines joined by "\n" (WHATWG), so data of exactly the bound is
        # read and one byte more is refused, as in the Go and TypeScript clients. Two lines, so
        # neither reaches the bound on its own.
        class Reads:
            def __init__(self, body):
                self.chunks = [body]

            def read1(self, n):
                return self.chunks.pop(0) if self.chunks else b""

        def frames(first: str):
            body = f"data:{first}\ndata:{'b' * 32}\n\n".encode()
            return list(ask_client._frames(Reads(body), max_size=64))

        self.assertEqual(frames("a" * 31), [("", "a" * 31 + "\n" + "b" * 32)], "64 bytes: read")
        with self.assertRaises(ask_client.ProtocolError):
            frames("a" * 32)  # 65 bytes

    def test_lines_end_at_cr_lf_or_crlf(self):
        # readline split only at LF: a stream whose lines end with a lone CR was one line, held
        # back until it passed the bound. Every event here ends a different way.
        events = [{"seq": 1, "type": "accepted"}, {"seq": 2, **ANSWER}, {"seq": 3, "type": "done"}]
        ends = [b"\r", b"\r\n", b"\n"]
        sse = b"".join(f"id: {e['seq']}".encode() + end + b"data: " + json.dumps(e).encode() + end + end
                       for e, end in zip(events, ends))
        for body in (sse, sse.replace(b"\r\n", b"\r").replace(b"\n", b"\r")):
            seen: list = []
            c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, body)], seen)))
            got: list = []
            outcome, done = ask_client.follow(c.events("t_1"), on_event=got.append)
            self.assertEqual([e["seq"] for e in got], [1, 2, 3], body)
            self.assertEqual((outcome["type"], done["seq"], len(seen), waits), ("answer", 3, 1, []))

    def test_a_crlf_split_between_reads_is_one_line_end(self):
        class Reads:
            def __init__(self, chunks):
                self.chunks = list(chunks)

            def read1(self, n):
                return self.chunks.pop(0) if self.chunks else b""

        lines = lambda chunks: list(ask_client._lines(Reads(chunks), 64, lambda: ValueError("too large")))
        self.assertEqual(lines([b"a\r", b"\nb\r\n"]), [b"a", b"b"], "CR | LF is one end")
        self.assertEqual(lines([b"a\r", b"\r\n"]), [b"a", b""], "CR | CRLF is two")
        self.assertEqual(lines([b"a\r\rb\n\n"]), [b"a", b"", b"b", b""])
        self.assertEqual(lines([b"a\n", b"partial"]), [b"a"], "a line the stream ends inside is dropped")
        self.assertEqual(lines([b"ab", b"c", b"d\n"]), [b"abcd"], "a line over several reads is one")
        self.assertEqual(lines([b"\r", b"\n", b"\n"]), [b"", b""], "CR | LF | LF is two ends")
        with self.assertRaises(ValueError):
            lines([b"x" * 40, b"x" * 40])
        with self.assertRaises(ValueError):
            lines([b"x" * 65 + b"\n"])

    def test_bytes_that_are_not_utf8_are_replaced_not_a_failed_connection(self):
        # A UnicodeDecodeError was taken for a dropped connection: the same stream read nine times, then "no progress".
        sse = (b'id: 1\ndata: {"seq":1,"type":"error","kind":"internal","message":"caf\xe9"}\n\n'
               b'id: 2\ndata: {"seq":2,"type":"done"}\n\n')
        seen: list = []
        c, waits, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)] * 10, seen)))
        outcome, _ = ask_client.follow(c.events("t_1"))
        self.assertEqual((outcome["message"], len(seen), waits), ("caf\ufffd", 1, []))

    def test_missed_steps_says_what_the_stream_did_not_deliver(self):
        # Steps 3 and 4 were dropped from a full buffer (only steps are): seq skips them, done counts them.
        events = [{"seq": 1, "type": "accepted"}, {"seq": 2, "type": "step"}, {"seq": 5, "type": "step"},
                  {"seq": 6, **ANSWER}, {"seq": 7, "type": "done", "steps": 4}]
        sse = "".join(f"id: {e['seq']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        c, _, _ = self.client(self.serve(scripted([(200, {"Content-Type": "text/event-stream"}, sse)] * 2, [])))
        stream = c.events("t_1")
        ask_client.follow(stream)
        self.assertEqual((stream.steps, stream.missed_steps), (2, 2))
        resumed = c.events("t_1", after=2)
        ask_client.follow(resumed)
        self.assertEqual(resumed.missed_steps, 3, "the steps at or before `after` were not delivered either")


class CtrlCTest(unittest.TestCase):
    """Ctrl-C on the CLI, a real SIGINT to a real process: no traceback, the ask cancelled on the
    service, exit status 4 (as the Go CLI). The signal is sent on an event, never after a sleep."""

    def cli(self, *argv: str, preexec_fn=None) -> subprocess.Popen:
        here = pathlib.Path(__file__).resolve().parent
        proc = subprocess.Popen([sys.executable, str(here / "ask_client.py"), *argv], cwd=here, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
                                preexec_fn=preexec_fn)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        return proc

    def asking(self, preexec_fn=None) -> tuple[subprocess.Popen, str]:
        """The CLI asking the slow question through a relay, once the stream has carried the
        branch open (the slow question's first model turn is then silent for seconds, and a
        signal lands in it); and the ticket, read from the service as the relay saw it."""
        target = urllib.parse.urlsplit(os.environ["ASK_URL"])
        relay = Relay(target.hostname, target.port, lambda chunk: b"event: branch" in chunk)
        self.addCleanup(relay.close)
        url = f"http://127.0.0.1:{relay.port}{target.path}"
        proc = self.cli("--url", url, "--idp", os.environ["ASK_IDP"], SLOW_SEV1, preexec_fn=preexec_fn)
        self.assertTrue(relay.seen.wait(30), "the stream never opened")
        return proc, relay.ticket

    def test_ctrl_c_sigterm_and_sighup_while_the_model_thinks_cancel_the_ask(self):
        # SIGTERM (and SIGHUP, the terminal closing) killed the client at once (exit 143, 129)
        # and the run went on on the service; the Go CLI cancels on all three.
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with self.subTest(signal=sig.name):
                proc, ticket = self.asking()
                proc.send_signal(sig)
                out, err = proc.communicate(timeout=30)
                self.assertNotIn("Traceback", err)
                self.assertNotIn("KeyboardInterrupt", err)
                self.assertEqual((proc.returncode, out), (4, "Cancelled.\n"), err)
                # The ticket is named, so that after a second Ctrl-C it can be followed.
                self.assertRegex(ticket, r"^t_")
                self.assertIn(f"Cancelling ticket {ticket}… (Ctrl-C again leaves at once; ask --follow {ticket}", err)
                self.assertNotIn("sev1", err, "the question is never echoed")
                status = client_for("alice").status(ticket)
                self.assertEqual((status["state"], status["terminal"]["kind"]), ("error", "cancelled"), status)

    def test_sighup_under_nohup_leaves_the_run_going(self):
        # nohup ignores SIGHUP so that the run outlives the terminal: it is not a cancel.
        ignore = lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)
        proc, ticket = self.asking(preexec_fn=ignore)
        proc.send_signal(signal.SIGHUP)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertNotIn("Cancelling", err)
        self.assertIn("sev1 incidents", out)

    def test_ctrl_c_before_the_ask_asks_nothing(self):
        reached = threading.Event()
        release = threading.Event()
        self.addCleanup(release.set)

        class SlowIdP(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                reached.set()
                release.wait(30)
                self.close_connection = True

        idp = FakeStreamTest.serve(self, SlowIdP).removesuffix("/ask")
        proc = self.cli("--url", "http://127.0.0.1:9/ask", "--idp", idp, SEV1)
        self.assertTrue(reached.wait(30), "the CLI never asked for a token")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        self.assertEqual((proc.returncode, out, err), (4, "", "ask_client: interrupted; nothing was asked\n"))


class Relay:
    """A TCP relay to host:port on an ephemeral loopback port; seen is set once a chunk from the
    service satisfies watch."""

    def __init__(self, host: str, port: int, watch):
        import socket
        self.seen = threading.Event()
        self.ticket = ""  # the first ticket the service's replies carried
        self._sockets: list = []
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]

        def pipe(src, dst, watching: bool):
            try:
                while chunk := src.recv(65536):
                    dst.sendall(chunk)
                    if watching and not self.ticket and (m := re.search(rb'"ticket":\s*"(t_[^"]+)"', chunk)):
                        self.ticket = m.group(1).decode()
                    if watching and watch(chunk):
                        self.seen.set()
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        def accept():
            while True:
                try:
                    client, _ = self._server.accept()
                except OSError:
                    return
                upstream = socket.create_connection((host, port))
                self._sockets += [client, upstream]
                threading.Thread(target=pipe, args=(client, upstream, False), daemon=True).start()
                threading.Thread(target=pipe, args=(upstream, client, True), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()

    def close(self) -> None:
        self._server.close()
        for s in self._sockets:
            s.close()


class NotAStreamTest(unittest.TestCase):
    serve = FakeStreamTest.serve

    def test_a_response_that_is_not_an_event_stream_is_final(self):
        seen: list = []
        waits: list[float] = []
        c = ask_client.AskClient(self.serve(scripted([(200, {"Content-Type": "text/html"}, b"<html>a gateway</html>")], seen)), "t", sleep=waits.append)
        with self.assertRaises(ask_client.ProtocolError) as caught:
            list(c.events("t_1"))
        self.assertIn("not text/event-stream", str(caught.exception))
        self.assertEqual((len(seen), waits), (1, []), "not resumed, as in Go")


def closed_port() -> int:
    """A port on loopback that nothing listens on: one just closed."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AskClientTest(unittest.TestCase):
    def assert_well_formed(self, events: list[dict]) -> None:
        self.assertEqual([e["seq"] for e in events], list(range(1, len(events) + 1)), "no gap, no duplicate")
        self.assertEqual(events[0]["type"], "accepted")
        self.assertEqual(events[-1]["type"], "done")
        self.assertEqual(sum(e["type"] in ask_client.OUTCOMES for e in events), 1, "exactly one terminal event")

    def test_ask_follow_and_print_the_answer(self):
        code, out, err = run_main(SEV1)
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"^\d+ \(sev1_incidents\)\nWe had \d+ sev1 incidents in 2026-Q2\.")
        self.assertIn("Keep in mind — incident:", out, "every caveat is printed")
        self.assertIn("Rests on — incident:", out)
        self.assertIn("Answered by querying the data.", out)
        self.assertIn('… Checking what "incident" means in the catalog', err, "milestones in the client's words")

    def test_refusal_and_abstention_are_printed_as_what_they_are(self):
        code, out, _ = run_main("--as", "bob", "What was the on-call pay per team in 2026-Q3?")
        self.assertEqual(code, 3)
        self.assertTrue(out.startswith("Refused: the demo source refused run_query"), out)
        code, out, _ = run_main("What is our customer churn rate?")
        self.assertEqual(code, 2)
        self.assertTrue(out.startswith("No answer: the catalog has nothing to answer this from. Looked for: "), out)
        # No earlier turn: the agent asks which team, having looked nothing up, and says so.
        code, out, _ = run_main("How many deployments did that team ship in 2026-Q3?")
        self.assertEqual(code, 2)
        self.assertTrue(out.startswith("No answer: nothing was looked up (the agent called no tool)."), out)
        self.assertIn("The agent said: ", out)
        self.assertIn("Could you name the team?", out)

    def test_resume_after_a_dropped_connection(self):
        client = client_for("alice")
        ticket = client.ask(client.create_conversation()["id"], SLOW_SEV1)
        stream = client.events(ticket["ticket"])
        events: list[dict] = []
        dropped = False

        def on_event(e: dict) -> None:
            nonlocal dropped
            events.append(e)
            if e["type"] == "branch" and not dropped:
                # The model is now silent for seconds: close the socket mid-stream.
                dropped = True
                stream.drop()

        outcome, done = ask_client.follow(stream, on_event=on_event)
        self.assertTrue(dropped)
        self.assertEqual(stream.last_event_ids[:2], ["", "2"], "the reconnect resumes after seq 2")
        self.assert_well_formed(events)
        self.assertEqual(outcome["type"], "answer")
        self.assertEqual(done["outcome"], "answer")

    def test_cancel(self):
        client = client_for("alice")
        ticket = client.ask(client.create_conversation()["id"], SLOW_SEV1)
        events: list[dict] = []

        def on_event(e: dict) -> None:
            events.append(e)
            if e["type"] == "branch":
                client.cancel(ticket["ticket"])

        outcome, _ = ask_client.follow(client.events(ticket["ticket"]), on_event=on_event)
        self.assert_well_formed(events)
        self.assertEqual((outcome["type"], outcome["kind"]), ("error", "cancelled"))
        self.assertEqual(ask_client.describe_outcome(outcome), "Cancelled.")
        self.assertEqual(client.status(ticket["ticket"])["state"], "error")

    def test_a_refusal_says_its_detail_and_violations(self):
        code, out, err = run_main("x" * 4001)
        self.assertEqual(code, 1)
        self.assertEqual(out, "")
        self.assertIn("createAsk: HTTP 400: the request does not satisfy the API description", err)
        self.assertIn("(body/question: maximum string length is 4000)", err, "the violation says what to change")

    def test_a_lost_reply_is_retried_and_answers_the_same_ticket(self):
        # A proxy in front of the service loses the reply to the first ask, after the service
        # has made the ticket: the retry, with the same Idempotency-Key, gets that ticket back.
        target = urllib.parse.urlsplit(os.environ["ASK_URL"])
        lost: list[str] = []

        class LosingProxy(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: self.headers[k] for k in ("Authorization", "Content-Type", "Accept", "Idempotency-Key") if self.headers[k]}
                req = urllib.request.Request(f"{target.scheme}://{target.netloc}{self.path}", data=body, method="POST", headers=headers)
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        status, data, ctype = resp.status, resp.read(), resp.headers["Content-Type"]
                except urllib.error.HTTPError as e:
                    status, data, ctype = e.code, e.read(), e.headers["Content-Type"]
                if self.path.endswith("/asks") and status == 202 and not lost:
                    lost.append(json.loads(data)["ticket"])
                    self.close_connection = True  # the reply is lost on the way back
                    return
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        proxy = FakeStreamTest.serve(self, LosingProxy)
        proxied = urllib.parse.urlsplit(proxy)._replace(path=target.path).geturl()
        said: list[str] = []
        token = ask_client.mint_dev_token(os.environ["ASK_IDP"], "alice")
        c = ask_client.AskClient(proxied, token, sleep=lambda s: None, on_retry=lambda op, n, d, cause: said.append(op))
        conversation = c.create_conversation()
        ticket = c.ask(conversation["id"], SEV1)
        self.assertEqual(len(lost), 1, "the proxy lost the first reply")
        self.assertEqual(ticket["ticket"], lost[0], "the retry answered the ticket the lost reply held")
        self.assertEqual(said, ["createAsk"])
        direct = ask_client.AskClient(os.environ["ASK_URL"], token)
        outcome, _ = ask_client.follow(direct.events(ticket["ticket"]))
        self.assertEqual(outcome["type"], "answer")
        # One ask ran: a second one would still be running, or refused; the next is admitted.
        nxt = direct.ask(conversation["id"], SEV1)
        self.assertNotEqual(nxt["ticket"], ticket["ticket"])
        ask_client.follow(direct.events(nxt["ticket"]))

    def test_an_ask_with_a_webhook_is_delivered_and_a_url_not_allowed_is_a_400(self):
        client = client_for("alice")
        conversation = client.create_conversation()["id"]
        sink = os.environ["ASK_URL"].rstrip("/") + "/dev/webhooks/inbox"
        ticket = client.ask(conversation, SEV1, webhook=sink)["ticket"]
        outcome, _ = ask_client.follow(client.events(ticket))
        self.assertEqual(outcome["type"], "answer")
        status = client.status(ticket)
        deadline = time.monotonic() + 20
        while (status.get("webhook") or {}).get("state") == "pending" and time.monotonic() < deadline:
            time.sleep(0.1)
            status = client.status(ticket)
        self.assertEqual((status.get("webhook") or {}).get("state"), "delivered", status.get("webhook"))
        with self.assertRaises(ask_client.APIError) as caught:
            client.ask(conversation, SEV1, webhook="https://elsewhere.invalid/hook")
        self.assertEqual(caught.exception.status, 400)
        # The CLI's --webhook reaches the service: one not allowed is its 400, said.
        code, _, err = run_main("--webhook", "https://elsewhere.invalid/hook", SEV1)
        self.assertEqual(code, 1, err)
        self.assertIn("createAsk: HTTP 400", err)
        self.assertEqual(run_main("--webhook", sink, SEV1)[0], 0)

    def test_status_waits_for_the_end_when_asked(self):
        client = client_for("alice")
        ticket = client.ask(client.create_conversation()["id"], SLOW_SEV1)["ticket"]
        self.assertEqual(client.status(ticket)["state"], "running")
        status = client.status(ticket, wait_seconds=30)  # one call: the service answers at the end
        self.assertNotEqual(status["state"], "running", status)
        self.assertIn("terminal", status)
        with self.assertRaises(ValueError):
            client.status(ticket, wait_seconds=61)

    def test_another_identity_gets_404(self):
        conversation = client_for("alice").create_conversation()
        with self.assertRaises(ask_client.APIError) as cm:
            client_for("bob").ask(conversation["id"], SEV1)
        self.assertEqual(cm.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
