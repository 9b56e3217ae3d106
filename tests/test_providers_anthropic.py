"""Anthropic provider over an injected fake transport: one request per call, every outcome
classified (SPEC §6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.http import Reply, Route, Wire
from pydantic import SecretStr

from watcher.config import Settings
from watcher.models import Comment, Prompt
from watcher.providers import make_provider, verdict_json_schema
from watcher.providers.base import Provider
from watcher.providers.prompts import render

BASE = "https://anthropic.invalid"
KEY = "sk-ant-test-0123456789abcdef"
GOOD = {
    "needs_reply": True,
    "category": "bug_report",
    "priority": "high",
    "summary": "Reports a race condition in acquire().",
    "reply_hint": "Confirm and add a lock.",
}


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path,
        provider="anthropic",
        model="claude-test",
        base_url=BASE,
        api_key=SecretStr(KEY),
        timeout=7.5,
    )


def _prompt() -> Prompt:
    comment = Comment(
        id="4cd1",
        article_id=7,
        article_title="Rate Limiting Without Redis",
        article_url="https://dev.to/me/rl",
        author="ana",
        created_at="2026-05-14T09:12:44Z",
        text="I think there's a race condition in acquire().",
        url="https://dev.to/ana/comment/4cd1",
    )
    return render(comment)


def _message(content: list[dict[str, Any]], *, stop: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 420, "output_tokens": 57},
    }


def _tool(data: object) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_1", "name": "record_verdict", "input": data}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def provider(tmp_path: Path, wire: Wire) -> Iterator[Provider]:
    built = make_provider(_settings(tmp_path), transport=wire.transport())
    yield built
    built.close()  # type: ignore[attr-defined]


def _answer(wire: Wire, *replies: Reply) -> Route:
    return wire.on("POST", "/v1/messages", *replies)


def _reply(status: int, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


# One row per SPEC §6 kind (some kinds have several triggers): (id, reply, kind).
ROWS: list[tuple[str, Reply, str]] = [
    (
        "rate_limited",
        _reply(
            429,
            _error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
            **{"retry-after": "12"},
        ),
        "rate_limited",
    ),
    (
        "quota_credit_balance",
        _reply(
            400,
            _error("invalid_request_error", "Your credit balance is too low to access the Anthropic API."),
        ),
        "quota_exhausted",
    ),
    (
        "quota_usage_limits",
        _reply(400, _error("invalid_request_error", "You have reached your specified API usage limits.")),
        "quota_exhausted",
    ),
    ("quota_billing_error", _reply(402, _error("billing_error", "Payment required")), "quota_exhausted"),
    ("overloaded_529", _reply(529, _error("overloaded_error", "Overloaded")), "overloaded"),
    ("overloaded_503", httpx.Response(503, text="upstream unavailable"), "overloaded"),
    ("overloaded_error_type", _reply(500, _error("overloaded_error", "Overloaded")), "overloaded"),
    ("server_error_500", _reply(500, _error("api_error", "Internal server error")), "server_error"),
    ("server_error_504", _reply(504, _error("timeout_error", "Gateway timeout")), "server_error"),
    ("timeout_read", httpx.ReadTimeout, "timeout"),
    ("timeout_write", httpx.WriteTimeout, "timeout"),
    ("unreachable_connect", httpx.ConnectError, "unreachable"),
    ("unreachable_connect_timeout", httpx.ConnectTimeout, "unreachable"),
    ("network_read", httpx.ReadError, "network"),
    ("auth_401", _reply(401, _error("authentication_error", "invalid x-api-key")), "auth"),
    ("auth_403", _reply(403, _error("permission_error", "no access to this model")), "auth"),
    ("bad_request_400", _reply(400, _error("invalid_request_error", "max_tokens: too large")), "bad_request"),
    ("model_not_found_404", _reply(404, _error("not_found_error", "model: claude-test")), "model_not_found"),
    (
        "bad_request_413",
        _reply(413, _error("request_too_large", "Request exceeds the maximum size")),
        "bad_request",
    ),
    (
        "malformed_text",
        _reply(200, _message([_text("I think it is a bug report.")], stop="end_turn")),
        "malformed_json",
    ),
    ("malformed_tool_input", _reply(200, _message([_tool(["not", "an", "object"])])), "malformed_json"),
    ("malformed_no_content", _reply(200, _message([], stop="end_turn")), "malformed_json"),
    (
        "malformed_body",
        httpx.Response(200, text="<html>captive portal</html>"),
        "malformed_json",
    ),
    ("invalid_verdict", _reply(200, _message([_tool({**GOOD, "category": "rant"})])), "invalid_verdict"),
    ("refused", _reply(200, _message([_text("I can't classify this.")], stop="refusal")), "refused"),
    ("truncated", _reply(200, _message([_tool({"needs_reply": True})], stop="max_tokens")), "truncated"),
]


@pytest.mark.parametrize(("reply", "kind"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_outcome_is_one_request_and_one_kind(
    provider: Provider, wire: Wire, reply: Reply, kind: str
) -> None:
    """Every §6 row: the classified kind, after exactly one HTTP request (no retry)."""
    route = _answer(wire, reply)
    result = provider.complete(_prompt())
    assert result.error is not None and result.error.kind == kind
    assert route.calls == 1 and len(wire.requests) == 1


ARRIVED = [r for r in ROWS if isinstance(r[1], httpx.Response)]


@pytest.mark.parametrize(("reply", "kind"), [r[1:] for r in ARRIVED], ids=[r[0] for r in ARRIVED])
def test_a_response_that_arrived_keeps_raw_usage_status_and_duration(
    provider: Provider, wire: Wire, reply: httpx.Response, kind: str
) -> None:
    """Whenever a response arrived, its raw body, usage, HTTP status and duration are kept."""
    _answer(wire, reply)
    result = provider.complete(_prompt())
    assert result.error is not None and result.error.http_status == reply.status_code
    assert result.raw == reply.text
    assert result.usage is not None and result.duration_ms is not None


def test_a_tool_call_is_a_verdict_with_usage(provider: Provider, wire: Wire) -> None:
    """A forced record_verdict tool call with a valid input is the verdict."""
    _answer(wire, _reply(200, _message([_tool(GOOD)])))
    result = provider.complete(_prompt())
    assert result.verdict is not None and result.verdict.category == "bug_report"
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (420, 57)


def test_a_text_answer_is_parsed_when_there_is_no_tool_call(
    provider: Provider, wire: Wire
) -> None:
    """A compatible server that ignores tools and answers JSON text still gives a verdict."""
    _answer(wire, _reply(200, _message([_text(json.dumps(GOOD))], stop="end_turn")))
    assert provider.complete(_prompt()).verdict is not None


def test_request_carries_prompt_and_schema_as_forced_tool(provider: Provider, wire: Wire) -> None:
    """The body has the system text, the user message and the verdict schema as a forced tool."""
    route = _answer(wire, _reply(200, _message([_tool(GOOD)])))
    prompt = _prompt()
    provider.complete(prompt)
    body = json.loads(route.last.content)
    assert (body["model"], body["system"]) == ("claude-test", prompt.system)
    assert body["messages"] == [{"role": "user", "content": prompt.user}]
    assert body["tools"][0]["input_schema"] == verdict_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
    assert isinstance(body["max_tokens"], int)


def test_request_headers_carry_key_and_version(provider: Provider, wire: Wire) -> None:
    """x-api-key and anthropic-version 2023-06-01 are sent; no Bearer header."""
    route = _answer(wire, _reply(200, _message([_tool(GOOD)])))
    provider.complete(_prompt())
    headers = route.last.headers
    assert (headers["x-api-key"], headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert "authorization" not in headers


def test_retry_after_is_kept_on_a_rate_limit(provider: Provider, wire: Wire) -> None:
    """A 429's Retry-After lands on the error."""
    _answer(
        wire, _reply(429, _error("rate_limit_error", "slow down"), **{"retry-after": "12"})
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.retry_after_s == 12.0


def test_an_echoed_key_is_redacted(provider: Provider, wire: Wire) -> None:
    """A server that echoes the key back does not get it into the attempt record."""
    _answer(wire, _reply(401, _error("authentication_error", f"bad key {KEY}")))
    result = provider.complete(_prompt())
    assert result.error is not None and result.raw is not None
    assert KEY not in result.raw and KEY not in result.error.message


def test_names_provider_and_model(provider: Provider) -> None:
    """The attempt records which provider and model answered."""
    assert (provider.name, provider.model) == ("anthropic", "claude-test")
