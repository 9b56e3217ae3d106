"""Both HTTP providers against a real loopback server: the real client config end to end.

The in-process fake (``_fakes.http``) replaces the transport; these tests keep the one httpx
builds, so headers, URL joining, the timeout, the proxies from the environment and the zero-retry
transport are what a real provider would see. The server records every request:
"exactly one call" is asserted on its log, not on a mock.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _fakes.http import closed_port
from pydantic import SecretStr

from watcher.config import Settings
from watcher.models import Comment, Prompt
from watcher.providers import make_provider, verdict_json_schema
from watcher.providers.base import Provider
from watcher.providers.prompts import render

KEY = "sk-loopback-0123456789abcdef"
VERDICT = {
    "needs_reply": False,
    "category": "praise",
    "priority": "low",
    "summary": "Thanks the author.",
    "reply_hint": "",
}


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Reply = tuple[int, dict[str, str], bytes] | str  # (status, headers, body) | "hang" | "drop"


@dataclass
class FakeServer:
    url: str
    calls: list[Recorded] = field(default_factory=list)
    reply: Callable[[Recorded], Reply] = lambda rec: (500, {}, b"no reply configured")
    release: threading.Event = field(default_factory=threading.Event)


def _handler(state: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            rec = Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            state.calls.append(rec)
            reply = state.reply(rec)
            if reply == "hang":
                state.release.wait(10)
                return
            if reply == "drop":
                self.close_connection = True
                return
            status, headers, payload = reply  # type: ignore[misc]
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_CONNECT(self) -> None:  # the name is http.server API
            # An HTTPS request through a proxy starts with CONNECT host:443: record it and refuse
            # the tunnel (the loopback server speaks no TLS).
            headers = {k.lower(): v for k, v in self.headers.items()}
            state.calls.append(Recorded("CONNECT", self.path, headers, b""))
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
            pass

    return Handler


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's HTTP(S)_PROXY must not route loopback test traffic elsewhere.
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    state = FakeServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield state
    state.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


def _provider(tmp_path: Path, provider: str, base_url: str, *, timeout: float = 5.0) -> Provider:
    settings = Settings(
        data_dir=tmp_path,
        provider=provider,
        model=f"{provider}-model",
        base_url=base_url,
        api_key=SecretStr(KEY),
        timeout=timeout,
    )
    provider = make_provider(settings)
    _OPEN.append(provider)
    return provider


_OPEN: list[Provider] = []


@pytest.fixture(autouse=True)
def _close_providers() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()  # type: ignore[attr-defined]


def _prompt() -> Prompt:
    comment = Comment(
        id="4cg6",
        article_id=7,
        article_title="Rate Limiting Without Redis",
        article_url="https://dev.to/me/rl",
        author="lee",
        created_at="2026-05-14T09:12:44Z",
        text="Love how small this is. Thank you!",
        url="https://dev.to/lee/comment/4cg6",
    )
    return render(comment)


def _json(status: int, data: object, **headers: str) -> Reply:
    return status, headers, json.dumps(data).encode()


def _openai_ok(rec: Recorded) -> Reply:
    message = {"role": "assistant", "content": json.dumps(VERDICT)}
    return _json(
        200, {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {"prompt_tokens": 5}}
    )


def _anthropic_ok(rec: Recorded) -> Reply:
    content = [{"type": "tool_use", "id": "t1", "name": "record_verdict", "input": VERDICT}]
    return _json(
        200, {"content": content, "stop_reason": "tool_use", "usage": {"input_tokens": 9, "output_tokens": 3}}
    )


def test_openai_end_to_end(tmp_path: Path, server: FakeServer) -> None:
    """POST {base}/chat/completions with bearer key and strict schema; the verdict comes back."""
    server.reply = _openai_ok
    provider = _provider(tmp_path, "openai", f"{server.url}/v1")
    result = provider.complete(_prompt())
    assert result.verdict is not None and result.verdict.category == "praise"
    [call] = server.calls
    assert (call.method, call.path) == ("POST", "/v1/chat/completions")
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert call.headers["content-type"] == "application/json"
    assert call.headers["user-agent"].startswith("devto-watcher/")
    body = json.loads(call.body)
    assert body["model"] == "openai-model"
    assert body["response_format"]["json_schema"] == {
        "name": "verdict",
        "strict": True,
        "schema": verdict_json_schema(),
    }


def test_anthropic_end_to_end(tmp_path: Path, server: FakeServer) -> None:
    """POST {base}/v1/messages with x-api-key and anthropic-version; the tool input is the verdict."""
    server.reply = _anthropic_ok
    provider = _provider(tmp_path, "anthropic", server.url)
    result = provider.complete(_prompt())
    assert result.verdict is not None and result.verdict.category == "praise"
    assert result.usage is not None and result.usage.input_tokens == 9
    [call] = server.calls
    assert (call.method, call.path) == ("POST", "/v1/messages")
    assert (call.headers["x-api-key"], call.headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert json.loads(call.body)["tools"][0]["input_schema"] == verdict_json_schema()


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_silent_server_times_out_after_one_request(tmp_path: Path, server: FakeServer, name: str) -> None:
    """The configured timeout applies; the request is made once and not resent."""
    server.reply = lambda rec: "hang"
    provider = _provider(tmp_path, name, server.url, timeout=0.3)
    result = provider.complete(_prompt())
    assert result.error is not None and result.error.kind == "timeout"
    assert "0.3 s" in result.error.message
    assert len(server.calls) == 1


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_dropped_connection_is_network_after_one_request(
    tmp_path: Path, server: FakeServer, name: str
) -> None:
    """A server that closes without answering is a network error; nothing is resent."""
    server.reply = lambda rec: "drop"
    result = _provider(tmp_path, name, server.url).complete(_prompt())
    assert result.error is not None and result.error.kind == "network"
    assert len(server.calls) == 1


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_a_closed_port_is_unreachable(tmp_path: Path, name: str) -> None:
    """Connection refused is unreachable (no connection was made), with no response fields."""
    result = _provider(tmp_path, name, f"http://127.0.0.1:{closed_port()}").complete(_prompt())
    assert result.error is not None and result.error.kind == "unreachable"
    assert result.raw is None and result.usage is None and result.error.http_status is None
    assert "is the server running? check WATCHER_BASE_URL" in result.error.message


def test_anthropic_529_is_overloaded_after_one_request(tmp_path: Path, server: FakeServer) -> None:
    """A real 529 overloaded_error is one call and an overloaded outcome with its raw body."""
    server.reply = lambda rec: _json(
        529, {"type": "error", "error": {"type": "overloaded_error", "message": "x"}}
    )
    result = _provider(tmp_path, "anthropic", server.url).complete(_prompt())
    assert result.error is not None and (result.error.kind, result.error.http_status) == ("overloaded", 529)
    assert result.raw is not None and "overloaded_error" in result.raw
    assert len(server.calls) == 1


def test_openai_429_keeps_retry_after_after_one_request(tmp_path: Path, server: FakeServer) -> None:
    """A real 429 with Retry-After is one call, rate_limited, with the wait captured."""
    error_body = {
        "error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
    }
    server.reply = lambda rec: _json(429, error_body, **{"Retry-After": "7"})
    result = _provider(tmp_path, "openai", server.url).complete(_prompt())
    assert result.error is not None and (result.error.kind, result.error.retry_after_s) == (
        "rate_limited",
        7.0,
    )
    assert len(server.calls) == 1


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_the_transport_never_retries(tmp_path: Path, name: str) -> None:
    """The real transport is built with retries=0 (httpcore would otherwise reconnect and resend)."""
    provider = _provider(tmp_path, name, "http://127.0.0.1:9")
    pool = provider._client._transport._pool  # type: ignore[attr-defined]
    assert pool._retries == 0


@pytest.mark.parametrize("name", ["openai", "anthropic"])
def test_the_key_never_reaches_a_log_line(
    tmp_path: Path, server: FakeServer, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Even with httpx/httpcore debug logging on, no log record contains the key."""
    server.reply = _openai_ok if name == "openai" else _anthropic_ok
    with caplog.at_level(logging.DEBUG):
        _provider(tmp_path, name, server.url).complete(_prompt())
    assert caplog.records, "debug logging produced no records: the test would prove nothing"
    assert all(KEY not in record.getMessage() for record in caplog.records)


# ---- proxies from the environment (httpx reads them: trust_env) ---------------------------------


def test_http_proxy_carries_the_call(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTP_PROXY set, the call goes to the proxy, which is asked for the absolute URL."""
    monkeypatch.setenv("HTTP_PROXY", server.url)
    server.reply = _openai_ok
    result = _provider(tmp_path, "openai", "http://model.invalid/v1").complete(_prompt())
    assert result.verdict is not None
    assert [c.path for c in server.calls] == ["http://model.invalid/v1/chat/completions"]


def test_https_proxy_is_asked_for_a_tunnel(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With HTTPS_PROXY set, an https base URL is reached through a CONNECT tunnel at the proxy."""
    monkeypatch.setenv("HTTPS_PROXY", server.url)
    result = _provider(tmp_path, "anthropic", "https://model.invalid").complete(_prompt())
    assert result.error is not None and result.error.kind == "network"
    assert [(c.method, c.path) for c in server.calls] == [("CONNECT", "model.invalid:443")]


def test_no_proxy_sends_the_call_direct(
    tmp_path: Path, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host in NO_PROXY is called directly, not through HTTP_PROXY (a port nothing serves)."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    server.reply = _openai_ok
    result = _provider(tmp_path, "openai", server.url + "/v1").complete(_prompt())
    assert result.verdict is not None
    assert [c.path for c in server.calls] == ["/v1/chat/completions"]
