"""SPEC §7.2, §13.1, §15.5: what a 429 and a string of transient failures leave for the next run.

- A 429 with no usable ``Retry-After`` (none, ``-5``, ``NaN``, empty, a date gone by) still starts a
  cooldown, 1, 2, 4 … minutes while the 429s continue, at most an hour.
- The two-in-a-row rule for transient failures spans runs: one is remembered in provider.json until
  the provider answers, so the second stops the batch whichever run it falls in.
- A cooldown whose write failed stops the run (exit 5) and is written by the next run before any
  call, from the 429 its attempt recorded.
- A cooldown set while the clock ran ahead — further away than the wait it was set for — is dropped.

Runs are in process, through the provider factory (the same call log as over loopback HTTP); a run
"later" gets the hooks' clock that much ahead (tests/_fakes/clock.py) instead of waiting.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.clock import later
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.config import Paths
from watcher.errors import SaveFailed
from watcher.models import ProviderState
from watcher.pipeline import provider_state
from watcher.store.files import FileStore
from watcher.util.timeutil import parse_iso, utcnow

LABELS = ["c1", "c2", "c3", "c4"]
MANY = [f"m{i}" for i in range(12)]


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_export(tmp_path / "export.json", LABELS)


def _run(data_dir: Path, fake: FakeProvider, command: str, export: Path | None = None, *, limit: int = 5,
         store: type[FileStore] = FileStore, dry_run: bool = False, by: timedelta = timedelta(0)) -> dict[str, Any]:
    """`watcher scan --source EXPORT` (or `recheck`) `--json` in this process, one call at a time, its
    calls to ``fake``, its state through ``store``, started ``by`` later: the envelope."""
    args = ["scan", "--source", str(export)] if command == "scan" else ["recheck"]
    args += ["--limit", str(limit), "--parallel", "1", "--json"] + (["--dry-run"] if dry_run else [])
    hooks = in_process_hooks(fake, make_store=store, clock=later(by))
    done = run_main("cli", *args, data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    assert done.envelope is not None, done.stderr
    return done.envelope


def _state(data_dir: Path) -> ProviderState:
    return FileStore(Paths(data_dir)).load_provider_state()


def _waits(data_dir: Path, shift: timedelta = timedelta(0)) -> float:
    """How long the cooldown on disk lasts from now (as the shifted clock sees it), in seconds."""
    until = _state(data_dir).cooldown_until
    assert until is not None
    return (parse_iso(until) - (utcnow() + shift)).total_seconds()


# ---- a 429 without a usable Retry-After ---------------------------------------------------------------

UNUSABLE = {"missing": "429-none", "negative": "429:-5", "nan": "429:NaN", "empty": "429:",
            "past-date": "429:Wed, 21 Oct 2015 07:28:00 GMT"}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_a_429_without_a_usable_retry_after_still_starts_a_cooldown(
        case: str, data_dir: Path, export: Path) -> None:
    """An always-429 provider: the first run makes one call and writes a one-minute cooldown; the
    next eleven runs make none and each exits 3 naming it."""
    fake = FakeProvider()
    fake.default = UNUSABLE[case]
    first = _run(data_dir, fake, "scan", export)
    assert (first["exit_code"], first["result"]["stopped"]) == (3, "rate_limited"), first
    assert 55 <= _waits(data_dir) <= 60
    for n in range(11):
        again = _run(data_dir, fake, "scan" if n % 2 else "recheck", export)
        assert again["exit_code"] == 3 and "provider cooldown until" in again["error"]["message"], again
    assert fake.calls == ["c1"]


def test_the_cooldown_grows_while_429s_continue_and_starts_over_after_an_answer(
        data_dir: Path, tmp_path: Path) -> None:
    """1, 2, 4, 8 minutes for 429s in a row (each run after the last cooldown ended), capped at an
    hour; a verdict in between, and the next 429 waits one minute again."""
    export = write_export(tmp_path / "many.json", MANY)
    fake = FakeProvider()
    fake.default = "429-none"
    shift = timedelta(0)
    waits = []
    for _ in range(8):  # each run starts just after the cooldown before it ended
        assert _run(data_dir, fake, "scan", export, by=shift)["exit_code"] == 3
        waits.append(round(_waits(data_dir, shift) / 60))
        shift += timedelta(seconds=_waits(data_dir, shift) + 1)
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60]
    assert len(fake.calls) == 8  # one call per run whose cooldown had ended
    fake.default = "verdict"
    assert _run(data_dir, fake, "scan", export, limit=1, by=shift)["exit_code"] == 0
    fake.default = "429:"
    assert _run(data_dir, fake, "scan", export, by=shift)["exit_code"] == 3
    assert round(_waits(data_dir, shift) / 60) == 1


# ---- two transient failures in a row, across runs --------------------------------------------------


def test_the_second_transient_failure_in_a_row_stops_the_batch_in_whichever_run_it_falls(
        data_dir: Path, export: Path) -> None:
    """A 529 ends run 1 (its limit); run 2's first answer, another 529, is the second in a row: it
    stops run 2 at once (exit 3) and c3 is not called."""
    fake = FakeProvider()
    fake.default = "529"
    assert _run(data_dir, fake, "scan", export, limit=1)["exit_code"] == 0
    second = _run(data_dir, fake, "scan", export)
    assert (second["exit_code"], second["result"]["stopped"]) == (3, "overloaded"), second
    assert fake.calls == ["c1", "c2"]
    assert [i["outcome"] for i in second["result"]["items"]] == ["error", "not_started", "not_started"]


def test_a_transient_failure_is_forgotten_once_the_provider_answers(data_dir: Path, export: Path) -> None:
    """529, verdict, 529, verdict, one per run: no two in a row, so no run stops."""
    fake = FakeProvider()
    for label, behaviour in zip(LABELS, ("529", "verdict", "529", "verdict"), strict=True):
        fake.script(label, behaviour)
    codes = [_run(data_dir, fake, "scan", export, limit=1)["exit_code"] for _ in LABELS]
    assert codes == [0, 0, 0, 0] and fake.calls == LABELS


# ---- a cooldown whose write failed -------------------------------------------------------------------


class _CooldownWriteFails(FileStore):
    """A store whose provider-state write of a cooldown fails (a full disk) ``fails`` more times."""

    fails = 0

    def save_provider_state(self, state: ProviderState) -> None:
        if _CooldownWriteFails.fails > 0 and state.cooldown_until is not None:
            _CooldownWriteFails.fails -= 1
            raise SaveFailed(self.paths.provider_state, OSError(28, "No space left on device"))
        super().save_provider_state(state)


def test_a_cooldown_that_could_not_be_written_stops_the_run_and_is_written_before_the_next_call(
        data_dir: Path, export: Path) -> None:
    """429 with Retry-After 3600 and provider.json cannot be written: exit 5, no second call, the 429
    kept on its attempt; the next run, seconds later, writes the hour's cooldown and calls nothing."""
    fake = FakeProvider()
    fake.default = "429:3600"
    _CooldownWriteFails.fails = 2  # when the 429 is met, and when the run tries once more
    first = _run(data_dir, fake, "scan", export, store=_CooldownWriteFails)
    assert first["exit_code"] == 5, first
    assert "provider.json" in first["error"]["message"]
    assert fake.calls == ["c1"] and _state(data_dir).cooldown_until is None
    record = FileStore(Paths(data_dir)).load_record("c1")
    assert record is not None and record.attempts[-1].error is not None
    assert (record.attempts[-1].error.kind, record.attempts[-1].error.retry_after_s) == ("rate_limited", 3600)
    planned = _run(data_dir, fake, "scan", export, dry_run=True)  # says what the real run would do
    assert {i["outcome"] for i in planned["result"]["items"]} == {"not_started"}
    for command in ("scan", "recheck"):
        again = _run(data_dir, fake, command, export)
        assert again["exit_code"] == 3 and "provider cooldown until" in again["error"]["message"], again
    assert fake.calls == ["c1"]
    assert 3500 <= _waits(data_dir) <= 3600


def test_a_cooldown_that_could_not_be_written_is_tried_again_before_the_run_ends(
        data_dir: Path, export: Path) -> None:
    """The disk refuses provider.json once, when the 429 is met: the batch stops there (exit 5, no
    second call, even with --parallel 4) and the run writes the cooldown before it ends."""
    fake = FakeProvider()
    fake.default = "429:3600"
    _CooldownWriteFails.fails = 1
    hooks = in_process_hooks(fake, make_store=_CooldownWriteFails)
    done = run_main("cli", "scan", "--source", str(export), "--parallel", "4", "--json",
                    data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    assert done.returncode == 5 and fake.calls == ["c1"], done.stdout
    assert 3500 <= _waits(data_dir) <= 3600


# ---- a cooldown set while the clock was wrong --------------------------------------------------------


def test_a_cooldown_beyond_the_wait_it_was_set_for_is_dropped(data_dir: Path, export: Path) -> None:
    """Retry-After: 60 seen while the clock ran a year ahead: once the clock is right the cooldown
    lies a year away, far past any 60 s the provider meant — dropped (and written down), and the
    next run calls."""
    fake = FakeProvider()
    fake.script("c1", "429:60", "verdict")
    assert _run(data_dir, fake, "scan", export, by=timedelta(days=365))["exit_code"] == 3  # the wrong clock
    assert _waits(data_dir) > 364 * 86400  # as written by the run whose clock was wrong
    fixed = _run(data_dir, fake, "scan", export)
    assert fixed["exit_code"] == 0, fixed
    assert fake.calls == ["c1", "c2", "c3", "c4"]
    assert _state(data_dir).cooldown_until is None


def test_a_cooldown_within_the_wait_it_was_set_for_holds(data_dir: Path) -> None:
    """A Retry-After of an hour, written now, is honoured to the end (as written, with its wait)."""
    store = FileStore(Paths(data_dir))
    until = provider_state.write_cooldown(store, 3600, reason="rate_limited: 429")
    cooldown = provider_state.read_cooldown(store)
    assert cooldown is not None and cooldown.until == until
    assert json.loads(Paths(data_dir).provider_state.read_bytes())["retry_after_s"] == 3600
