"""The free probe: one or two GETs of the models endpoint say whether the server is up and the
model exists, classified like a call, spending no attempt and no tokens (SPEC §6, §13.1)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from watcher.config import Settings
from watcher.providers import ProbeResult, make_provider

KEY = "sk-probe-0123456789abcdef"
OPENAI = "http://llm.invalid/v1"
ANTHROPIC = "http://claude.invalid"

Handler = Callable[[httpx.Request], httpx.Response]


def _probe(tmp_path: Path, handler: Handler, **changes: Any) -> tuple[ProbeResult, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    values: dict[str, Any] = {"data_dir": tmp_path, "provider": "openai", "model": "gpt-test",
                              "base_url": OPENAI, "api_key": SecretStr(KEY), "timeout": 5.0}
    provider = make_provider(Settings(**{**values, **changes}), transport=httpx.MockTransport(recording))
    try:
        return provider.probe(), seen
    finally:
        provider.close()


def _routes(routes: dict[str, httpx.Response]) -> Handler:
    """Answer by path; anything else is a plain 404, as a server without that route answers."""
    return lambda request: routes.get(request.url.path, httpx.Response(404, text="404 page not found"))


def _listing(*ids: str) -> httpx.Response:
    return httpx.Response(200, json={"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def test_model_found_is_one_get_with_the_providers_headers(tmp_path: Path) -> None:
    """A 200 on /models/{model} passes after exactly one GET, sent with the key and no body."""
    result, seen = _probe(tmp_path, _routes({"/v1/models/gpt-test": httpx.Response(200, json={"id": "gpt-test"})}))
    assert (result.ok, result.kind) == (True, None)
    assert [(r.method, r.url.path) for r in seen] == [("GET", "/v1/models/gpt-test")]
    assert seen[0].headers["authorization"] == f"Bearer {KEY}" and seen[0].content == b""


def test_openai_404_naming_the_model_is_model_not_found_whatever_the_list_says(tmp_path: Path) -> None:
    """OpenAI's 404 with code model_not_found is conclusive; the list is asked only for the closest
    names (SPEC §16.3), and a list that is not there changes nothing."""
    body = {"error": {"message": "The model `gpt-nope` does not exist", "type": "invalid_request_error",
                      "code": "model_not_found"}}
    result, seen = _probe(tmp_path, _routes({"/v1/models/gpt-nope": httpx.Response(404, json=body)}),
                          model="gpt-nope")
    assert (result.ok, result.kind) == (False, "model_not_found")
    assert "gpt-nope" in result.message and "WATCHER_MODEL" in result.message
    assert len(seen) == 2


def test_bare_404_falls_back_to_the_list_and_a_missing_model_is_model_not_found(tmp_path: Path) -> None:
    """No /models/{model} route: the list decides, and the message shows what the server has."""
    result, seen = _probe(tmp_path, _routes({"/v1/models": _listing("llama3.2:latest", "qwen2.5:7b")}),
                          model="mistral")
    assert (result.ok, result.kind) == (False, "model_not_found")
    assert "llama3.2:latest" in result.message
    assert [r.url.path for r in seen] == ["/v1/models/mistral", "/v1/models"]


@pytest.mark.parametrize(("model", "listed"), [("llama3.2", "llama3.2:latest"), ("llama3.2:latest", "llama3.2")])
def test_list_fallback_tolerates_ollamas_latest_tag(tmp_path: Path, model: str, listed: str) -> None:
    """Ollama lists "name:latest" and answers to "name": either spelling finds the other."""
    result, _ = _probe(tmp_path, _routes({"/v1/models": _listing("other:7b", listed)}), model=model)
    assert (result.ok, result.kind) == (True, None)


def test_model_name_is_quoted_into_one_path_segment(tmp_path: Path) -> None:
    """A vLLM-style "org/name" model stays one segment, so it cannot reach another route."""
    result, seen = _probe(tmp_path, _routes({"/v1/models": _listing("meta/llama-3")}), model="meta/llama-3")
    assert result.ok
    assert seen[0].url.raw_path == b"/v1/models/meta%2Fllama-3"


def test_401_is_auth_and_never_shows_the_key(tmp_path: Path) -> None:
    """A rejected key is the call's auth kind, with the call's hint; an echoed key is redacted."""
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error",
                      "code": "invalid_api_key"}}
    result, seen = _probe(tmp_path, lambda request: httpx.Response(401, json=body))
    assert (result.ok, result.kind) == (False, "auth")
    assert "WATCHER_API_KEY" in result.message and KEY not in result.message
    assert len(seen) == 1


def test_429_is_rate_limited_like_a_call(tmp_path: Path) -> None:
    """Any other refusal is classified by the same table as a model call."""
    result, _ = _probe(tmp_path, lambda request: httpx.Response(429, headers={"retry-after": "20"}))
    assert (result.ok, result.kind) == (False, "rate_limited")
    assert "retry after 20 s" in result.message


def test_connection_refused_is_unreachable(tmp_path: Path) -> None:
    """No connection made (Ollama not running) is unreachable, naming the URL tried."""
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    result, seen = _probe(tmp_path, refuse)
    assert (result.ok, result.kind) == (False, "unreachable")
    assert f"{OPENAI}/models/gpt-test" in result.message and "WATCHER_BASE_URL" in result.message
    assert len(seen) == 1


def test_read_timeout_is_timeout_not_unreachable(tmp_path: Path) -> None:
    """A connection that was made and then went quiet is a timeout."""
    def stall(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    result, _ = _probe(tmp_path, stall)
    assert (result.ok, result.kind) == (False, "timeout")


def test_no_models_endpoint_at_all(tmp_path: Path) -> None:
    """404 on /models/{model} and on /models: the probe cannot tell, and says so."""
    result, seen = _probe(tmp_path, _routes({}))
    assert (result.ok, result.kind) == (False, "no_models_endpoint")
    assert OPENAI in result.message
    assert [r.url.path for r in seen] == ["/v1/models/gpt-test", "/v1/models"]


def test_list_that_is_not_a_model_list_counts_as_no_models_endpoint(tmp_path: Path) -> None:
    """A 200 on /models without a data list (an HTML page, a proxy) proves nothing."""
    result, _ = _probe(tmp_path, _routes({"/v1/models": httpx.Response(200, text="<html>hello</html>")}))
    assert result.kind == "no_models_endpoint"


def test_anthropic_probes_v1_models_with_its_own_headers(tmp_path: Path) -> None:
    """Anthropic: GET {base}/v1/models/{model} with x-api-key and anthropic-version."""
    result, seen = _probe(
        tmp_path, _routes({"/v1/models/claude-test": httpx.Response(200, json={"id": "claude-test"})}),
        provider="anthropic", model="claude-test", base_url=ANTHROPIC,
    )
    assert result.ok
    assert seen[0].headers["x-api-key"] == KEY and "anthropic-version" in seen[0].headers


def test_anthropic_404_is_model_not_found_with_no_fallback(tmp_path: Path) -> None:
    """Anthropic has no list fallback in the registry: its 404 is the answer."""
    body = {"type": "error", "error": {"type": "not_found_error", "message": "model: claude-3-5-haiku-latest"}}
    result, seen = _probe(tmp_path, lambda request: httpx.Response(404, json=body),
                          provider="anthropic", model="claude-3-5-haiku-latest", base_url=ANTHROPIC)
    assert (result.ok, result.kind) == (False, "model_not_found")
    assert "claude-3-5-haiku-latest" in result.message
    assert len(seen) == 1


def test_offline_probe_always_passes(tmp_path: Path) -> None:
    """The heuristic has no server and no model list: its probe passes without any I/O."""
    provider = make_provider(Settings(data_dir=tmp_path, provider="offline"))
    assert (provider.probe().ok, provider.probe().kind) == (True, None)
    provider.close()


def test_probe_result_kind_is_set_exactly_when_not_ok() -> None:
    """ok and kind cannot contradict each other."""
    with pytest.raises(ValueError):
        ProbeResult(ok=True, kind="auth", message="x")
    with pytest.raises(ValueError):
        ProbeResult(ok=False, message="x")
