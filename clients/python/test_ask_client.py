"""The Python example against the dev stack: ask, follow the stream, print the outcome, and
resume after a dropped connection with no gap.

The stack comes from ASK_URL and ASK_IDP (set by scripts/clients-test.sh); without them this
module builds and starts cmd/clients-stack itself, and stops it when the tests end.

    python3 -m unittest -v        # in clients/python
"""

from __future__ import annotations

import http.server
import io
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

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


class PrintableTest(unittest.TestCase):
    def test_controls_are_shown_as_escapes(self):
        # What a steered model or source could send: erase the line, write a forged one, hide text.
        said = "Fine.\x1b[2K\rForged: 0 incidents \x1b[8mhidden\u202e\x9b\nnext\tcol"
        self.assertEqual(ask_client.printable(said),
                         "Fine.\\x1b[2K\\x0dForged: 0 incidents \\x1b[8mhidden\\u202e\\u009b\nnext\tcol")
        self.assertEqual(ask_client.printable("a\nb\tc", one_line=True), "a\\x0ab\\x09c")
        self.assertEqual(ask_client.printable("Ünïcode — fine ✓"), "Ünïcode — fine ✓")


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

    def test_another_identity_gets_404(self):
        conversation = client_for("alice").create_conversation()
        with self.assertRaises(ask_client.APIError) as cm:
            client_for("bob").ask(conversation["id"], SEV1)
        self.assertEqual(cm.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
