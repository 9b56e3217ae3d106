"""SPEC §16.4: WATCHER_MONTHLY_TOKENS. Before a call, its worst case (the cached prompt at 4
characters a token, plus the 2048-token output cap) must fit in what is left of the month — the
month's recorded usage, an attempt without usage at its worst case — or the batch stops with
nothing reserved, exit 3. The check is made with the reservation, under the pipeline lock.

The fake provider reports 100 input and 20 output tokens for each answer, none with a 500 or a 529.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks, running_fake
from _proc import Answer, Notices, envelope, run, run_main, start, write_export

from watcher.config import Paths
from watcher.models import InboxRecord
from watcher.pipeline.budget import month_used
from watcher.state.tokens import next_month, worst_case
from watcher.store.files import FileStore

REACHED = "monthly token budget reached ({used} of {budget}) — raise WATCHER_MONTHLY_TOKENS or wait for {next}"
AGENT = {"WATCHER_PROVIDER": "agent"}  # scan records the comments and calls nothing (SPEC §14)


@pytest.fixture
def notices(tmp_path: Path) -> Notices:
    return Notices(tmp_path / "notices")


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def _records(data_dir: Path) -> dict[str, InboxRecord]:
    store = FileStore(Paths(data_dir))
    found = {cid: store.load_record(cid) for cid in store.record_ids()}
    return {cid: record for cid, record in found.items() if record is not None}


def _worst(data_dir: Path) -> dict[str, int]:
    return {cid: worst_case(record.prompt) for cid, record in _records(data_dir).items()}


def _recorded(tmp_path: Path, data_dir: Path, labels: list[str]) -> tuple[Path, dict[str, int]]:
    """The comments recorded by a scan that calls nothing, and each one's worst case."""
    export = write_export(tmp_path / "export.json", labels)
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=AGENT).returncode == 0
    return export, _worst(data_dir)


def _reached(used: int, budget: int, months: set[str]) -> set[str]:
    """The message for each month the run may have counted in (the test may straddle midnight)."""
    return {REACHED.format(used=used, budget=budget, next=next_month(m)) for m in months}


def _month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


def _scan(data_dir: Path, export: Path, fake: FakeProvider, budget: int | None, *args: str) -> Answer:
    env = {**IN_PROCESS_ENV, **({"WATCHER_MONTHLY_TOKENS": str(budget)} if budget is not None else {})}
    return run_main("cli", "scan", "--source", str(export), "--json", *args, data_dir=data_dir, env=env,
                    hooks=in_process_hooks(fake))


def test_a_call_that_does_not_fit_is_refused_before_its_reservation(tmp_path: Path, data_dir: Path) -> None:
    """A budget smaller than one call's worst case: exit 3 with the exact message, no call, no
    attempt on disk, the item not started."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1"])
    before = _month()
    answer = _scan(data_dir, export, fake, worst["a1"] - 1)
    months = {before, _month()}
    assert answer.returncode == 3, answer.stderr
    doc = envelope(answer)
    assert doc["error"]["kind"] == "token_budget"
    assert doc["error"]["message"] in _reached(0, worst["a1"] - 1, months)
    assert doc["result"]["stopped"] == "token_budget"
    assert [(i["id"], i["outcome"]) for i in doc["result"]["items"]] == [("a1", "not_started")]
    assert fake.calls == []
    assert _records(data_dir)["a1"].attempts == []


def test_a_call_that_fits_exactly_is_made_and_records_its_worst_case(tmp_path: Path, data_dir: Path) -> None:
    """A budget of exactly one worst case: the call is made; its attempt says the worst case it
    was admitted with."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1"])
    answer = _scan(data_dir, export, fake, worst["a1"])
    assert answer.returncode == 0, answer.stderr
    assert fake.calls == ["a1"]
    assert _records(data_dir)["a1"].attempts[0].worst_tokens == worst["a1"]


def test_usage_recorded_replaces_the_worst_case(tmp_path: Path, data_dir: Path) -> None:
    """After a call the provider reported 120 tokens for, the next call needs only 120 + its own
    worst case: both fit in that budget, one by one."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2"])
    answer = _scan(data_dir, export, fake, 120 + worst["a2"])
    assert answer.returncode == 0, answer.stderr
    assert fake.calls == ["a1", "a2"]


def test_an_attempt_without_usage_counts_its_worst_case(tmp_path: Path, data_dir: Path) -> None:
    """A 500 (no usage reported) counts the worst case it was admitted with: the next comment's
    call is refused though the provider reported no tokens at all."""
    fake = FakeProvider()
    fake.script("a1", "500")
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2"])
    budget = worst["a1"] + worst["a2"] - 1
    before = _month()
    answer = _scan(data_dir, export, fake, budget)
    assert answer.returncode == 3, answer.stderr
    assert envelope(answer)["error"]["message"] in _reached(worst["a1"], budget, {before, _month()})
    assert fake.calls == ["a1"]
    assert _records(data_dir)["a2"].attempts == []


@pytest.mark.slow
def test_an_attempt_whose_process_died_counts_its_worst_case(tmp_path: Path, data_dir: Path,
                                                             fake: FakeProvider) -> None:
    """A run killed after its reservation (no usage ever recorded): the next run counts that
    attempt at its worst case, whether it closes it as interrupted or not."""
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2"])
    killed = run("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=fake.env(),
                 fault="kill_at=after_reserve_write")
    assert killed.returncode == -9, killed.stderr
    assert fake.calls == []
    budget = worst["a1"] + worst["a2"] - 1
    before = _month()
    answer = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir,
                      env={**fake.env(), "WATCHER_MONTHLY_TOKENS": str(budget)})
    assert answer.returncode == 3, answer.stderr
    assert envelope(answer)["error"]["message"] in _reached(worst["a1"], budget, {before, _month()})
    assert fake.calls == []


@pytest.mark.slow
def test_two_runs_at_once_cannot_both_spend_the_last_tokens(tmp_path: Path, data_dir: Path, fake: FakeProvider,
                                                           notices: Notices) -> None:
    """Room for one call: A is held inside its reservation's hold of the lock (the tally entered,
    the reservation not yet written) while B waits in line for the lock; A's call then stays out.
    B defers A's comment and is refused the other one: exit 3, nothing reserved."""
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2"])
    budget = worst["a1"] + worst["a2"] - 1
    env = {**fake.env(), "WATCHER_MONTHLY_TOKENS": str(budget)}
    fake.script("a1", "hold")
    a = start("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=env,
              fault="pause_at=before_reserve_write", notices=notices)
    notices.wait("before_reserve_write", a)
    b = start("bridge", "scan", "--source", str(export), data_dir=data_dir, env=env,
              fault="notify_at=lock_queued", notices=notices)
    notices.wait("lock_queued", b)
    notices.resume()
    out_b = b.communicate(timeout=60)
    fake.release()
    out_a = a.communicate(timeout=60)
    assert b.returncode == 3, out_b
    doc = json.loads(out_b[0])
    assert doc["error"]["message"] in _reached(worst["a1"], budget, {_month()})
    assert [(i["id"], i["outcome"]) for i in doc["result"]["items"]] == [("a1", "deferred"), ("a2", "not_started")]
    assert a.returncode == 0, out_a
    records = _records(data_dir)
    assert all(att.pid == a.pid for r in records.values() for att in r.attempts)
    assert fake.calls.count("a1") == 1


def test_calls_in_flight_at_once_each_count_their_worst_case(tmp_path: Path, data_dir: Path) -> None:
    """--parallel 3: after the first answer (120 tokens), two calls go out together and are held
    there; the fourth comment's check counts both at their worst case and is refused."""
    fake = FakeProvider()
    for label in ("b1", "b2"):
        fake.script(label, "hold")
    export, worst = _recorded(tmp_path, data_dir, ["a1", "b1", "b2", "c1"])
    budget = 120 + worst["b1"] + worst["b2"] + worst["c1"] - 1
    answers: list[Answer] = []
    run_it = threading.Thread(target=lambda: answers.append(_scan(data_dir, export, fake, budget,
                                                                  "--parallel", "3", "--limit", "4")))
    before = _month()
    run_it.start()
    try:
        fake.wait_in_flight(count=2)
    finally:
        fake.release()
        run_it.join(60)
    answer = answers[0]
    assert answer.returncode == 3, answer.stderr
    used = 120 + worst["b1"] + worst["b2"]
    assert envelope(answer)["error"]["message"] in _reached(used, budget, {before, _month()})
    assert sorted(fake.calls) == ["a1", "b1", "b2"]
    assert _records(data_dir)["c1"].attempts == []


def test_a_lost_or_corrupt_tally_is_built_again_from_the_attempts(tmp_path: Path, data_dir: Path) -> None:
    """tokens.json removed: the next run counts the month from the inbox files. Corrupt: it is
    moved to quarantine and the run says so (exit 5), counting the month all the same."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2"])
    assert _scan(data_dir, export, fake, 10**9, "--limit", "1").returncode == 0
    budget = 120 + worst["a2"] - 1
    tally = data_dir / "tokens.json"
    tally.unlink()
    before = _month()
    answer = _scan(data_dir, export, fake, budget)
    assert answer.returncode == 3, answer.stderr
    assert envelope(answer)["error"]["message"] in _reached(120, budget, {before, _month()})
    tally.write_text("{not json")
    answer = _scan(data_dir, export, fake, budget)
    assert answer.returncode == 5, answer.stderr
    assert envelope(answer)["result"]["stopped"] == "token_budget"
    assert [p.name.startswith("tokens.json") for p in (data_dir / "quarantine").iterdir()] == [True]
    assert fake.calls == ["a1"]


def test_an_agents_claims_are_outside_the_budget(tmp_path: Path, data_dir: Path) -> None:
    """Provider agent: the agent's own model gives the verdicts and watcher spends no provider
    token, so a budget too small for any call still lets it claim (each claim is an attempt)."""
    _recorded(tmp_path, data_dir, ["a1"])
    answer = run_main("cli", "claim", "--limit", "1", "--json", data_dir=data_dir,
                      env={**AGENT, "WATCHER_MONTHLY_TOKENS": "1"})
    assert answer.returncode == 0, answer.stderr
    assert [c["id"] for c in envelope(answer)["result"]["claimed"]] == ["a1"]
    assert not (data_dir / "tokens.json").exists()


def test_unset_means_no_limit(tmp_path: Path, data_dir: Path) -> None:
    """Without WATCHER_MONTHLY_TOKENS every call is made and no tally is written (a durable write
    per call that nobody reads: bench per-call); status shows no budget."""
    fake = FakeProvider()
    export, _ = _recorded(tmp_path, data_dir, ["a1", "a2", "a3"])
    answer = _scan(data_dir, export, fake, None)
    assert answer.returncode == 0, answer.stderr
    assert sorted(fake.calls) == ["a1", "a2", "a3"]
    assert not (data_dir / "tokens.json").exists()
    status = envelope(run_main("cli", "status", "--json", data_dir=data_dir))
    assert "monthly_tokens" not in status["result"]


def test_calls_made_without_a_budget_count_once_one_is_set(tmp_path: Path, data_dir: Path) -> None:
    """A run without a budget (another configuration: an MCP client's env) between two with one
    removes the tally, so the next run with the budget counts its calls from the attempts: the
    month's tokens are never undercounted (SPEC §16.4)."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1", "a2", "a3"])
    assert _scan(data_dir, export, fake, 10**9, "--limit", "1").returncode == 0
    assert (data_dir / "tokens.json").exists()
    assert _scan(data_dir, export, fake, None, "--limit", "1").returncode == 0
    assert not (data_dir / "tokens.json").exists()
    budget = 240 + worst["a3"] - 1  # a1 and a2 spent 120 each: a3 does not fit
    answer = _scan(data_dir, export, fake, budget)
    assert answer.returncode == 3, answer.stderr
    assert sorted(fake.calls) == ["a1", "a2"]
    assert month_used(FileStore(Paths(data_dir)), _month()) == 240


def test_status_and_check_show_the_budget(tmp_path: Path, data_dir: Path) -> None:
    """status and check say how much of the budget the month has used."""
    fake = FakeProvider()
    export, _ = _recorded(tmp_path, data_dir, ["a1"])
    assert _scan(data_dir, export, fake, 100_000).returncode == 0
    env = {**IN_PROCESS_ENV, "WATCHER_MONTHLY_TOKENS": "100000"}
    status = envelope(run_main("cli", "status", "--json", data_dir=data_dir, env=env))
    assert status["result"]["monthly_tokens"] == {"budget": 100_000, "used": 120, "month": _month()}
    shown = run_main("cli", "status", data_dir=data_dir, env=env).stdout
    assert f"budget:    120 of 100,000 tokens used in {_month()}" in shown
    checked = run_main("cli", "check", "--json", data_dir=data_dir, env=env,
                       hooks=in_process_hooks(fake))
    rows = {row["name"]: row for row in envelope(checked)["result"]["checks"]}
    assert rows["monthly_tokens"]["ok"] and rows["monthly_tokens"]["detail"].startswith("120 of 100000 tokens")


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1.5", "1e6"])
def test_an_invalid_budget_is_a_config_error(tmp_path: Path, data_dir: Path, value: str) -> None:
    """Not a whole number of tokens, at least 1: exit 2 naming the variable, before any work."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["a1"])
    answer = run_main("cli", "scan", "--source", str(export), "--json", data_dir=data_dir,
                      env={**IN_PROCESS_ENV, "WATCHER_MONTHLY_TOKENS": value}, hooks=in_process_hooks(fake))
    assert answer.returncode == 2, answer.stderr
    assert "WATCHER_MONTHLY_TOKENS must be a whole number of tokens" in envelope(answer)["error"]["message"]
    assert fake.calls == [] and not (data_dir / "inbox").exists()


def test_the_config_file_sets_it_too(tmp_path: Path, data_dir: Path) -> None:
    """``monthly_tokens`` in config.toml: an integer, digits grouped with ``_`` allowed."""
    fake = FakeProvider()
    export, worst = _recorded(tmp_path, data_dir, ["a1"])
    (data_dir / "config.toml").write_text(f"monthly_tokens = {worst['a1'] - 1}\n")
    assert _scan(data_dir, export, fake, None).returncode == 3
    (data_dir / "config.toml").write_text('monthly_tokens = "1_000_000"\n')
    assert _scan(data_dir, export, fake, None).returncode == 0
    assert fake.calls == ["a1"]


def test_the_worst_case_rounds_the_prompt_up_and_adds_the_output_cap() -> None:
    """4 characters a token, rounded up, plus 2048; December's next month is January."""
    from _fakes.records import prompt

    made = prompt().model_copy(update={"system": "x" * 5, "user": "y" * 4})
    assert worst_case(made) == 3 + 2048
    assert (next_month("2026-12"), next_month("2027-01")) == ("2027-01", "2027-02")


def test_cron_says_a_reached_budget_once_with_what_it_means(data_dir: Path, tmp_path: Path) -> None:
    """A cron round that meets the budget says it on one stderr line with its fix; the next round,
    still over it, says nothing (the same trouble is said once, SPEC §15.3)."""
    from test_cron import Account, World

    account = Account(tmp_path / "account.json", ["q1"])
    account.write()
    world = World(data_dir, account, FakeProvider())
    env = {"WATCHER_MONTHLY_TOKENS": "100"}
    first = world.round(env=env)
    assert first.returncode == 3, first.stderr
    lines = first.stderr.splitlines()
    assert len(lines) == 1 and "monthly token budget reached (0 of 100)" in lines[0], lines
    assert lines[0].endswith("— until then new comments wait unjudged")
    assert world.round(env=env).stderr == ""
    assert world.fake.calls == []


def test_status_before_any_counted_call_says_none_of_the_budget_is_used(data_dir: Path) -> None:
    """No model call counted yet (no tally): status says 0 of the budget is used, in numbers."""
    env = {"WATCHER_PROVIDER": "offline", "WATCHER_MONTHLY_TOKENS": "1000"}
    shown = run_main("cli", "status", data_dir=data_dir, env=env).stdout
    assert f"budget:    0 of 1,000 tokens used in {_month()}" in shown, shown
