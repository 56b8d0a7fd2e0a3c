#!/usr/bin/env python3
"""A receiver of the ask service's webhooks, Python standard library only.

Written from the published contract (openapi/ask.openapi.yaml, WebhookDelivery and the
createAsk runEnded callback) and the Standard Webhooks specification:

  signed content  = webhook-id + "." + webhook-timestamp + "." + body
  signature       = base64(HMAC-SHA256(key, signed content)), key = base64-decode(secret
                    without its "whsec_" prefix); the header holds "v1,<signature>" entries,
                    space-separated (one per secret the operator signs with)

    WEBHOOK_SECRETS=whsec_... python3 receiver.py 127.0.0.1:8098

It answers 204 to a verified delivery (the service stops retrying), 401 to a bad signature or a
timestamp more than 5 minutes from now, and handles each webhook-id once (retries repeat it).
Each handled delivery is printed as one JSON line on stdout.
"""
import base64
import hashlib
import hmac
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_S = 5 * 60


def keys_from_env():
    keys = []
    for s in os.environ.get("WEBHOOK_SECRETS", "").split(","):
        s = s.strip()
        if s:
            keys.append(base64.b64decode(s.removeprefix("whsec_")))
    if not keys:
        sys.exit("set WEBHOOK_SECRETS=whsec_...")
    return keys


def verify(keys, msg_id, timestamp, signatures, body):
    try:
        ts = int(timestamp)
    except (TypeError, ValueError):
        return False
    if abs(time.time() - ts) > TOLERANCE_S:
        return False
    signed = msg_id.encode() + b"." + timestamp.encode() + b"." + body
    for key in keys:
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for entry in (signatures or "").split(" "):
            version, _, sig = entry.partition(",")
            if version == "v1" and hmac.compare_digest(sig, expected):
                return True
    return False


class Handler(BaseHTTPRequestHandler):
    keys = []
    seen = set()
    seen_lock = threading.Lock()  # the server runs a thread per request: a retry may race its first

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20))
        msg_id = self.headers.get("webhook-id")
        if not msg_id or not verify(self.keys, msg_id, self.headers.get("webhook-timestamp"),
                                    self.headers.get("webhook-signature"), body):
            self.send_response(401)
            self.end_headers()
            return
        delivery = json.loads(body)
        with self.seen_lock:
            first = msg_id not in self.seen
            self.seen.add(msg_id)
        if first:
            terminal = delivery["terminal"]
            print(json.dumps({"webhook_id": msg_id, "ticket": delivery["ticket"],
                              "outcome": terminal["type"], "kind": terminal.get("kind"),
                              "done_seq": delivery["done"]["seq"]}), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def main():
    # The default is clear of make ask-serve's ports (8080, 8090-8093, 9090) and of the Go example's.
    host, _, port = (sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1:8098").rpartition(":")
    Handler.keys = keys_from_env()
    srv = ThreadingHTTPServer((host or "127.0.0.1", int(port)), Handler)
    print(json.dumps({"listening": "http://%s:%d/" % srv.server_address[:2]}), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
