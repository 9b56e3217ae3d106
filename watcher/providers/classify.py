"""The SPEC §6 table as one pure function: what happened → exactly one error kind (or none).

Providers translate their wire format into the keyword arguments of :func:`classify` (an httpx
exception into ``transport``, a ``finish_reason``/``stop_reason`` into ``stop``, the error
object of a JSON body into ``error_type``/``error_code``/``error_message``) and this module
decides. No I/O, no httpx: it is tested with plain values, including that every kind of the
table is reachable.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal

from watcher.models import ErrorKind

# How a call failed before a complete response arrived: "unreachable" (no connection was
# made: refused, DNS, TLS, connect timeout), "timeout" (no complete answer within the total
# deadline), "network" (the connection broke mid-response, or the body was too large).
Transport = Literal["unreachable", "timeout", "network"]
# Kinds whose request never left the machine: no connection was made, so no byte of it was sent
# (SPEC §16.3: recorded not_sent, not counted toward the comment's attempts).
NOT_SENT_KINDS = frozenset({"unreachable"})
# Provider stop reasons, normalised: "length" (OpenAI finish_reason length, Anthropic
# max_tokens), "refusal" (OpenAI message.refusal, Anthropic stop_reason refusal),
# "content_filter" (OpenAI finish_reason content_filter). Anything else is a normal stop.
Stop = Literal["length", "refusal", "content_filter"]

# Error codes/types that mean "no more money", not "too fast": waiting a minute will not help.
QUOTA_CODES = frozenset(
    {
        "insufficient_quota",  # OpenAI 429: "You exceeded your current quota"
        "billing_hard_limit_reached",  # OpenAI: the organisation's hard spend limit
        "billing_not_active",  # OpenAI: no payment method / account not activated
        "quota_exceeded",  # Azure OpenAI and several OpenAI-compatible gateways
        "billing_error",  # Anthropic 402: billing or payment problem
        "insufficient_credits",  # OpenAI-compatible gateways (e.g. OpenRouter 402)
    }
)
# Anthropic reports spend limits and an empty credit balance as a plain invalid_request_error
# (HTTP 400); only the message tells them apart. Deliberately specific phrases: OpenAI's
# ordinary rate-limit message mentions "billing" too, and must stay a rate limit.
QUOTA_PHRASES = (
    "exceeded your current quota",
    "credit balance is too low",
    "api usage limits",
    "spend limit",
    "spending limit",
    "insufficient credits",
)
# Error codes that name the model as the problem (OpenAI 404 model_not_found; Groq and several
# gateways model_decommissioned / model_not_available / invalid_model).
MODEL_CODES = frozenset(
    {"model_not_found", "model_decommissioned", "model_not_available", "invalid_model"}
)
# A 400/422 whose message names the model: LiteLLM 400 "Invalid model name passed in model=…",
# OpenAI "The model `x` does not exist or you do not have access to it", Ollama 404
# 'model "x" not found, try pulling it first', vLLM 404 "The model `x` does not exist".
# Only counted when the message also says "model", so "max_tokens is invalid" stays bad_request.
MODEL_PHRASES = (
    "invalid model",
    "unknown model",
    "no such model",
    "not a valid model",
    "not found",
    "does not exist",
    "decommissioned",
    "has been retired",
    "is retired",
    "no longer available",
    "no longer supported",
)
# Statuses where an error naming the model means "wrong model", not "bad request shape".
MODEL_STATUSES = frozenset({400, 404, 422})
OVERLOADED_STATUSES = frozenset({503, 529})
AUTH_STATUSES = frozenset({401, 403})
AUTH_TYPES = frozenset({"authentication_error", "permission_error", "invalid_api_key"})
RATE_LIMIT_TYPES = frozenset({"rate_limit_error", "rate_limit_exceeded"})
# Longer than any real server asks for. Callers add the wait to "now"; an absurd Retry-After
# ("1e12", a date in year 9999) would otherwise overflow datetime and crash the run (exit 1)
# instead of stopping it cleanly (exit 3).
MAX_RETRY_AFTER_S = 7 * 24 * 3600.0


def classify(
    *,
    transport: Transport | None = None,
    status: int | None = None,
    error_type: str | None = None,
    error_code: str | None = None,
    error_message: str | None = None,
    stop: Stop | None = None,
    parse_failure: ErrorKind | None = None,
) -> ErrorKind | None:
    """The one error kind for an outcome, or ``None`` when it is a usable answer.

    Precedence follows what is known first: no response at all, then the HTTP status (and the
    error object of its body), then how generation stopped (a truncated answer also fails to
    parse, but "truncated" is the useful diagnosis), then the parse result.
    """
    if transport is not None:
        return transport
    markers = {m.lower() for m in (error_type, error_code) if m}
    if status is not None and not 200 <= status < 300:
        return _http_kind(status, markers, (error_message or "").lower())
    if markers:
        # A 2xx whose body is an error object (some OpenAI-compatible servers do this).
        return _http_kind(status or 200, markers, (error_message or "").lower())
    if stop == "length":
        return "truncated"
    if stop in ("refusal", "content_filter"):
        return "refused"
    return parse_failure


def never_sent(kind: str) -> bool:
    """Whether an attempt that failed with ``kind`` never sent its request (SPEC §16.3)."""
    return kind in NOT_SENT_KINDS


def _http_kind(status: int, markers: set[str], message: str) -> ErrorKind:
    if is_quota(status, markers, message):
        return "quota_exhausted"
    if status == 429 or markers & RATE_LIMIT_TYPES:
        return "rate_limited"
    if status in AUTH_STATUSES or markers & AUTH_TYPES:
        return "auth"
    if status in OVERLOADED_STATUSES or "overloaded_error" in markers:
        return "overloaded"
    if is_model_missing(status, markers, message):
        return "model_not_found"
    if status >= 500 or 200 <= status < 300:
        return "server_error"
    # Other 4xx, and 1xx/3xx (not followed: a redirect means the base URL is wrong).
    return "bad_request"


def is_quota(status: int, markers: set[str], message: str) -> bool:
    """Quota/spend-limit exhaustion: 402, or a 4xx (or error body) naming a quota code or phrase."""
    if status == 402:
        return True
    if not (400 <= status < 500 or 200 <= status < 300):
        return False
    return bool(markers & QUOTA_CODES) or any(phrase in message for phrase in QUOTA_PHRASES)


def is_model_missing(status: int, markers: set[str], message: str) -> bool:
    """The model is unknown, invalid or retired: any 404 on the call (a retired model, or a base
    URL missing its ``/v1``), or a 400/404/422 (or error body) naming the model as the problem."""
    if status == 404:
        return True
    if not (status in MODEL_STATUSES or 200 <= status < 300):
        return False
    if markers & MODEL_CODES:
        return True
    return "model" in message and any(phrase in message for phrase in MODEL_PHRASES)


def retry_after_seconds(
    value: str | None, *, value_ms: str | None = None, now: datetime | None = None
) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date), else ``retry-after-ms``.

    ``None`` when absent or unreadable; a date in the past is ``0.0``; at most
    :data:`MAX_RETRY_AFTER_S`. Never raises.
    """
    seconds = None
    if value:
        seconds = _as_seconds(value.strip())
        if seconds is None:
            seconds = _date_delta(value.strip(), now or datetime.now(UTC))
    if seconds is None and value_ms:
        millis = _as_seconds(value_ms.strip())
        if millis is not None:
            seconds = millis / 1000.0
    return None if seconds is None else min(seconds, MAX_RETRY_AFTER_S)


def _as_seconds(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    if number == math.inf and any(c.isdigit() for c in text):
        # 400 digits or "1e400" overflow to infinity: a number too big to wait for, i.e. the
        # longest wait (capped by the caller), not "no Retry-After" (SPEC §13.5, and
        # tests/test_special_paths.py::test_a_retry_after_too_big_for_a_float_means_7_days).
        # The words "inf"/"infinity" are no number and stay unreadable.
        return number
    return number if math.isfinite(number) and number >= 0 else None


def _date_delta(text: str, now: datetime) -> float | None:
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # RFC 9110 dates are GMT; "-0000" parses as naive
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, (moment - now).total_seconds())


# The words for a base URL whose path is wrong, shared by `check`, the probe and a real call.
WRONG_BASE_URL_HINT = "for an OpenAI-compatible server the base URL usually ends in /v1"


def is_missing_route(status: int, *, has_error_object: bool) -> bool:
    """A 404/405/501 that carries no error object is the server saying it has no such path, not
    that it does not know the model: OpenAI, Ollama's /v1, vLLM and Anthropic all name a missing
    model in a JSON error, while Ollama's bare root (no /v1) answers "404 page not found" in plain
    text (tests/test_first_contact_check.py)."""
    return status in (404, 405, 501) and not has_error_object


def missing_route_message(provider: str, status: int, url: str) -> str:
    """What a call to a path the server does not have means: the base URL, never the model."""
    return (
        f"{provider} HTTP {status}: no such endpoint at {url} — the server does not have this "
        f"path, so the base URL is wrong, not the model; {WRONG_BASE_URL_HINT} "
        "(check WATCHER_BASE_URL)"
    )


def no_models_endpoint_message(url: str) -> str:
    """The probe found no models list at ``url`` (404/501, or a page that is not a list)."""
    return f"no models endpoint at {url} — {WRONG_BASE_URL_HINT}"
