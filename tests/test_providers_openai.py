"""OpenAI-compatible provider over an injected fake transport: one request per call, every outcome
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
from watcher.errors import ConfigError
from watcher.models import Comment, Prompt
from watcher.providers import make_provider, verdict_json_schema
from watcher.providers.base import Provider
from watcher.providers.prompts import render

BASE = "https://llm.invalid/v1"
KEY = "sk-test-0123456789abcdef"
GOOD = {
    "needs_reply": True,
    "category": "question",
    "priority": "normal",
    "summary": "Asks how to share the bucket between workers.",
    "reply_hint": "Suggest a shared store.",
}


def _settings(tmp_path: Path, **changes: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path,
        "provider": "openai",
        "model": "gpt-test",
        "base_url": BASE,
        "api_key": SecretStr(KEY),
        "timeout": 7.5,
    }
    return Settings(**{**values, **changes})


def _prompt() -> Prompt:
    comment = Comment(
        id="4cf3",
        article_id=7,
        article_title="Rate Limiting Without Redis",
        article_url="https://dev.to/me/rl",
        author="sam",
        created_at="2026-05-14T09:12:44Z",
        text="How would you make this work across gunicorn workers?",
        url="https://dev.to/sam/comment/4cf3",
    )
    return render(comment)


def _completion(content: str | None, *, finish: str = "stop", refusal: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": 310, "completion_tokens": 41, "total_tokens": 351},
    }


def _error(message: str, type_: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def provider(tmp_path: Path, wire: Wire) -> Iterator[Provider]:
    built = make_provider(_settings(tmp_path), transport=wire.transport())
    yield built
    built.close()  # type: ignore[attr-defined]


def _answer(wire: Wire, *replies: Reply) -> Route:
    return wire.on("POST", "/v1/chat/completions", *replies)


RATE_TEXT = (
    "Rate limit reached for gpt-test in organization org-x on requests per min (RPM): Limit 3. "
    "You can increase your rate limit by adding a payment method at https://platform.openai.com/account/billing."
)
QUOTA_TEXT = "You exceeded your current quota, please check your plan and billing details."

# One row per SPEC §6 kind (some kinds have several triggers): (id, reply, kind).
ROWS: list[tuple[str, Reply, str]] = [
    ("rate_limited", httpx.Response(429, headers={"retry-after": "20"},
                                    json=_error(RATE_TEXT, "requests", "rate_limit_exceeded")), "rate_limited"),
    ("quota_429", httpx.Response(429, json=_error(QUOTA_TEXT, "insufficient_quota", "insufficient_quota")),
     "quota_exhausted"),
    ("quota_403", httpx.Response(403, json=_error(QUOTA_TEXT, "insufficient_quota", "insufficient_quota")),
     "quota_exhausted"),
    ("quota_spend_limit", httpx.Response(400, json=_error("Billing hard limit has been reached",
                                                          "invalid_request_error", "billing_hard_limit_reached")),
     "quota_exhausted"),
    ("overloaded_503", httpx.Response(503, text="Service Unavailable"), "overloaded"),
    ("overloaded_529", httpx.Response(529, json=_error("overloaded")), "overloaded"),
    ("server_error_500", httpx.Response(500, json=_error("internal", "server_error")), "server_error"),
    ("server_error_502", httpx.Response(502, text="<html>Bad Gateway</html>"), "server_error"),
    ("timeout_read", httpx.ReadTimeout, "timeout"),
    ("unreachable_connect_timeout", httpx.ConnectTimeout, "unreachable"),
    ("unreachable_connect", httpx.ConnectError, "unreachable"),
    ("network_dropped", httpx.RemoteProtocolError, "network"),
    ("auth_401", httpx.Response(401, json=_error("Incorrect API key", "invalid_request_error", "invalid_api_key")),
     "auth"),
    ("auth_403", httpx.Response(403, json=_error("Country not supported", None, "unsupported_country")), "auth"),
    ("bad_request_400", httpx.Response(400, json=_error("Invalid schema", "invalid_request_error")), "bad_request"),
    ("model_not_found_404", httpx.Response(404, json=_error("model not found")), "model_not_found"),
    ("malformed_prose", httpx.Response(200, json=_completion("Sure! It is a question.")), "malformed_json"),
    ("malformed_body", httpx.Response(200, text="<html>proxy login</html>"), "malformed_json"),
    ("malformed_envelope", httpx.Response(200, json={"id": "x"}), "malformed_json"),
    ("invalid_verdict", httpx.Response(200, json=_completion('{"needs_reply": "maybe"}')), "invalid_verdict"),
    ("refused", httpx.Response(200, json=_completion(None, refusal="I can't help with that.")), "refused"),
    ("refused_content_filter", httpx.Response(200, json=_completion(None, finish="content_filter")), "refused"),
    ("truncated", httpx.Response(200, json=_completion('{"needs_reply": true, "cat', finish="length")),
     "truncated"),
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


def test_no_response_keeps_duration_but_no_raw(provider: Provider, wire: Wire) -> None:
    """A timeout has no body and no status, only the time spent."""
    _answer(wire, httpx.ReadTimeout)
    result = provider.complete(_prompt())
    assert result.error is not None and "WATCHER_TIMEOUT" in result.error.message
    assert (result.raw, result.usage, result.error.http_status) == (None, None, None)
    assert result.duration_ms is not None


def test_a_good_answer_is_a_verdict_with_usage(provider: Provider, wire: Wire) -> None:
    """A 200 whose content is a valid verdict object returns that verdict and token usage."""
    _answer(wire, httpx.Response(200, json=_completion(json.dumps(GOOD))))
    result = provider.complete(_prompt())
    assert result.verdict is not None and result.verdict.category == "question"
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (310, 41)
    assert result.raw is not None and '"chatcmpl-1"' in result.raw


def test_a_fenced_answer_is_accepted(provider: Provider, wire: Wire) -> None:
    """Compatible servers that ignore structured output may fence the JSON; that still parses."""
    content = f"```json\n{json.dumps(GOOD)}\n```"
    _answer(wire, httpx.Response(200, json=_completion(content)))
    assert provider.complete(_prompt()).verdict is not None


def test_request_carries_the_prompt_and_strict_schema(provider: Provider, wire: Wire) -> None:
    """The body has the model, the cached system/user text and the strict json_schema."""
    route = _answer(wire, httpx.Response(200, json=_completion(json.dumps(GOOD)))
    )
    prompt = _prompt()
    provider.complete(prompt)
    body = json.loads(route.last.content)
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": prompt.user},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": verdict_json_schema()},
    }


def test_request_is_authorised_with_a_bearer_key(provider: Provider, wire: Wire) -> None:
    """The key goes in the Authorization header."""
    route = _answer(wire, httpx.Response(200, json=_completion(json.dumps(GOOD)))
    )
    provider.complete(_prompt())
    assert route.last.headers["authorization"] == f"Bearer {KEY}"


def test_cookies_a_server_set_go_back_with_the_next_call(provider: Provider, wire: Wire) -> None:
    """As with httpx's own request building: a cookie from one answer is sent with the next call."""
    route = _answer(wire, httpx.Response(200, headers={"set-cookie": "edge=abc; Path=/"},
                                    json=_completion(json.dumps(GOOD)))
    )
    provider.complete(_prompt())
    assert "cookie" not in route.last.headers
    provider.complete(_prompt())
    assert route.last.headers["cookie"] == "edge=abc"


def test_retry_after_seconds_are_kept(provider: Provider, wire: Wire) -> None:
    """A 429's Retry-After in seconds lands on the error."""
    _answer(wire, httpx.Response(429, headers={"retry-after": "20"}, json=_error(RATE_TEXT, "requests"))
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.retry_after_s == 20.0 and "retry after 20 s" in error.message


def test_retry_after_http_date_is_kept(provider: Provider, wire: Wire) -> None:
    """A Retry-After HTTP date in the past becomes 0 seconds (the date form is understood)."""
    _answer(wire, httpx.Response(
            429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, json=_error("slow")
        )
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.retry_after_s == 0.0


def test_an_echoed_key_is_redacted_from_raw_and_message(provider: Provider, wire: Wire) -> None:
    """A server that echoes the key back does not get it into the attempt record."""
    _answer(wire, httpx.Response(
            401, json=_error(f"Incorrect API key provided: {KEY}", code="invalid_api_key")
        )
    )
    result = provider.complete(_prompt())
    assert result.error is not None and result.raw is not None
    assert KEY not in result.raw and KEY not in result.error.message
    assert "[redacted]" in result.raw and "WATCHER_API_KEY" in result.error.message


def test_raw_is_capped_at_16_kib(provider: Provider, wire: Wire) -> None:
    """A huge body is kept only up to 16 KiB."""
    _answer(wire, httpx.Response(500, text="é" * 40_000))
    result = provider.complete(_prompt())
    assert result.raw is not None and len(result.raw.encode()) <= 16 * 1024
    assert result.raw.startswith("éé")


def test_an_error_object_in_a_200_is_not_a_verdict(provider: Provider, wire: Wire) -> None:
    """Some compatible servers answer 200 with an error object; it is classified, not parsed."""
    _answer(wire, httpx.Response(200, json={"error": {"type": "overloaded_error", "message": "busy"}})
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.kind == "overloaded"


def test_names_provider_and_model(provider: Provider) -> None:
    """The attempt records which provider and model answered."""
    assert (provider.name, provider.model) == ("openai", "gpt-test")


@pytest.mark.parametrize(
    "url", ["localhost:11434/v1", "http://[::1", "http://localhost:port/v1", "http://localhost:0/v1"]
)
def test_a_base_url_that_is_not_http_is_a_config_error(tmp_path: Path, url: str) -> None:
    """A base URL without http(s) scheme, host and a usable port is refused before any call."""
    with pytest.raises(ConfigError, match="WATCHER_BASE_URL"):
        make_provider(_settings(tmp_path, base_url=url))


def test_a_missing_key_is_a_config_error(tmp_path: Path) -> None:
    """Without a key the provider is not built (exit 2 before any work)."""
    with pytest.raises(ConfigError, match="WATCHER_API_KEY"):
        make_provider(_settings(tmp_path, api_key=None))


def test_a_key_at_the_message_clip_boundary_leaves_no_prefix(
    provider: Provider, wire: Wire
) -> None:
    """Redaction happens before the server message is clipped, so no key prefix survives."""
    _answer(wire, httpx.Response(400, json=_error("x" * 290 + KEY)))
    error = provider.complete(_prompt()).error
    assert error is not None and KEY[:8] not in error.message


def test_a_key_at_the_raw_cut_leaves_no_prefix(provider: Provider, wire: Wire) -> None:
    """Redaction happens before the 16 KiB cut, so no key prefix survives at the boundary."""
    _answer(wire, httpx.Response(500, text="x" * (16 * 1024 - 8) + KEY))
    result = provider.complete(_prompt())
    assert result.raw is not None and KEY[:8] not in result.raw
