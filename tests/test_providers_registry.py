"""One provider registry that config and the factory both read; quirks are hooks on a provider,
not branches elsewhere (STYLE rules 11)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from watcher.config import Settings, load_settings
from watcher.errors import ConfigError
from watcher.models import Comment
from watcher.providers.prompts import render
from watcher.providers import PROVIDERS, make_provider, provider_spec
from watcher.providers._http import ErrorFields
from watcher.providers.openai import OpenAIProvider

REPO = Path(__file__).resolve().parents[1]


def test_every_entry_builds_through_make_provider(tmp_path: Path) -> None:
    """Each registry entry's factory imports and builds a provider named like the entry."""
    for name, spec in PROVIDERS.items():
        settings = Settings(data_dir=tmp_path, provider=name, model=spec.default_model,
                            base_url=spec.default_base_url, api_key=SecretStr("sk-x") if spec.needs_key else None)
        provider = make_provider(settings, transport=httpx.MockTransport(lambda r: httpx.Response(500)))
        try:
            assert (provider.name, provider.model) == (name, spec.default_model)
        finally:
            provider.close()


def test_config_defaults_and_key_fallbacks_come_from_the_registry(tmp_path: Path) -> None:
    """load_settings fills model, base URL and key from the entry of the chosen provider."""
    for name, spec in PROVIDERS.items():
        env = {"WATCHER_PROVIDER": name, **{var: "sk-fallback" for var in spec.key_env}}
        s = load_settings(data_dir=tmp_path, env=env)
        assert (s.model, s.base_url) == (spec.default_model, spec.default_base_url)
        assert (s.api_key is not None) == spec.needs_key


def test_missing_key_message_names_every_variable_of_the_entry(tmp_path: Path) -> None:
    """The config error (raised when a command needs the key) says exactly where a key may go."""
    settings = load_settings(data_dir=tmp_path, env={"WATCHER_PROVIDER": "anthropic"})
    with pytest.raises(ConfigError, match="set WATCHER_API_KEY or ANTHROPIC_API_KEY"):
        settings.require_key()


def test_unknown_provider_lists_the_registry(tmp_path: Path) -> None:
    """Both config and the factory refuse an unknown name with the registry's choices."""
    with pytest.raises(ConfigError, match="choose one of openai, anthropic, offline"):
        load_settings(data_dir=tmp_path, env={"WATCHER_PROVIDER": "gemini"})
    with pytest.raises(ConfigError, match="choose one of openai, anthropic, offline"):
        make_provider(Settings(data_dir=tmp_path, provider="gemini"))
    with pytest.raises(ConfigError):
        provider_spec("")


def test_no_provider_name_is_spelled_outside_the_registry() -> None:
    """config.py and providers/__init__.py compare no string against a provider name."""
    for module in ("watcher/config.py", "watcher/providers/__init__.py"):
        tree = ast.parse((REPO / module).read_text("utf-8"))
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not literals & {"openai", "anthropic"}, module


def test_config_and_the_registry_do_not_import_httpx() -> None:
    """`watcher status` loads settings; reading the registry must not pull in httpx."""
    code = ("import sys, watcher.config, watcher.providers.registry as r; "
            "r.provider_spec('openai'); print('httpx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "False"


class GeminiLike(OpenAIProvider):
    """A provider whose errors carry an integer code, a status word and a details reason."""

    def error_fields(self, data: dict[str, Any] | None) -> ErrorFields:
        error = data.get("error") if data is not None else None
        if not isinstance(error, dict):
            return super().error_fields(data)
        reasons = {d.get("reason") for d in error.get("details", []) if isinstance(d, dict)}
        kind = "invalid_api_key" if "API_KEY_INVALID" in reasons else None
        return ErrorFields(type=kind, code=error.get("status"), message=error.get("message"))


GEMINI_BAD_KEY = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                            "status": "INVALID_ARGUMENT",
                            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                         "reason": "API_KEY_INVALID"}]}}


def _call(tmp_path: Path, cls: type[OpenAIProvider], body: dict[str, Any], status: int) -> str | None:
    settings = Settings(data_dir=tmp_path, provider="openai", model="m", base_url="http://gemini.invalid/v1",
                        api_key=SecretStr("AIza-test"))
    provider = cls(settings, transport=httpx.MockTransport(lambda r: httpx.Response(status, json=body)))
    comment = Comment(id="4cf3", article_id=7, article_title="T", article_url="https://dev.to/me/t",
                      author="sam", created_at="2026-05-14T09:12:44Z", text="Hi?", url="https://dev.to/sam/comment/4cf3")
    try:
        result = provider.complete(render(comment))
    finally:
        provider.close()
    return result.error.kind if result.error else None


def test_a_provider_classifies_its_own_error_body_by_overriding_error_fields(tmp_path: Path) -> None:
    """Gemini's 400 API_KEY_INVALID is a setup error the default reader sees as bad_request;
    the subclass's error_fields hook makes the same table call it auth."""
    assert _call(tmp_path, OpenAIProvider, GEMINI_BAD_KEY, 400) == "bad_request"
    assert _call(tmp_path, GeminiLike, GEMINI_BAD_KEY, 400) == "auth"


def test_error_fields_hook_also_decides_the_probe(tmp_path: Path) -> None:
    """The probe reads refusals through the same hook as a call."""
    settings = Settings(data_dir=tmp_path, provider="openai", model="m", base_url="http://gemini.invalid/v1",
                        api_key=SecretStr("AIza-test"))
    provider = GeminiLike(settings, transport=httpx.MockTransport(lambda r: httpx.Response(400, json=GEMINI_BAD_KEY)))
    try:
        assert provider.probe().kind == "auth"
    finally:
        provider.close()


def test_defaults_name_current_models() -> None:
    """The defaults are the providers' current models, not retired ones (SPEC §3, §13.1)."""
    assert PROVIDERS["openai"].default_model == "gpt-6-luna"
    assert PROVIDERS["anthropic"].default_model == "claude-haiku-5-5"
