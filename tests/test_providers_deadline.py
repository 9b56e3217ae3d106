"""WATCHER_TIMEOUT is a total deadline and a body is read at most to 1 MiB (SPEC §13.1), proved
against real loopback servers: a socket is what a per-read timeout and a buffered body get wrong.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _fakes.http import closed_port
from _fakes.provider import FakeProvider, running_fake
from pydantic import SecretStr

from watcher.config import Settings
from watcher.models import Comment, Prompt
from watcher.providers import make_provider
from watcher.providers.base import CallResult, ProbeResult
from watcher.providers.prompts import render

KEY = "sk-deadline-0123456789abcdef"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's HTTP(S)_PROXY must not route loopback test traffic elsewhere.
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as fake:
        yield fake


def _settings(tmp_path: Path, base_url: str, *, provider: str = "openai", timeout: float = 5.0) -> Settings:
    return Settings(data_dir=tmp_path, provider=provider, model="fake-model", base_url=base_url,
                    api_key=SecretStr(KEY), timeout=timeout)


def _call(tmp_path: Path, base_url: str, **kwargs: Any) -> tuple[CallResult, float]:
    provider = make_provider(_settings(tmp_path, base_url, **kwargs))
    started = time.monotonic()
    try:
        return provider.complete(_prompt()), time.monotonic() - started
    finally:
        provider.close()


def _probe(tmp_path: Path, base_url: str, **kwargs: Any) -> tuple[ProbeResult, float]:
    provider = make_provider(_settings(tmp_path, base_url, **kwargs))
    started = time.monotonic()
    try:
        return provider.probe(), time.monotonic() - started
    finally:
        provider.close()


def _prompt() -> Prompt:
    comment = Comment(id="dl1", article_id=7, article_title="T", article_url="https://dev.to/me/t",
                      author="lee", created_at="2026-05-14T09:12:44Z", text="TAG:slowpoke hello",
                      url="https://dev.to/lee/comment/dl1")
    return render(comment)


# ---- no connection -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_closed_port_is_unreachable_and_sends_nothing(tmp_path: Path, name: str) -> None:
    """Connection refused: unreachable, no response fields, and fast (no wait for the deadline)."""
    result, elapsed = _call(tmp_path, f"http://127.0.0.1:{closed_port()}", provider=name)
    assert result.error is not None and result.error.kind == "unreachable"
    assert (result.raw, result.usage, result.error.http_status) == (None, None, None)
    assert "WATCHER_BASE_URL" in result.error.message
    assert elapsed < 2.0


# ---- the total deadline ------------------------------------------------------------------------


def test_a_trickling_body_ends_as_timeout_at_the_deadline(tmp_path: Path, fake: FakeProvider) -> None:
    """One byte a second never trips a per-read timeout of 2 s; the total deadline ends it at ~2 s."""
    fake.script("slowpoke", "trickle")
    result, elapsed = _call(tmp_path, fake.base_url, timeout=2.0)
    assert result.error is not None and result.error.kind == "timeout", result.error
    assert "2 s" in result.error.message and "WATCHER_TIMEOUT" in result.error.message
    assert 1.9 <= elapsed < 3.0
    assert fake.calls == ["slowpoke"]  # one request, not resent


class _TrickleHeaders:
    """A raw socket server that answers every request one byte of the status line at a time.

    Raw on purpose: the status line itself must trickle, which no HTTP server library sends."""

    def __init__(self, pause_s: float) -> None:
        self.pause_s = pause_s
        self.requests = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen()
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.requests += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}":
                    conn.sendall(bytes([byte]))
                    time.sleep(self.pause_s)
            except OSError:
                return

    def close(self) -> None:
        self._sock.close()


@pytest.fixture
def trickle_headers() -> Iterator[_TrickleHeaders]:
    server = _TrickleHeaders(pause_s=0.5)
    yield server
    server.close()


def test_trickled_headers_end_as_timeout_at_the_deadline(
    tmp_path: Path, trickle_headers: _TrickleHeaders
) -> None:
    """The deadline covers the wait for the status line and headers too, not only the body."""
    result, elapsed = _call(tmp_path, trickle_headers.url, timeout=1.5)
    assert result.error is not None and result.error.kind == "timeout", result.error
    assert 1.4 <= elapsed < 2.5
    assert trickle_headers.requests == 1


def test_the_probe_is_bounded_by_the_same_deadline(tmp_path: Path, trickle_headers: _TrickleHeaders) -> None:
    """A probe against a trickling server ends as timeout at the deadline, like a call."""
    result, elapsed = _probe(tmp_path, trickle_headers.url, timeout=1.5)
    assert (result.ok, result.kind) == (False, "timeout")
    assert 1.4 <= elapsed < 2.5


def test_a_probe_of_a_closed_port_is_unreachable(tmp_path: Path) -> None:
    """No connection made: the probe says unreachable and what to check."""
    result, _ = _probe(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    assert (result.ok, result.kind) == (False, "unreachable")
    assert "WATCHER_BASE_URL" in result.message


# ---- the size cap ------------------------------------------------------------------------------


def test_a_huge_body_is_network_response_too_large(tmp_path: Path, fake: FakeProvider) -> None:
    """A 3 MiB answer is refused at 1 MiB: network, "response too large", after one request."""
    fake.script("slowpoke", "huge")
    result, _ = _call(tmp_path, fake.base_url)
    assert result.error is not None and result.error.kind == "network"
    assert "response too large (over 1 MiB)" in result.error.message
    assert result.error.http_status == 200
    assert fake.calls == ["slowpoke"]


_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    from pathlib import Path
    from pydantic import SecretStr
    from watcher.config import Settings
    from watcher.models import Prompt
    from watcher.providers import make_provider

    base_url, data_dir, prompt_json = sys.argv[1:4]
    settings = Settings(data_dir=Path(data_dir), provider="openai", model="m", base_url=base_url,
                        api_key=SecretStr("sk-x"), timeout=30.0)
    provider = make_provider(settings)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = provider.complete(Prompt.model_validate_json(prompt_json))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"kind": result.error.kind if result.error else None,
                      "message": result.error.message if result.error else "",
                      "grew_kib": after - before}))
    """
)


class _Endless(BaseHTTPRequestHandler):
    """A close-delimited 200 (no Content-Length) of 256 MiB: only the reader's cap stops it."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        chunk = b" " * 65536
        try:
            for _ in range(4096):
                self.wfile.write(chunk)
        except OSError:
            pass  # the client stopped reading at 1 MiB

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_an_endless_body_without_content_length_does_not_balloon_memory(tmp_path: Path) -> None:
    """The body is streamed and dropped at 1 MiB: the process peak RSS grows by a few MiB, not 256."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, "-c", _CHILD, url, str(tmp_path), _prompt().model_dump_json()]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=True).stdout
    finally:
        httpd.shutdown()
        httpd.server_close()
    report = json.loads(out)
    assert report["kind"] == "network" and "response too large" in report["message"]
    assert report["grew_kib"] < 32 * 1024, report



def test_the_deadline_cuts_a_reused_keep_alive_connection(tmp_path: Path) -> None:
    """A batch's calls share one kept-alive connection (no handshake per call), and the total
    deadline still ends a call whose reused connection trickles its headers — a connection that
    reported no new socket for that call, so only the client's socket registry can cut it."""
    from _fakes.provider import FakeProvider as Fake

    status, _, payload = Fake().handle({"messages": [{"content": "TAG:first"}]})
    accepted: list[int] = []
    # A raw socket on purpose: what matters is which connection the second request arrives on,
    # and that its answer trickles there; an HTTP server library hides both.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        conn, _ = listener.accept()
        accepted.append(1)
        with conn:
            conn.recv(65536)  # the first request: answered whole, connection kept
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            conn.recv(65536)  # the second, on the same connection: headers a byte at a time
            try:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                    conn.sendall(bytes([byte]))
                    time.sleep(0.5)
            except OSError:
                pass  # the client cut it

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    provider = make_provider(_settings(tmp_path, f"http://127.0.0.1:{listener.getsockname()[1]}/v1", timeout=2.0))
    try:
        first = provider.complete(_prompt())
        started = time.monotonic()
        second = provider.complete(_prompt())
        elapsed = time.monotonic() - started
    finally:
        provider.close()
        listener.close()
    assert status == 200 and first.verdict is not None
    assert second.error is not None and second.error.kind == "timeout", second.error
    assert elapsed < 3.0
    assert accepted == [1]  # one connection served both calls


def test_the_deadline_clock_keeps_no_finished_call_and_wakes_for_an_earlier_deadline() -> None:
    """Finished exchanges leave no deadline behind (the clock is not woken for them later), and a
    deadline earlier than the one the clock sleeps until still fires on time."""
    from watcher.providers import _wire

    cut: list[str] = []
    fired = threading.Event()

    class Watch(_wire._Watchdog):
        def __init__(self, name: str) -> None:
            super().__init__(_wire.Sockets())
            self.name = name

        def _fire(self) -> None:
            cut.append(self.name)
            fired.set()

    for _ in range(50):  # finished calls: armed for 60 s, disarmed at once
        done = Watch("done")
        done.arm(60)
        done.disarm()
    assert not _wire._CLOCK._due
    late, soon = Watch("late"), Watch("soon")
    late.arm(60)
    soon.arm(0.2)  # earlier than what the clock sleeps until: it must be woken for it
    fired.wait(10)
    late.disarm()
    soon.disarm()
    assert cut == ["soon"]
