"""The API key leaves no provider, in any spelling: raw body, verdict strings, messages (SPEC §13.5)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.provider import FakeProvider, in_process, key_leaks, u_escaped
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from watcher.config import Settings
from watcher.models import AttemptError, Comment, Prompt, Verdict
from watcher.providers.prompts import render
from watcher.providers import CallResult, ProbeResult, make_provider
from watcher.providers.redact import RAW_LIMIT_BYTES, REDACTED, Redaction

KEY = "sk-proj-Ab/12+xy/Zq=="  # a "/" to escape as "\/", and the "+" and "=" of real keys
VERDICT = {"needs_reply": True, "category": "question", "priority": "normal",
           "summary": "Asks how to configure the thing.", "reply_hint": "Point to the docs."}

PRINTABLE = "".join(chr(c) for c in range(0x20, 0x7F))
# key_leaks undoes escapes at every depth, so it reads any backslash as one: keep backslashes out
# of keys and surrounding text there (a backslash key has its own examples below).
NO_BACKSLASH = PRINTABLE.replace("\\", "")
KEYS = st.builds(lambda a, b: a + "/" + b, st.text(NO_BACKSLASH, max_size=20), st.text(NO_BACKSLASH, max_size=20))
AROUND = st.text(NO_BACKSLASH, max_size=20)
SHORT = {"/": "\\/", '"': '\\"'}


@st.composite
def spelled(draw: st.DrawFn, key: str) -> str:
    """``key`` as a JSON string may carry it: each character literal, short-escaped or \\uXXXX."""
    out = []
    for char in key:
        forms = [char if char != '"' else '\\"', f"\\u{ord(char):04x}", f"\\u{ord(char):04X}"]
        out.append(draw(st.sampled_from([*forms, SHORT.get(char, char)])))
    return "".join(out)


# ---- the text function -----------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.data(), key=KEYS, before=AROUND, after=AROUND, depth=st.integers(0, 2))
def test_a_key_in_any_json_spelling_at_any_depth_is_redacted(
    data: st.DataObject, key: str, before: str, after: str, depth: int
) -> None:
    """Literal, \\/-escaped, \\u-escaped in either hex case, mixed, inside JSON inside JSON: gone."""
    text = before + data.draw(spelled(key)) + after
    for _ in range(depth):
        text = json.dumps(text)
    assert not key_leaks(Redaction(key).text(text), key)


@settings(max_examples=200, deadline=None)
@given(key=KEYS, junk=st.lists(AROUND, max_size=3), ascii_only=st.booleans(), slash=st.booleans())
def test_no_decoded_string_of_a_redacted_body_holds_the_key(
    key: str, junk: list[str], ascii_only: bool, slash: bool
) -> None:
    """Decode the redacted body: no string value or object key in it is, or contains, the key."""
    body = json.dumps({"error": {"message": f"bad key {key}", key: [*junk, key]}, "x": key}, ensure_ascii=ascii_only)
    body = body.replace("/", "\\/") if slash else body
    out = Redaction(key).text(body)
    assert not key_leaks(out, key)
    try:
        decoded = json.loads(out)
    except ValueError:
        return  # a key with a quote may take the JSON apart; key_leaks above still holds
    assert not any(key in s for s in _strings(decoded))


@settings(max_examples=300, deadline=None)
@given(key=st.text(PRINTABLE, min_size=1, max_size=12), before=AROUND, after=AROUND)
def test_no_marker_spells_the_key_again(key: str, before: str, after: str) -> None:
    """Whatever the key (brackets, backslashes, a piece of "[redacted]"), it is gone, once or twice."""
    redaction = Redaction(key)
    out = redaction.text(before + key + after + key)
    assert key not in out
    assert redaction.text(out) == out


@pytest.mark.parametrize("body", ['x "a\\\\b" y', 'x "a\\\\\\\\b" y', "x a\\b y"])
def test_a_key_with_a_backslash_is_redacted_literal_and_escaped(body: str) -> None:
    """A backslash in the key matches itself and its JSON escape."""
    assert "a" not in Redaction("a\\b").text(body).replace("[redacted]", "")


def test_a_megabyte_of_backslashes_is_redacted_in_linear_time() -> None:
    """A hostile body of backslashes cannot make the pattern quadratic (a match starts only at a run)."""
    redaction = Redaction("k\\/\\u0061")
    for body in ("\\" * 1_000_000, "k" + "\\" * 1_000_000 + "/"):
        assert redaction.text(body).count("k") <= 1  # returns at all, within the test timeout


def test_no_key_no_change() -> None:
    """A provider without a key (offline) changes nothing."""
    assert Redaction("").text(f"{REDACTED} sk-x") == f"{REDACTED} sk-x"


# ---- the boundary: CallResult and ProbeResult ------------------------------------------------------


def test_the_raw_body_is_redacted_before_the_16_kib_cut() -> None:
    """An escaped key straddling the 16 KiB cut leaves no prefix behind."""
    for spelling in (KEY.replace("/", "\\/"), u_escaped(KEY)):
        raw = "x" * (RAW_LIMIT_BYTES - 12) + spelling + "y" * 100
        result = Redaction(KEY).call(CallResult(error=AttemptError(kind="malformed_json", message="m"), raw=raw))
        assert result.raw is not None and len(result.raw.encode()) <= RAW_LIMIT_BYTES
        assert (REDACTED + "y" * 100).startswith(result.raw.lstrip("x"))  # the marker, no key character


def test_every_verdict_string_is_redacted_and_the_verdict_stays_valid() -> None:
    """summary and reply_hint quoting the key keep their meaning, with the marker instead."""
    verdict = Verdict.model_validate({**VERDICT, "summary": f"Says {KEY} works.", "reply_hint": f"Revoke {KEY}."})
    result = Redaction(KEY).call(CallResult(verdict=verdict, raw="{}"))
    assert result.verdict is not None
    assert (result.verdict.summary, result.verdict.reply_hint) == (f"Says {REDACTED} works.", f"Revoke {REDACTED}.")


def test_a_verdict_string_grown_past_its_limit_is_cut_back_to_its_length() -> None:
    """A short key under a longer marker: the summary keeps its original length and stays valid."""
    summary = "k9 " + "s" * 277
    verdict = Verdict.model_validate({**VERDICT, "summary": summary})
    result = Redaction("k9").call(CallResult(verdict=verdict))
    assert result.verdict is not None and len(result.verdict.summary) == len(summary)
    assert result.verdict.summary.startswith(REDACTED) and result.verdict.summary.endswith("…")


def test_a_summary_that_was_only_the_key_and_became_empty_is_an_invalid_verdict() -> None:
    """A key inside every marker is deleted: a summary of nothing but the key is no summary."""
    verdict = Verdict.model_validate({**VERDICT, "summary": "red"})
    result = Redaction("red").call(CallResult(verdict=verdict, raw='{"summary": "red"}'))
    assert result.verdict is None and result.error is not None and result.error.kind == "invalid_verdict"
    assert result.raw is not None and "red" not in result.raw


def test_the_error_message_and_the_probe_message_are_redacted() -> None:
    """Every message, whatever put the key in it."""
    redaction = Redaction(KEY)
    error = AttemptError(kind="auth", message=f"bad {u_escaped(KEY)}", http_status=401)
    called = redaction.call(CallResult(error=error)).error
    assert called is not None and not key_leaks(called.message, KEY)
    probe = redaction.probe(ProbeResult(ok=False, kind="auth", message=f"bad {KEY.replace('/', chr(92) + '/')}"))
    assert not key_leaks(probe.message, KEY) and REDACTED in probe.message


# ---- through the providers -------------------------------------------------------------------------


def _settings(tmp_path: Path, provider: str, base_url: str, key: str = KEY) -> Settings:
    return Settings(data_dir=tmp_path, provider=provider, model="fake-model", base_url=base_url,
                    api_key=SecretStr(key), timeout=5.0)


def _prompt() -> Prompt:
    comment = Comment(id="ab12", article_id=7, article_title="T", article_url="https://dev.to/me/t", author="ana",
                      created_at="2026-05-14T09:12:44Z", text="TAG:echo How?", url="https://dev.to/ana/comment/ab12")
    return render(comment)


def _said(result: CallResult) -> list[str]:
    texts = [result.raw or "", result.error.message if result.error else ""]
    return texts + ([result.verdict.summary, result.verdict.reply_hint] if result.verdict else [])


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    yield FakeProvider()


@pytest.mark.parametrize("behaviour", ["echo-key-summary", "echo-key-escaped", "echo-key-unicode",
                                       "echo-key-400", "echo-key-401"])
def test_openai_echoes_of_the_key_leave_the_provider_redacted(
    behaviour: str, fake: FakeProvider, tmp_path: Path
) -> None:
    """Each echo of the fake (verdict, \\/-escaped, \\u-escaped, 4xx message) comes back without the key."""
    fake.script("echo", behaviour)
    provider = in_process(fake)(_settings(tmp_path, "openai", "http://llm.invalid/v1"))
    try:
        result = provider.complete(_prompt())
    finally:
        provider.close()
    assert not any(key_leaks(text, KEY) for text in _said(result))
    assert REDACTED in (result.raw or "")  # the echo did come back
    if behaviour in ("echo-key-400", "echo-key-401"):
        assert result.error is not None and result.error.kind in ("bad_request", "auth")
    else:
        assert result.verdict is not None and result.verdict.summary == f"Asks about the key {REDACTED}."


def _anthropic(tmp_path: Path, answer: Callable[[httpx.Request], httpx.Response]) -> CallResult:
    transport = httpx.MockTransport(answer)
    provider = make_provider(_settings(tmp_path, "anthropic", "http://claude.invalid"), transport=transport)
    try:
        return provider.complete(_prompt())
    finally:
        provider.close()


def test_anthropic_echoing_its_x_api_key_in_the_tool_input_is_redacted(tmp_path: Path) -> None:
    """The same treatment for x-api-key: the tool input's summary and the \\/-escaped raw body."""

    def answer(request: httpx.Request) -> httpx.Response:
        key = request.headers["x-api-key"]
        verdict = {**VERDICT, "summary": f"Echoes {key}", "reply_hint": key}
        body = json.dumps({"type": "message", "role": "assistant", "stop_reason": "tool_use",
                           "content": [{"type": "tool_use", "name": "record_verdict", "input": verdict}],
                           "usage": {"input_tokens": 1, "output_tokens": 1}})
        return httpx.Response(200, content=body.replace("/", "\\/").encode())

    result = _anthropic(tmp_path, answer)
    assert result.verdict is not None and result.verdict.summary == f"Echoes {REDACTED}"
    assert not any(key_leaks(text, KEY) for text in _said(result))


def test_anthropic_401_quoting_the_key_unicode_escaped_is_redacted(tmp_path: Path) -> None:
    """An Anthropic error body that spells the key in \\u escapes: not in the raw body or the message."""
    body = json.dumps({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key @@"}})
    content = body.replace("@@", u_escaped(KEY)).encode()  # after json.dumps, which would escape the escapes
    result = _anthropic(tmp_path, lambda r: httpx.Response(401, content=content))
    assert result.error is not None and result.error.kind == "auth"
    assert not any(key_leaks(text, KEY) for text in _said(result)) and REDACTED in result.error.message


def test_a_too_large_body_keeps_no_prefix_of_the_key_at_the_cut(tmp_path: Path) -> None:
    """Over 1 MiB: the kept head reaches past 16 KiB, so a key across the cut is redacted whole first."""

    def answer(request: httpx.Request) -> httpx.Response:
        head = b"x" * (RAW_LIMIT_BYTES - 10) + KEY.replace("/", "\\/").encode()
        return httpx.Response(500, content=iter([head, b" " * (2 * 1024 * 1024)]))  # no Content-Length

    result = _anthropic(tmp_path, answer)
    assert result.error is not None and result.raw is not None
    assert result.raw.lstrip("x") == REDACTED and not key_leaks(result.raw, KEY)


def test_a_probe_echoing_the_key_escaped_is_redacted(tmp_path: Path) -> None:
    """The probe's message, from a 404 naming the model and quoting the key, holds no spelling of it."""
    said = f"The model `fake-model` does not exist (key {KEY.replace('/', chr(92) + '/')})"
    body = json.dumps({"error": {"message": "@@", "type": "invalid_request_error", "code": "model_not_found"}})
    transport = httpx.MockTransport(lambda r: httpx.Response(404, content=body.replace("@@", said).encode()))
    provider = make_provider(_settings(tmp_path, "openai", "http://llm.invalid/v1"), transport=transport)
    try:
        result = provider.probe()
    finally:
        provider.close()
    assert result.kind == "model_not_found" and not key_leaks(result.message, KEY) and REDACTED in result.message


def test_whitespace_folded_in_a_message_cannot_spell_the_key(tmp_path: Path) -> None:
    """The server's words are folded to one line before redaction: "ab \\n cd" becomes the key "ab cd"."""
    settings_ = _settings(tmp_path, "openai", "http://llm.invalid/v1", key="abcd efgh")
    body = json.dumps({"error": {"message": "key abcd \n  efgh rejected", "type": "invalid_request_error"}})
    provider = make_provider(settings_, transport=httpx.MockTransport(lambda r: httpx.Response(401, text=body)))
    try:
        result = provider.complete(_prompt())
    finally:
        provider.close()
    assert result.error is not None and "abcd efgh" not in result.error.message


def test_a_placeholder_key_shorter_than_8_characters_is_not_redacted(tmp_path: Path) -> None:
    """WATCHER_API_KEY=ollama (the README's Ollama example; Ollama ignores the key) is no secret:
    "ollama" in the server's words stays readable. A key of 8 characters or more is redacted."""
    for key, shown in (("ollama", True), ("ollama-k", False)):
        body = json.dumps({"error": {"message": f"model 'llama3.1' not found (key {key}): ollama pull llama3.1",
                                     "type": "api_error"}})
        settings_ = _settings(tmp_path, "openai", "http://localhost:11434/v1", key=key)
        provider = make_provider(settings_, transport=httpx.MockTransport(lambda r, b=body: httpx.Response(404, text=b)))
        try:
            result = provider.complete(_prompt())
        finally:
            provider.close()
        assert result.error is not None
        assert (f"(key {key})" in result.error.message) is shown, result.error.message
        assert "ollama pull" in result.error.message


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
