"""SPEC §13.1: a broken setup costs at most one attempt per outage and is loud on every run.

In-process runs inject the fake through the provider factory (same call log, no socket); the
cron scenario starts real ``watcher`` processes where the breaker must cross processes on disk.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.clock import later
from _fakes.http import closed_port
from _fakes.provider import FakeProvider, in_process_hooks, running_fake
from _proc import run, run_main, write_export

from watcher.config import Paths
from watcher.models import ProviderState
from watcher.store.files import FileStore

LABELS = ["c1", "c2", "c3"]


def _env(fake: FakeProvider | None = None, **extra: str) -> dict[str, str]:
    env = {"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": "http://fake.invalid/v1",
           "WATCHER_API_KEY": "sk-test-fake", "WATCHER_MODEL": "fake-model"}
    return {**env, **extra}


def _run(data_dir: Path, fake: FakeProvider, command: str, export: Path | None = None, *,
         by: timedelta | None = None, limit: str | None = None, **env: str) -> dict[str, Any]:
    """`watcher scan --source EXPORT --json` (or `recheck`) in this process, its calls to ``fake``: the
    envelope. ``by``: the run starts that much later (its clock, tests/_fakes/clock.py)."""
    args = ["scan", "--source", str(export)] if command == "scan" else ["recheck"]
    args += ["--limit", limit] if limit is not None else []
    hooks = in_process_hooks(fake, clock=later(by)) if by is not None else in_process_hooks(fake)
    done = run_main("cli", *args, "--json", data_dir=data_dir, env=_env(**env), hooks=hooks)
    assert done.envelope is not None and done.envelope["exit_code"] == done.returncode, done.stderr
    return done.envelope


def _attempts(data_dir: Path) -> int:
    paths = Paths(data_dir)
    return sum(len(r.attempts) for cid in FileStore(paths).record_ids() if (r := FileStore(paths).load_record(cid)) is not None)


def _breaker(data_dir: Path) -> dict[str, object] | None:
    path = Paths(data_dir).provider_state
    if not path.exists():
        return None
    state = ProviderState.model_validate_json(path.read_text())
    return state.breaker.model_dump() if state.breaker else None


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_export(tmp_path / "export.json", LABELS)


def test_a_retired_model_stops_at_the_first_call_and_costs_one_attempt_an_hour_until_fixed(
        data_dir: Path, export: Path) -> None:
    """404 model_not_found: exit 2 after one call; then every run exits 2 with no call and no probe
    (a models list cannot undo what a real call said, SPEC §15.5); once the server has the model,
    the hour's half-open call succeeds, the breaker closes and the rest are called."""
    fake = FakeProvider()
    fake.models = ["another-model"]
    fake.default = "404-model"
    first = _run(data_dir, fake, "scan", export)
    assert (first["exit_code"], first["error"] and first["error"]["kind"]) == (2, "provider_setup")
    message = first["error"]["message"]
    # Each fix said once: the provider's hint names the variable and how to list the models.
    assert message.count("WATCHER_MODEL") == 1 and "/models" in message and "`watcher check`" in message, message
    assert fake.calls == ["c1"] and first["result"]["stopped"] == "model_not_found"
    assert [i["outcome"] for i in first["result"]["items"]] == ["error", "not_started", "not_started"]
    assert _breaker(data_dir) is not None
    for command in ("recheck", "scan", "recheck", "scan"):
        again = _run(data_dir, fake, command, export)
        assert again["exit_code"] == 2, again
        assert "no attempts spent this run" in again["error"]["message"]
    assert fake.calls == ["c1"] and _attempts(data_dir) == 1 and fake.probes == []
    fake.models.append("fake-model")  # the user pulled the model
    fake.default = "verdict"
    fixed = _run(data_dir, fake, "scan", export, by=timedelta(minutes=61))
    assert fixed["exit_code"] == 0, fixed
    assert fake.calls == ["c1", "c2", "c3"] and _breaker(data_dir) is None


@pytest.mark.parametrize(("behaviour", "kind", "code"), [("400", "bad_request", 2), ("401", "auth", 2),
                                                        ("429:60", "rate_limited", 3)])
def test_setup_kinds_stop_the_batch_at_once(data_dir: Path, export: Path, behaviour: str, kind: str,
                                            code: int) -> None:
    """auth, bad_request, rate_limited: one call, the rest not_started, never exit 0."""
    fake = FakeProvider()
    fake.default = behaviour
    out = _run(data_dir, fake, "scan", export)
    assert (out["exit_code"], out["result"]["stopped"], fake.calls) == (code, kind, ["c1"])


def test_two_transient_failures_in_a_row_stop_the_batch_and_a_half_open_call_reopens_it(
        data_dir: Path, tmp_path: Path) -> None:
    """529, 529 → stop (exit 3) after two calls; a malformed answer in between resets the count;
    the models endpoint is not asked (it says nothing of the chat endpoint, SPEC §16.6): a run a
    minute later makes one half-open call, to a comment the outage has not touched, and it closes
    the breaker."""
    export = write_export(tmp_path / "export.json", ["a1", "a2", "a3", "a4", "a5"])
    fake = FakeProvider()
    for label, behaviour in (("a1", "529"), ("a2", "malformed"), ("a3", "529"), ("a4", "529")):
        fake.script(label, behaviour)
    out = _run(data_dir, fake, "scan", export)
    assert out["exit_code"] == 3 and out["error"]["kind"] == "provider_unavailable"
    assert fake.calls == ["a1", "a2", "a3", "a4"]
    assert [i["outcome"] for i in out["result"]["items"]] == ["error", "error", "error", "error", "not_started"]
    assert _breaker(data_dir) is not None
    soon = _run(data_dir, fake, "scan", export)
    assert soon["exit_code"] == 3 and len(fake.calls) == 4
    later = _run(data_dir, fake, "scan", export, by=timedelta(minutes=2))
    assert later["exit_code"] == 0 and fake.calls[-1] == "a5" and fake.probes == []
    assert _breaker(data_dir) is None


def test_per_comment_kinds_never_stop_a_batch(data_dir: Path, export: Path) -> None:
    """malformed, invalid, malformed: all three called, exit 0, no breaker."""
    fake = FakeProvider()
    for label, behaviour in zip(LABELS, ("malformed", "invalid", "malformed"), strict=True):
        fake.script(label, behaviour)
    out = _run(data_dir, fake, "scan", export)
    assert out["exit_code"] == 0 and fake.calls == LABELS and _breaker(data_dir) is None


def test_changing_the_model_closes_the_breaker(data_dir: Path, export: Path) -> None:
    """A breaker holds for the setup it was opened for: a new WATCHER_MODEL is tried at once."""
    fake = FakeProvider()
    fake.script("c1", "404-model")
    fake.models = ["good-model"]
    assert _run(data_dir, fake, "scan", export)["exit_code"] == 2
    out = _run(data_dir, fake, "scan", export, WATCHER_MODEL="good-model")
    assert out["exit_code"] == 0, out
    assert fake.calls == ["c1", "c2", "c3"] and fake.probes == [] and _breaker(data_dir) is None


def test_a_transient_breaker_half_opens_after_1_then_2_minutes_never_to_a_spent_comment(
        data_dir: Path, tmp_path: Path) -> None:
    """500, 500 opens the breaker: no call for a minute; then one half-open call, to the comment
    the outage has not touched (c3, not c1 or c2); it fails, and the next waits 2 minutes."""
    export = write_export(tmp_path / "export.json", ["c1", "c2", "c3", "c4"])
    fake = FakeProvider()
    fake.default = "500"
    assert _run(data_dir, fake, "scan", export, limit="2")["exit_code"] == 3  # 500, 500: two in a row
    assert fake.calls == ["c1", "c2"]
    soon = _run(data_dir, fake, "scan", export, by=timedelta(seconds=30))
    assert soon["exit_code"] == 3 and "no attempts spent this run" in soon["error"]["message"]
    recheck = _run(data_dir, fake, "recheck", by=timedelta(minutes=20))
    assert recheck["exit_code"] == 3 and fake.calls == ["c1", "c2"]  # both spent in this outage
    half_open = _run(data_dir, fake, "scan", export, by=timedelta(minutes=20))
    assert half_open["exit_code"] == 3 and fake.calls == ["c1", "c2", "c3"]
    wait = _run(data_dir, fake, "scan", export, by=timedelta(minutes=21))
    assert wait["exit_code"] == 3 and fake.calls == ["c1", "c2", "c3"]
    again = _run(data_dir, fake, "scan", export, by=timedelta(minutes=22, seconds=30))
    assert again["exit_code"] == 3 and fake.calls == ["c1", "c2", "c3", "c4"]
    assert fake.probes == []


def test_status_shows_the_open_breaker(data_dir: Path, export: Path) -> None:
    """status says the breaker is open, since when and why."""
    fake = FakeProvider()
    fake.default = "401"
    _run(data_dir, fake, "scan", export)
    status = run_main("cli", "status", "--json", data_dir=data_dir, env=_env())
    breaker = json.loads(status.stdout)["result"]["breaker"]
    assert breaker["kind"] == "auth" and breaker["model"] == "fake-model" and breaker["since"]


# ---- as cron runs it ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_night_of_cron_against_a_down_server_spends_one_attempt(
        data_dir: Path, export: Path) -> None:
    """8 rounds of `scan && recheck` against a refused port: every round exits 3 and says why,
    exactly 1 attempt on disk in total; the server back up → the next run calls.

    The first round and the run after the outage are real processes, so the breaker crosses
    processes on disk as it does under cron; the rounds between run the CLI's ``main`` in this
    process (each with a fresh context, nothing kept in memory between runs)."""
    env = {**_env(), "WATCHER_BASE_URL": f"http://127.0.0.1:{closed_port()}/v1"}
    codes = []
    for round_no in range(8):
        cron = run if round_no == 0 else run_main
        scan = cron("cli", "scan", "--source", str(export), data_dir=data_dir, env=env)
        codes.append(scan.returncode)
        assert "provider unreachable" in scan.stderr or "provider unavailable since" in scan.stderr, scan.stderr
        if scan.returncode == 0:
            cron("cli", "recheck", data_dir=data_dir, env=env)
    assert codes == [3] * 8
    assert _attempts(data_dir) == 1
    status = json.loads(run_main("cli", "status", "--json", data_dir=data_dir, env=env).stdout)["result"]
    assert status["breaker"]["kind"] == "unreachable"
    with running_fake() as fake:  # the same setup now answers: the breaker's probe passes
        env = {**env, "WATCHER_BASE_URL": fake.base_url}
        bridge = run("bridge", "scan", "--source", str(export), data_dir=data_dir, env=env)
        assert bridge.returncode == 0, bridge.stdout + bridge.stderr
        assert fake.calls == ["c2", "c3"]  # c1's one failed attempt is recheck's to retry
        assert run_main("cli", "recheck", data_dir=data_dir, env=env).returncode == 0
        assert fake.calls == ["c2", "c3", "c1"] and _attempts(data_dir) == 4


# ---- the breaker trusts the call, not the menu (SPEC §15.5) ---------------------------------------


def test_a_models_list_naming_the_model_does_not_undo_a_real_calls_model_not_found(
        data_dir: Path, export: Path) -> None:
    """GET /models lists the model, every call is 404 model_not_found: one attempt, then no call
    (exit 2) however often cron runs; an hour after since, one half-open call; then an hour again."""
    fake = FakeProvider()  # lists "fake-model" at /models and /models/fake-model
    fake.default = "404-model"
    assert _run(data_dir, fake, "scan", export)["exit_code"] == 2
    for command in ("scan", "recheck", "scan", "recheck", "scan"):
        again = _run(data_dir, fake, command, export)
        assert again["exit_code"] == 2 and "no attempts spent this run" in again["error"]["message"], again
    assert fake.calls == ["c1"] and _attempts(data_dir) == 1
    assert _run(data_dir, fake, "scan", export, by=timedelta(minutes=59))["exit_code"] == 2 and fake.calls == ["c1"]
    hour = timedelta(minutes=61)
    assert _run(data_dir, fake, "scan", export, by=hour)["exit_code"] == 2
    assert len(fake.calls) == 2  # the hour's one half-open attempt, and no other
    assert _run(data_dir, fake, "recheck", by=hour)["exit_code"] == 2 and len(fake.calls) == 2


def test_ollama_without_v1_waits_an_hour_after_since_for_its_first_half_open(
        data_dir: Path, export: Path) -> None:
    """Every path 404 (no /v1 in the base URL, so no models endpoint either): the call that opened
    the breaker was the hour's attempt — the next run, seconds later, makes none; an hour later
    the half-open call goes to a comment that has not spent an attempt in this outage."""
    fake = FakeProvider()
    fake.models_endpoint = False
    fake.default = "404"
    first = _run(data_dir, fake, "scan", export)
    assert (first["exit_code"], first["result"]["stopped"]) == (2, "model_not_found")
    for command in ("recheck", "scan"):
        assert _run(data_dir, fake, command, export)["exit_code"] == 2
    assert fake.calls == ["c1"]
    hour = timedelta(minutes=61)
    assert _run(data_dir, fake, "recheck", by=hour)["exit_code"] == 2 and fake.calls == ["c1"]
    assert _run(data_dir, fake, "scan", export, by=hour)["exit_code"] == 2 and fake.calls == ["c1", "c2"]
