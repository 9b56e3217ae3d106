"""SPEC §15.5: credentials in ``WATCHER_BASE_URL`` (``http://user:pw@host/v1``, a proxy's login)
are used for the requests and land nowhere else: not in ``provider.json`` (the breaker keeps the
base URL), not in an inbox file (an unreachable server's message names the URL), not in status,
not in an error message — in any spelling a server might echo them back."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import httpx
import pytest
from _proc import run_main, write_export
from pydantic import SecretStr

from watcher.config import load_settings
from watcher.errors import ConfigError
from watcher.providers.prompts import render
from watcher.providers import make_provider
from watcher.providers.redact import REDACTED
from watcher.source._parse import api_site

PASSWORD = "pw-Q7z%2Fx"  # percent-encoded in the URL: "pw-Q7z/x" on the wire
DECODED = "pw-Q7z/x"
URL = f"http://proxyuser:{PASSWORD}@127.0.0.1:9/v1"  # port 9: nothing listens, a fast "unreachable"


def _leaks(text: str) -> bool:
    basic = base64.b64encode(f"proxyuser:{DECODED}".encode()).decode()
    return any(secret in text for secret in (PASSWORD, DECODED, "Q7z", basic))


def _files_leaking(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and _leaks(p.read_bytes().decode("utf-8", "replace"))]


def test_split_credentials_keeps_the_url_and_takes_the_userinfo_out() -> None:
    """The URL without ``user:pw@`` and the userinfo apart; shown, the userinfo is a marker."""
    from watcher.util.urls import shown_url, split_credentials

    assert split_credentials(URL) == ("http://127.0.0.1:9/v1", f"proxyuser:{PASSWORD}")
    assert split_credentials("https://api.openai.com/v1") == ("https://api.openai.com/v1", None)
    assert split_credentials("http://a:b@c@host:8/x") == ("http://host:8/x", "a:b@c")
    assert shown_url(URL) == f"http://{REDACTED}@127.0.0.1:9/v1"
    assert shown_url("http://host/v1") == "http://host/v1"


def test_settings_keep_the_credentials_only_in_a_secret(tmp_path: Path) -> None:
    """Settings.base_url has no userinfo: every message, file and status line built from it is clean."""
    settings = load_settings(data_dir=tmp_path, env={"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": URL,
                                                     "WATCHER_API_KEY": "sk-k"})
    assert settings.base_url == "http://127.0.0.1:9/v1"
    assert settings.base_url_auth is not None and settings.base_url_auth.get_secret_value() == f"proxyuser:{PASSWORD}"
    assert not _leaks(repr(settings)) and not _leaks(settings.public().model_dump_json())
    assert settings.public().base_url == f"http://{REDACTED}@127.0.0.1:9/v1"


def test_a_bad_url_with_credentials_is_refused_without_quoting_them(tmp_path: Path) -> None:
    """The config error names the setting and the URL, with the userinfo replaced."""
    with pytest.raises(ConfigError) as caught:
        load_settings(data_dir=tmp_path, env={"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": f"ftp://u:{PASSWORD}@h"})
    assert not _leaks(str(caught.value)) and "WATCHER_BASE_URL" in str(caught.value)


def test_the_requests_still_carry_the_credentials_and_an_echo_of_them_is_redacted(tmp_path: Path) -> None:
    """Basic auth from the userinfo, as before; the password, echoed back in a body, is redacted."""
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        said = f"proxy denied {request.headers.get('authorization')} for {DECODED} and {PASSWORD}"
        return httpx.Response(401, json={"error": {"message": said, "type": "auth"}})

    settings = load_settings(data_dir=tmp_path, env={"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": URL,
                                                     "WATCHER_API_KEY": "sk-k", "WATCHER_MODEL": "m"})
    provider = make_provider(settings, transport=httpx.MockTransport(answer))
    try:
        prompt = render(_comment())
        result = provider.complete(prompt)
        probe = provider.probe()
    finally:
        provider.close()
    auth = seen[0].headers["authorization"]
    assert auth == "Basic " + base64.b64encode(f"proxyuser:{DECODED}".encode()).decode()
    assert "@" not in str(seen[0].url)  # the credentials travel in the header only
    assert result.error is not None and result.error.kind == "auth"
    assert not _leaks(result.error.message) and not _leaks(result.raw or "") and not _leaks(probe.message)


def test_a_hand_built_settings_with_credentials_in_the_url_does_not_leak_either(tmp_path: Path) -> None:
    """The provider splits the URL again: Settings may be built without config (tests, tools)."""
    from watcher.config import Settings

    seen: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        raise httpx.ConnectError("refused", request=request)

    settings = Settings(data_dir=tmp_path, provider="openai", model="m", base_url=URL, api_key=SecretStr("sk-k"))
    provider = make_provider(settings, transport=httpx.MockTransport(refuse))
    try:
        result = provider.complete(render(_comment()))
    finally:
        provider.close()
    assert result.error is not None and result.error.kind == "unreachable"
    assert not _leaks(result.error.message) and seen[0].headers["authorization"].startswith("Basic ")


def test_an_unreachable_proxy_leaves_its_credentials_in_no_file_and_no_output(tmp_path: Path, data_dir: Path) -> None:
    """scan against a dead proxy (unreachable: the breaker opens, its message names the URL), then
    status, show, check and recheck, human and JSON: the password is in no file and no output."""
    export = write_export(tmp_path / "export.json", ["cred1"])
    env = {"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": URL, "WATCHER_API_KEY": "sk-k",
           "WATCHER_MODEL": "m", "WATCHER_TIMEOUT": "5", "COLUMNS": "300"}
    procs = [run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=env)]
    assert procs[0].returncode == 3, procs[0].stderr
    for args in (("status",), ("status", "--json"), ("show", "cred1"), ("show", "cred1", "--json"),
                 ("check", "--json"), ("recheck", "--json")):
        procs.append(run_main("cli", *args, data_dir=data_dir, env=env))
    procs.append(run_main("bridge", "status", data_dir=data_dir, env=env))
    state = json.loads((data_dir / "provider.json").read_text())
    assert state["breaker"]["base_url"] == "http://127.0.0.1:9/v1"  # the setup it was opened for, without a secret
    assert _files_leaking(data_dir) == []
    for proc in procs:
        assert not _leaks(proc.stdout + proc.stderr), proc.args
    assert f"{REDACTED}@127.0.0.1:9" in procs[1].stdout  # status says credentials are in use


def test_devto_base_url_credentials_stay_out_of_permalinks_and_status(tmp_path: Path) -> None:
    """The same for DEVTO_BASE_URL: a comment's url is built from it, and status shows it."""
    assert api_site(f"https://u:{PASSWORD}@forem.example/api") == "https://forem.example"
    settings = load_settings(data_dir=tmp_path, env={"DEVTO_BASE_URL": f"https://u:{PASSWORD}@forem.example/api"})
    assert not _leaks(settings.public().model_dump_json())


def _comment() -> object:
    from watcher.models import Comment

    return Comment(id="ab12", article_id=7, article_title="T", article_url="https://dev.to/me/t", author="ana",
                   created_at="2026-05-14T09:12:44Z", text="TAG:cred How?", url="https://dev.to/ana/comment/ab12")
