"""Real receivers of alerts for tests: an SMTP server (aiosmtpd) and an HTTP server taking
webhook POSTs, both on 127.0.0.1 in threads of the test's process; what they received, and
the webhook signature check a subscriber would make."""

from __future__ import annotations

import email
import email.policy
import hashlib
import hmac
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float = 60.0, interval: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


class SmtpReceiver:
    """An SMTP server (aiosmtpd's Controller) keeping every message it is given:
    ``with SmtpReceiver() as smtp: settings.EMAIL_PORT = smtp.port …; smtp.messages``."""

    def __init__(self):
        self.port = free_port()
        self.messages: list[email.message.EmailMessage] = []
        self.envelopes: list[tuple[str, list[str]]] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self._lock:
            self.messages.append(message)
            self.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
        return "250 Message accepted for delivery"

    def __enter__(self) -> SmtpReceiver:
        from aiosmtpd.controller import Controller

        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        return self

    def __exit__(self, *exc) -> None:
        self.controller.stop()

    def wait(self, n: int = 1, timeout: float = 60.0) -> list:
        assert wait_until(lambda: len(self.messages) >= n, timeout), (
            f"{len(self.messages)} of {n} e-mails arrived in {timeout} s"
        )
        return list(self.messages)

    @staticmethod
    def text(message) -> str:
        return message.get_body(preferencelist=("plain",)).get_content()


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    json: dict = field(default_factory=dict)


class WebhookReceiver:
    """An HTTP server taking POSTs: each is kept as ``Received``; it answers with the next of
    ``statuses`` (then 200): ``WebhookReceiver(statuses=[500, 500])`` fails twice."""

    def __init__(self, statuses: list[int] | None = None):
        self.received: list[Received] = []
        self.statuses = list(statuses or [])
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                try:
                    parsed = json.loads(body)
                except ValueError:
                    parsed = {}
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, dict(self.headers.items()), body, parsed)
                    )
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok" if status < 300 else b"receiver says no")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def __enter__(self) -> WebhookReceiver:
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait(self, n: int = 1, timeout: float = 60.0) -> list[Received]:
        assert wait_until(lambda: len(self.received) >= n, timeout), (
            f"{len(self.received)} of {n} webhooks arrived in {timeout} s"
        )
        return list(self.received)

    @staticmethod
    def signed(received: Received, secret: str) -> bool:
        """Whether the X-Beeweb-Signature header is the body's HMAC-SHA256 with ``secret``,
        checked as a subscriber checks it (constant time)."""
        given = received.headers.get("X-Beeweb-Signature", "")
        expected = "sha256=" + hmac.new(secret.encode(), received.body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(given, expected)
