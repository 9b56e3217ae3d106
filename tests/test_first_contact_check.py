"""`check` tells the truth, and a real call blames what is really wrong (SPEC §16.3, §13.1).

Against loopback fakes: an OpenAI-compatible server (tests/_fakes/provider.py) reached without its
``/v1`` — every path a bare ``404 page not found``, as Ollama's root answers — and a Forem
(tests/_fakes/forem.py) whose ``/users/me`` refuses a key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.forem import FakeForem, serving_forem
from _fakes.provider import FakeProvider, running_fake
from _proc import Answer, run_main, write_export


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as served:
        yield served


@pytest.fixture
def forem() -> Iterator[FakeForem]:
    fake = FakeForem()
    fake.users.add("maya_writes")
    with serving_forem(fake) as base_url:
        fake.site = base_url.removesuffix("/api")
        yield fake


def _env(fake: FakeProvider, forem: FakeForem, **extra: str) -> dict[str, str]:
    base = forem.site + "/api"
    return {**fake.env(), "DEVTO_USERNAME": "maya_writes", "DEVTO_BASE_URL": base, **extra}


def _rows(answer: Answer) -> dict[str, dict[str, Any]]:
    assert answer.envelope is not None, answer.stdout + answer.stderr
    return {row["name"]: row for row in answer.envelope["result"]["checks"]}


def test_a_base_url_without_v1_fails_the_provider_check(
    data_dir: Path, fake: FakeProvider, forem: FakeForem
) -> None:
    """No models endpoint (every path 404): the provider check fails, naming the URL and /v1."""
    root = fake.base_url.removesuffix("/v1")
    env = _env(fake, forem, WATCHER_BASE_URL=root)
    answer = run_main("cli", "check", "--json", data_dir=data_dir, env=env)
    row = _rows(answer)["provider"]
    assert answer.returncode == 2 and not row["ok"]
    assert f"no models endpoint at {root}/models" in row["detail"]
    assert "the base URL usually ends in /v1" in row["detail"]
    human = run_main("cli", "check", data_dir=data_dir, env=env)
    assert human.returncode == 2 and "all checks passed" not in human.stdout + human.stderr


def test_a_model_the_server_does_not_list_fails_with_the_closest_names(
    data_dir: Path, fake: FakeProvider, forem: FakeForem
) -> None:
    """WATCHER_MODEL=llama3.1 on a server listing llama3.1:8b: fails, naming llama3.1:8b as closest."""
    fake.models = ["mistral:7b", "llama3.1:8b", "qwen2.5:14b"]
    answer = run_main(
        "cli", "check", "--json", data_dir=data_dir, env=_env(fake, forem, WATCHER_MODEL="llama3.1")
    )
    row = _rows(answer)["provider"]
    assert answer.returncode == 2 and not row["ok"]
    assert "the closest listed: llama3.1:8b" in row["detail"]
    assert fake.calls == []


def test_a_refused_devto_api_key_fails_its_own_check(
    data_dir: Path, fake: FakeProvider, forem: FakeForem
) -> None:
    """DEVTO_API_KEY that dev.to's /users/me answers 401: check fails on it, exit 2."""
    forem.faults["/api/users/me"] = [(401, {}, b'{"error":"unauthorized","status":401}')]
    answer = run_main(
        "cli",
        "check",
        "--json",
        data_dir=data_dir,
        env=_env(fake, forem, DEVTO_API_KEY="sk-openai-in-the-wrong-place"),
    )
    rows = _rows(answer)
    assert answer.returncode == 2 and not rows["devto_key"]["ok"]
    assert "refused DEVTO_API_KEY (HTTP 401)" in rows["devto_key"]["detail"]
    assert "/api/users/me" in forem.paths()


def test_an_accepted_devto_api_key_passes_naming_whose_it_is(
    data_dir: Path, fake: FakeProvider, forem: FakeForem
) -> None:
    """/users/me answers the key's user: the devto_key check passes and every check passes."""
    forem.faults["/api/users/me"] = [
        (200, {"content-type": "application/json"}, b'{"type_of":"user","username":"maya_writes"}')
    ]
    answer = run_main(
        "cli",
        "check",
        "--json",
        data_dir=data_dir,
        env=_env(fake, forem, DEVTO_API_KEY="devto-key"),
    )
    rows = _rows(answer)
    assert answer.returncode == 0, rows
    assert rows["devto_key"]["ok"] and "maya_writes" in rows["devto_key"]["detail"]


def test_no_provider_chosen_is_said_once_by_check_and_by_status(data_dir: Path) -> None:
    """No WATCHER_PROVIDER: check fails on config alone (no provider row beside it); status says
    `provider: none chosen`."""
    answer = run_main("cli", "check", "--json", data_dir=data_dir, env={"DEVTO_USERNAME": ""})
    rows = _rows(answer)
    assert answer.returncode == 2 and "no model provider chosen" in rows["config"]["detail"]
    assert "provider" not in rows and "api_key" not in rows
    said = {name: row["detail"].replace(str(data_dir), "DATA") for name, row in rows.items()}
    assert [name for name, detail in said.items() if "provider" in detail] == ["config"]
    status = run_main("cli", "status", data_dir=data_dir)
    assert "provider:  none chosen" in status.stdout


def test_scan_against_a_base_url_without_v1_blames_the_url_not_the_model(
    data_dir: Path, tmp_path: Path, fake: FakeProvider
) -> None:
    """A bare 404 from the chat path: the attempt's message names the URL and /v1, not the model."""
    fake.default = "404"
    fake.models_endpoint = False
    env = {**fake.env(), "WATCHER_BASE_URL": fake.base_url.removesuffix("/v1")}
    export = write_export(tmp_path / "export.json", ["c1"])
    answer = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=env)
    text = json.dumps(answer.envelope)
    assert answer.returncode == 2, answer.stdout + answer.stderr
    assert "does not know model" not in text
    assert "no such endpoint at" in text and "usually ends in /v1" in text
