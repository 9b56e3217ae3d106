"""OpenAI-compatible provider over respx: one request per call, every outcome classified (SPEC §6)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from pydantic import SecretStr

from watcher.config import Settings
from watcher.errors import ConfigError
from watcher.models import Comment, Prompt
from watcher.providers.prompts import render
from watcher.providers import make_provider, verdict_json_schema
from watcher.providers.base import Provider

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
def provider(tmp_path: Path) -> Iterator[Provider]:
    built = make_provider(_settings(tmp_path))
    yield built
    built.close()  # type: ignore[attr-defined]


@pytest.fixture
def mock() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_mocked=True, assert_all_called=False) as router:
        yield router


RATE_TEXT = (
    "Rate limit reached for gpt-test in organization org-x on requests per min (RPM): Limit 3. "
    "You can increase your rate limit by adding a payment method at https://platform.openai.com/account/billing."
)
QUOTA_TEXT = "You exceeded your current quota, please check your plan and billing details."

# One row per SPEC §6 kind (some kinds have several triggers): (id, mock kwargs, kind).
ROWS: list[tuple[str, dict[str, Any], str]] = [
    (
        "rate_limited",
        {
            "return_value": httpx.Response(
                429, headers={"retry-after": "20"}, json=_error(RATE_TEXT, "requests", "rate_limit_exceeded")
            )
        },
        "rate_limited",
    ),
    (
        "quota_429",
        {
            "return_value": httpx.Response(
                429, json=_error(QUOTA_TEXT, "insufficient_quota", "insufficient_quota")
            )
        },
        "quota_exhausted",
    ),
    (
        "quota_403",
        {
            "return_value": httpx.Response(
                403, json=_error(QUOTA_TEXT, "insufficient_quota", "insufficient_quota")
            )
        },
        "quota_exhausted",
    ),
    (
        "quota_spend_limit",
        {
            "return_value": httpx.Response(
                400,
                json=_error(
                    "Billing hard limit has been reached",
                    "invalid_request_error",
                    "billing_hard_limit_reached",
                ),
            )
        },
        "quota_exhausted",
    ),
    ("overloaded_503", {"return_value": httpx.Response(503, text="Service Unavailable")}, "overloaded"),
    ("overloaded_529", {"return_value": httpx.Response(529, json=_error("overloaded"))}, "overloaded"),
    (
        "server_error_500",
        {"return_value": httpx.Response(500, json=_error("internal", "server_error"))},
        "server_error",
    ),
    (
        "server_error_502",
        {"return_value": httpx.Response(502, text="<html>Bad Gateway</html>")},
        "server_error",
    ),
    ("timeout_read", {"side_effect": httpx.ReadTimeout}, "timeout"),
    ("unreachable_connect_timeout", {"side_effect": httpx.ConnectTimeout}, "unreachable"),
    ("unreachable_connect", {"side_effect": httpx.ConnectError}, "unreachable"),
    ("network_dropped", {"side_effect": httpx.RemoteProtocolError}, "network"),
    (
        "auth_401",
        {
            "return_value": httpx.Response(
                401, json=_error("Incorrect API key", "invalid_request_error", "invalid_api_key")
            )
        },
        "auth",
    ),
    (
        "auth_403",
        {
            "return_value": httpx.Response(
                403, json=_error("Country not supported", None, "unsupported_country")
            )
        },
        "auth",
    ),
    (
        "bad_request_400",
        {"return_value": httpx.Response(400, json=_error("Invalid schema", "invalid_request_error"))},
        "bad_request",
    ),
    ("model_not_found_404", {"return_value": httpx.Response(404, json=_error("model not found"))}, "model_not_found"),
    (
        "malformed_prose",
        {"return_value": httpx.Response(200, json=_completion("Sure! It is a question."))},
        "malformed_json",
    ),
    (
        "malformed_body",
        {"return_value": httpx.Response(200, text="<html>proxy login</html>")},
        "malformed_json",
    ),
    ("malformed_envelope", {"return_value": httpx.Response(200, json={"id": "x"})}, "malformed_json"),
    (
        "invalid_verdict",
        {"return_value": httpx.Response(200, json=_completion('{"needs_reply": "maybe"}'))},
        "invalid_verdict",
    ),
    (
        "refused",
        {"return_value": httpx.Response(200, json=_completion(None, refusal="I can't help with that."))},
        "refused",
    ),
    (
        "refused_content_filter",
        {"return_value": httpx.Response(200, json=_completion(None, finish="content_filter"))},
        "refused",
    ),
    (
        "truncated",
        {
            "return_value": httpx.Response(
                200, json=_completion('{"needs_reply": true, "cat', finish="length")
            )
        },
        "truncated",
    ),
]


@pytest.mark.parametrize(("mock_kwargs", "kind"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_outcome_is_one_request_and_one_kind(
    provider: Provider, mock: respx.MockRouter, mock_kwargs: dict[str, Any], kind: str
) -> None:
    """Every §6 row: the classified kind, after exactly one HTTP request (no retry)."""
    route = mock.post("/chat/completions").mock(**mock_kwargs)
    result = provider.complete(_prompt())
    assert result.error is not None and result.error.kind == kind
    assert route.call_count == 1 and mock.calls.call_count == 1


@pytest.mark.parametrize(
    ("mock_kwargs", "kind"),
    [r[1:] for r in ROWS if "return_value" in r[1]],
    ids=[r[0] for r in ROWS if "return_value" in r[1]],
)
def test_a_response_that_arrived_keeps_raw_usage_status_and_duration(
    provider: Provider, mock: respx.MockRouter, mock_kwargs: dict[str, Any], kind: str
) -> None:
    """Whenever a response arrived, its raw body, usage, HTTP status and duration are kept."""
    mock.post("/chat/completions").mock(**mock_kwargs)
    result = provider.complete(_prompt())
    assert result.error is not None and result.error.http_status == mock_kwargs["return_value"].status_code
    assert result.raw == mock_kwargs["return_value"].text
    assert result.usage is not None and result.duration_ms is not None


def test_no_response_keeps_duration_but_no_raw(provider: Provider, mock: respx.MockRouter) -> None:
    """A timeout has no body and no status, only the time spent."""
    mock.post("/chat/completions").mock(side_effect=httpx.ReadTimeout)
    result = provider.complete(_prompt())
    assert result.error is not None and "WATCHER_TIMEOUT" in result.error.message
    assert (result.raw, result.usage, result.error.http_status) == (None, None, None)
    assert result.duration_ms is not None


def test_a_good_answer_is_a_verdict_with_usage(provider: Provider, mock: respx.MockRouter) -> None:
    """A 200 whose content is a valid verdict object returns that verdict and token usage."""
    mock.post("/chat/completions").mock(return_value=httpx.Response(200, json=_completion(json.dumps(GOOD))))
    result = provider.complete(_prompt())
    assert result.verdict is not None and result.verdict.category == "question"
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (310, 41)
    assert result.raw is not None and '"chatcmpl-1"' in result.raw


def test_a_fenced_answer_is_accepted(provider: Provider, mock: respx.MockRouter) -> None:
    """Compatible servers that ignore structured output may fence the JSON; that still parses."""
    content = f"```json\n{json.dumps(GOOD)}\n```"
    mock.post("/chat/completions").mock(return_value=httpx.Response(200, json=_completion(content)))
    assert provider.complete(_prompt()).verdict is not None


def test_request_carries_the_prompt_and_strict_schema(provider: Provider, mock: respx.MockRouter) -> None:
    """The body has the model, the cached system/user text and the strict json_schema."""
    route = mock.post("/chat/completions").mock(
        return_value=httpx.Response(200, json=_completion(json.dumps(GOOD)))
    )
    prompt = _prompt()
    provider.complete(prompt)
    body = json.loads(route.calls.last.request.content)
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": prompt.system},
        {"role": "user", "content": prompt.user},
    ]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": verdict_json_schema()},
    }


def test_request_is_authorised_with_a_bearer_key(provider: Provider, mock: respx.MockRouter) -> None:
    """The key goes in the Authorization header."""
    route = mock.post("/chat/completions").mock(
        return_value=httpx.Response(200, json=_completion(json.dumps(GOOD)))
    )
    provider.complete(_prompt())
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


def test_the_request_sent_is_the_one_httpx_would_build(provider: Provider, mock: respx.MockRouter) -> None:
    """Requests are built from parts prepared once per provider, and are exactly what
    ``client.build_request`` makes: URL, every header (in order), body and timeout."""
    route = mock.post("/chat/completions").mock(
        return_value=httpx.Response(200, json=_completion(json.dumps(GOOD)))
    )
    prompt = _prompt()
    provider.complete(prompt)
    sent = route.calls.last.request
    client: httpx.Client = provider._client  # type: ignore[attr-defined]
    built = client.build_request("POST", "/chat/completions", json=provider.request_body(prompt))  # type: ignore[attr-defined]
    assert sent.url == built.url
    assert list(sent.headers.raw) == list(built.headers.raw)
    assert sent.content == built.content
    assert sent.extensions["timeout"] == built.extensions["timeout"]


def test_cookies_a_server_set_go_back_with_the_next_call(provider: Provider, mock: respx.MockRouter) -> None:
    """As with httpx's own request building: a cookie from one answer is sent with the next call."""
    route = mock.post("/chat/completions").mock(
        return_value=httpx.Response(200, headers={"set-cookie": "edge=abc; Path=/"},
                                    json=_completion(json.dumps(GOOD)))
    )
    provider.complete(_prompt())
    assert "cookie" not in route.calls.last.request.headers
    provider.complete(_prompt())
    assert route.calls.last.request.headers["cookie"] == "edge=abc"


def test_retry_after_seconds_are_kept(provider: Provider, mock: respx.MockRouter) -> None:
    """A 429's Retry-After in seconds lands on the error."""
    mock.post("/chat/completions").mock(
        return_value=httpx.Response(429, headers={"retry-after": "20"}, json=_error(RATE_TEXT, "requests"))
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.retry_after_s == 20.0 and "retry after 20 s" in error.message


def test_retry_after_http_date_is_kept(provider: Provider, mock: respx.MockRouter) -> None:
    """A Retry-After HTTP date in the past becomes 0 seconds (the date form is understood)."""
    mock.post("/chat/completions").mock(
        return_value=httpx.Response(
            429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, json=_error("slow")
        )
    )
    error = provider.complete(_prompt()).error
    assert error is not None and error.retry_after_s == 0.0


def test_an_echoed_key_is_redacted_from_raw_and_message(provider: Provider, mock: respx.MockRouter) -> None:
    """A server that echoes the key back does not get it into the attempt record."""
    mock.post("/chat/completions").mock(
        return_value=httpx.Response(
            401, json=_error(f"Incorrect API key provided: {KEY}", code="invalid_api_key")
        )
    )
    result = provider.complete(_prompt())
    assert result.error is not None and result.raw is not None
    assert KEY not in result.raw and KEY not in result.error.message
    assert "[redacted]" in result.raw and "WATCHER_API_KEY" in result.error.message


def test_raw_is_capped_at_16_kib(provider: Provider, mock: respx.MockRouter) -> None:
    """A huge body is kept only up to 16 KiB."""
    mock.post("/chat/completions").mock(return_value=httpx.Response(500, text="é" * 40_000))
    result = provider.complete(_prompt())
    assert result.raw is not None and len(result.raw.encode()) <= 16 * 1024
    assert result.raw.startswith("éé")


def test_an_error_object_in_a_200_is_not_a_verdict(provider: Provider, mock: respx.MockRouter) -> None:
    """Some compatible servers answer 200 with an error object; it is classified, not parsed."""
    mock.post("/chat/completions").mock(
        return_value=httpx.Response(200, json={"error": {"type": "overloaded_error", "message": "busy"}})
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
    provider: Provider, mock: respx.MockRouter
) -> None:
    """Redaction happens before the server message is clipped, so no key prefix survives."""
    mock.post("/chat/completions").mock(return_value=httpx.Response(400, json=_error("x" * 290 + KEY)))
    error = provider.complete(_prompt()).error
    assert error is not None and KEY[:8] not in error.message


def test_a_key_at_the_raw_cut_leaves_no_prefix(provider: Provider, mock: respx.MockRouter) -> None:
    """Redaction happens before the 16 KiB cut, so no key prefix survives at the boundary."""
    mock.post("/chat/completions").mock(return_value=httpx.Response(500, text="x" * (16 * 1024 - 8) + KEY))
    result = provider.complete(_prompt())
    assert result.raw is not None and KEY[:8] not in result.raw
