"""Real servers on loopback for the notification tests (SPEC §16.1): an HTTP receiver for
Apprise's ``json://`` and ``ntfy://`` targets and an SMTP server (aiosmtpd) for ``mailto://``.
Each can be told to fail (HTTP 500, SMTP 554) and to recover."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class HttpReceiver:
    """Collects every request; answers ``status`` (200 unless told otherwise)."""

    status: int = 200
    got: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def start(self) -> HttpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.got.append(
                        Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                    )
                    status = receiver.status
                payload = b'{"id": "x", "event": "message"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_PUT = do_POST

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def _free_port() -> int:
    """A port nobody listens on now (aiosmtpd's controller cannot take port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class SmtpReceiver:
    """aiosmtpd on loopback: every message it accepted, as bytes; ``refuse`` answers 554."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list[bytes] = []
        self.refuse = False
        outer = self

        class Handler:
            async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
                if outer.refuse:
                    return "554 refused for the test"
                outer.messages.append(envelope.original_content or envelope.content)
                return "250 OK"

        self.port = _free_port()
        self.controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)

    def start(self) -> SmtpReceiver:
        self.controller.start()
        return self

    def stop(self) -> None:
        self.controller.stop()
