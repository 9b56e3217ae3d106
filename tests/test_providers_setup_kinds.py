"""A broken setup is named as such (SPEC §6, §13.1): an unknown model is model_not_found, not
bad_request, from a call or from the free probe, against the recording fake provider (loopback
and in process) and the real answers of LiteLLM and Ollama.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.provider import FakeProvider, in_process, running_fake
from pydantic import SecretStr

from watcher.config import Settings
from watcher.models import Comment, Prompt
from watcher.providers.prompts import render
from watcher.providers import make_provider
from watcher.providers.base import CallResult, ProbeResult, Provider

KEY = "sk-setup-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as fake:
        yield fake


def _settings(tmp_path: Path, base_url: str, **changes: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": tmp_path, "provider": "openai", "model": "fake-model",
                              "base_url": base_url, "api_key": SecretStr(KEY), "timeout": 5.0}
    return Settings(**{**values, **changes})


def _prompt() -> Prompt:
    comment = Comment(id="sk1", article_id=7, article_title="T", article_url="https://dev.to/me/t",
                      author="lee", created_at="2026-05-14T09:12:44Z", text="TAG:setup is this on?",
                      url="https://dev.to/lee/comment/sk1")
    return render(comment)


def _using(provider: Provider, action: str) -> CallResult | ProbeResult:
    try:
        return provider.complete(_prompt()) if action == "call" else provider.probe()
    finally:
        provider.close()


def _call(tmp_path: Path, fake: FakeProvider, **changes: Any) -> CallResult:
    result = _using(make_provider(_settings(tmp_path, fake.base_url, **changes)), "call")
    assert isinstance(result, CallResult)
    return result


def _probe(tmp_path: Path, fake: FakeProvider, **changes: Any) -> ProbeResult:
    result = _using(make_provider(_settings(tmp_path, fake.base_url, **changes)), "probe")
    assert isinstance(result, ProbeResult)
    return result


# ---- the model call ----------------------------------------------------------------------------


def test_a_404_model_not_found_call_is_model_not_found(tmp_path: Path, fake: FakeProvider) -> None:
    """OpenAI's 404 model_not_found: the kind, the status, and a message saying how to list models."""
    fake.script("setup", "404-model")
    result = _call(tmp_path, fake, model="gpt-nope")
    assert result.error is not None and (result.error.kind, result.error.http_status) == ("model_not_found", 404)
    assert "WATCHER_MODEL" in result.error.message and f"GET {fake.base_url}/models" in result.error.message
    assert result.raw is not None and "model_not_found" in result.raw
    assert fake.calls == ["setup"]


@pytest.mark.parametrize(("behaviour", "kind", "status"), [("400", "bad_request", 400), ("500", "server_error", 500)])
def test_plain_400_and_500_keep_their_kinds(
    tmp_path: Path, fake: FakeProvider, behaviour: str, kind: str, status: int
) -> None:
    """A 400 that does not blame the model stays bad_request; a 500 stays server_error."""
    fake.script("setup", behaviour)
    result = _call(tmp_path, fake)
    assert result.error is not None and (result.error.kind, result.error.http_status) == (kind, status)
    assert fake.calls == ["setup"]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # LiteLLM proxy, a mistyped model name
        (400, {"error": {"message": "litellm.BadRequestError: Invalid model name passed in model=gpt-nope. "
                                    "Call `/v1/models` to view available models for your key.",
                         "type": "None", "param": "None", "code": "400"}}),
        # Ollama, a model never pulled
        (404, {"error": {"message": 'model "gpt-nope" not found, try pulling it first', "type": "api_error",
                         "param": None, "code": None}}),
    ],
    ids=["litellm-400", "ollama-404"],
)
def test_proxy_and_ollama_model_errors_are_model_not_found(
    tmp_path: Path, status: int, body: dict[str, Any]
) -> None:
    """LiteLLM's 400 "Invalid model name" and Ollama's 404 "not found, try pulling it" are model_not_found."""
    transport = httpx.MockTransport(lambda request: httpx.Response(status, json=body))
    provider = make_provider(_settings(tmp_path, "http://proxy.invalid/v1", model="gpt-nope"), transport=transport)
    result = _using(provider, "call")
    assert isinstance(result, CallResult) and result.error is not None
    assert (result.error.kind, result.error.http_status) == ("model_not_found", status)
    assert "gpt-nope" in result.error.message


# ---- the probe against the fake's models endpoint ----------------------------------------------


def test_probe_finds_a_listed_model_with_one_get_and_no_call(tmp_path: Path, fake: FakeProvider) -> None:
    """GET /v1/models/fake-model answers 200: the probe passes; nothing reaches the call log."""
    result = _probe(tmp_path, fake)
    assert (result.ok, result.kind) == (True, None)
    assert fake.probes == ["/v1/models/fake-model"] and fake.calls == []


def test_probe_of_an_unknown_model_is_model_not_found(tmp_path: Path, fake: FakeProvider) -> None:
    """The fake's OpenAI-style 404 model_not_found is conclusive; the list is read only for the
    closest names (SPEC §16.3)."""
    result = _probe(tmp_path, fake, model="gpt-nope")
    assert (result.ok, result.kind) == (False, "model_not_found")
    assert "gpt-nope" in result.message and "WATCHER_MODEL" in result.message
    assert fake.probes == ["/v1/models/gpt-nope", "/v1/models"] and fake.calls == []


def test_probe_finds_a_model_the_fake_was_given(tmp_path: Path, fake: FakeProvider) -> None:
    """fake.models decides what exists."""
    fake.models = ["llama3.2:latest"]
    assert _probe(tmp_path, fake, model="llama3.2:latest").ok
    assert not _probe(tmp_path, fake).ok


def test_probe_without_a_models_endpoint_says_so(tmp_path: Path, fake: FakeProvider) -> None:
    """models_endpoint = False: both routes 404, and the probe reports it cannot tell."""
    fake.models_endpoint = False
    result = _probe(tmp_path, fake)
    assert (result.ok, result.kind) == (False, "no_models_endpoint")
    assert fake.probes == ["/v1/models/fake-model", "/v1/models"] and fake.calls == []


# ---- in process --------------------------------------------------------------------------------


def test_in_process_fake_serves_the_models_endpoint(tmp_path: Path) -> None:
    """The in_process factory answers GETs too, recorded in probes, not calls."""
    fake = FakeProvider()
    provider = in_process(fake)(_settings(tmp_path, "http://fake.invalid/v1"))
    result = _using(provider, "probe")
    assert isinstance(result, ProbeResult) and result.ok
    assert fake.probes == ["/v1/models/fake-model"] and fake.calls == []


def test_in_process_trickle_still_ends_at_the_deadline(tmp_path: Path) -> None:
    """Without a socket to cut, the deadline is checked per chunk: a trickle ends as timeout."""
    fake = FakeProvider()
    fake.script("setup", "trickle")
    fake.trickle_s = 0.1
    provider = in_process(fake)(_settings(tmp_path, "http://fake.invalid/v1", timeout=0.5))
    started = time.monotonic()
    result = _using(provider, "call")
    assert isinstance(result, CallResult) and result.error is not None and result.error.kind == "timeout"
    assert time.monotonic() - started < 1.5
    assert fake.calls == ["setup"]
