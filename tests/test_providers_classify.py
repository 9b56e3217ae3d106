"""The SPEC §6 table as one pure function, tested without HTTP."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from watcher.models import ERROR_KINDS
from watcher.providers.classify import MAX_RETRY_AFTER_S, classify, retry_after_seconds

# One input per row of the SPEC §6 table (several for rows with several triggers).
TABLE: list[tuple[str, dict[str, Any]]] = [
    ("rate_limited", {"status": 429, "error_type": "rate_limit_error"}),
    ("quota_exhausted", {"status": 429, "error_code": "insufficient_quota"}),
    ("quota_exhausted", {"status": 403, "error_type": "insufficient_quota"}),
    ("overloaded", {"status": 529}),
    ("overloaded", {"status": 503}),
    ("overloaded", {"status": 500, "error_type": "overloaded_error"}),
    ("server_error", {"status": 500}),
    ("server_error", {"status": 502}),
    ("unreachable", {"transport": "unreachable"}),
    ("timeout", {"transport": "timeout"}),
    ("network", {"transport": "network"}),
    ("auth", {"status": 401}),
    ("auth", {"status": 403}),
    ("model_not_found", {"status": 404}),
    ("model_not_found", {"status": 404, "error_type": "not_found_error", "error_message": "model: claude-x"}),
    ("model_not_found", {"status": 404, "error_code": "model_not_found"}),
    ("model_not_found", {"status": 400, "error_message": "Invalid model name passed in model=gpt-nope"}),
    ("model_not_found", {"status": 422, "error_code": "model_decommissioned"}),
    ("bad_request", {"status": 400}),
    ("bad_request", {"status": 422}),
    ("malformed_json", {"status": 200, "parse_failure": "malformed_json"}),
    ("invalid_verdict", {"status": 200, "parse_failure": "invalid_verdict"}),
    ("refused", {"status": 200, "stop": "refusal"}),
    ("refused", {"status": 200, "stop": "content_filter"}),
    ("truncated", {"status": 200, "stop": "length"}),
]


@pytest.mark.parametrize(("kind", "inputs"), TABLE, ids=[f"{k}-{i}" for i, (k, _) in enumerate(TABLE)])
def test_each_table_row_gives_its_kind(kind: str, inputs: dict[str, Any]) -> None:
    """Every trigger listed in the SPEC §6 table maps to its kind."""
    assert classify(**inputs) == kind


def test_every_kind_of_the_table_is_reachable() -> None:
    """Every error kind except the pipeline's own `interrupted` can come out of classify()."""
    assert {kind for kind, _ in TABLE} == set(ERROR_KINDS) - {"interrupted"}


def test_a_good_answer_is_no_error() -> None:
    """A 2xx with a normal stop and a parsed verdict classifies as None."""
    assert classify(status=200) is None


def test_a_no_response_failure_wins_over_everything() -> None:
    """No response means no status, no stop reason, no parse: transport decides."""
    assert classify(transport="timeout", status=500, parse_failure="malformed_json") == "timeout"


def test_truncation_wins_over_the_parse_failure_it_causes() -> None:
    """A cut-off answer also fails to parse; `truncated` is the useful diagnosis."""
    assert classify(status=200, stop="length", parse_failure="malformed_json") == "truncated"


def test_openai_rate_limit_message_mentioning_billing_stays_a_rate_limit() -> None:
    """OpenAI's ordinary 429 text mentions the billing page; that is not quota exhaustion."""
    message = (
        "Rate limit reached for gpt-4o-mini on requests per min. Add a payment method at /account/billing."
    )
    assert classify(status=429, error_code="rate_limit_exceeded", error_message=message) == "rate_limited"


@pytest.mark.parametrize(
    "code", ["insufficient_quota", "billing_hard_limit_reached", "billing_not_active", "quota_exceeded"]
)
def test_openai_quota_and_spend_limit_codes_are_quota_exhausted(code: str) -> None:
    """OpenAI quota and spend-limit codes stop the batch as quota, whatever the 4xx status."""
    for status in (400, 403, 429):
        assert classify(status=status, error_code=code) == "quota_exhausted"


@pytest.mark.parametrize(
    "message",
    [
        "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing.",
        "You have reached your specified API usage limits. You will regain access on 2026-06-01.",
        "This request would exceed your organization's spend limit.",
    ],
)
def test_anthropic_spend_limit_messages_are_quota_exhausted(message: str) -> None:
    """Anthropic reports spend limits as invalid_request_error 400; the message decides."""
    assert (
        classify(status=400, error_type="invalid_request_error", error_message=message) == "quota_exhausted"
    )


def test_payment_required_is_quota_exhausted() -> None:
    """HTTP 402 (Anthropic billing_error, gateways out of credit) is quota exhaustion."""
    assert classify(status=402) == "quota_exhausted"


def test_a_quota_code_on_a_5xx_is_a_server_error() -> None:
    """Quota markers only count on client errors; a 500 stays a server error."""
    assert classify(status=500, error_code="insufficient_quota") == "server_error"


def test_an_error_object_in_a_2xx_body_is_classified() -> None:
    """Some compatible servers answer 200 with an error object; it is not a verdict."""
    assert classify(status=200, error_type="overloaded_error") == "overloaded"
    assert classify(status=200, error_type="something_else") == "server_error"


@pytest.mark.parametrize(
    ("status", "body_error"),
    [
        (404, {"message": "The model `gpt-nope` does not exist", "type": "invalid_request_error",
               "code": "model_not_found"}),  # OpenAI
        (404, {"type": "not_found_error", "message": "model: claude-3-5-haiku-latest"}),  # Anthropic, retired
        (400, {"message": "litellm.BadRequestError: Invalid model name passed in model=gpt-nope. Call "
                          "`/v1/models` to view available models for your key.", "type": "None", "code": "400"}),
        (404, {"message": 'model "llama3.3" not found, try pulling it first'}),  # Ollama
        (400, {"message": "The model `gpt-4-0314` has been deprecated", "code": "model_decommissioned"}),
    ],
    ids=["openai-404", "anthropic-404", "litellm-400", "ollama-404", "decommissioned-400"],
)
def test_an_error_naming_the_model_is_model_not_found(status: int, body_error: dict[str, str]) -> None:
    """Real providers' "unknown, invalid or retired model" answers are model_not_found, not bad_request."""
    kind = classify(status=status, error_type=body_error.get("type"), error_code=body_error.get("code"),
                    error_message=body_error.get("message"))
    assert kind == "model_not_found"


@pytest.mark.parametrize(
    "message",
    [
        "max_tokens: 100000 > 64000, which is the maximum allowed for this model",
        "Unsupported parameter: 'max_tokens' is not supported with this model.",
        "Invalid schema for response_format 'verdict'",
        "messages: text content blocks must be non-empty",
    ],
)
def test_a_400_that_does_not_blame_the_model_stays_bad_request(message: str) -> None:
    """Mentioning "model" is not enough: the request shape is the setup, so bad_request."""
    assert classify(status=400, error_type="invalid_request_error", error_message=message) == "bad_request"


def test_a_model_error_object_in_a_2xx_body_is_model_not_found() -> None:
    """A compatible server that answers 200 with a model_not_found error object is not a server error."""
    assert classify(status=200, error_code="model_not_found") == "model_not_found"


def test_a_redirect_is_a_bad_request() -> None:
    """Redirects are not followed: a 3xx means the base URL is wrong."""
    assert classify(status=307) == "bad_request"


NOW = datetime(2026, 5, 14, 9, 0, 0, tzinfo=UTC)


def test_retry_after_in_seconds() -> None:
    """Delta-seconds, including fractions, are returned as float seconds."""
    assert retry_after_seconds("20") == 20.0
    assert retry_after_seconds(" 1.5 ") == 1.5


def test_retry_after_as_http_date() -> None:
    """An HTTP date becomes the seconds from now until then."""
    assert retry_after_seconds("Thu, 14 May 2026 09:00:30 GMT", now=NOW) == 30.0


def test_retry_after_in_the_past_is_zero() -> None:
    """A date already past means "now", never a negative wait."""
    assert retry_after_seconds("Thu, 14 May 2026 08:00:00 GMT", now=NOW) == 0.0


def test_retry_after_ms_is_the_fallback() -> None:
    """Without Retry-After, OpenAI's retry-after-ms header is used."""
    assert retry_after_seconds(None, value_ms="250") == 0.25


def test_unreadable_retry_after_is_none() -> None:
    """Garbage, negative or infinite values are ignored rather than trusted."""
    for value in ("soon", "-5", "inf", "nan", ""):
        assert retry_after_seconds(value, now=NOW) is None, value


def test_an_absurd_retry_after_is_capped() -> None:
    """A wait too long to add to "now" (it would overflow datetime) is capped, seconds or date."""
    assert retry_after_seconds("1e12", now=NOW) == MAX_RETRY_AFTER_S
    assert retry_after_seconds("Fri, 31 Dec 9999 23:59:59 GMT", now=NOW) == MAX_RETRY_AFTER_S
    assert retry_after_seconds(None, value_ms="1e15") == MAX_RETRY_AFTER_S
