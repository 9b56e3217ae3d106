"""Crash matrix: SIGKILL a real `watcher` / `watcher-bridge` at every step boundary of SPEC §7/§8.

Each case starts from the same baseline (a verdict marked replied, two failed comments, an
orphaned reservation, counted signals), kills a real scan or recheck at one named point (the
``kill_at`` fault in tests/_faults/sitecustomize.py, or a kill from outside while the provider
holds the request), runs recovery until quiet, and checks every promise of SPEC §1.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _fake_provider import running_fake
from _faults.sitecustomize import KILL_POINTS
from _proc import run, start
from _rel_harness import LONG, TALLY, Baseline, recover_until_quiet
from _rel_invariants import Expect, check_all, records, snapshot

from watcher.inbox import state_of

pytestmark = pytest.mark.slow

ENTRYPOINTS = ("cli", "bridge")
# The first comment each command calls the model for (recheck first meets the orphan: no call).
FIRST_CALLED = {"scan": "newa", "recheck": "flaky"}
# scan closes orphaned reservations too (SPEC §13.6), so it reaches after_interrupted_write.
UNREACHABLE = {("after_inbox_create", "recheck")}
# Later occurrences: die mid-batch with earlier items finished.
REPEATS = {"after_inbox_create": 3, "after_reserve_write": 2, "after_outcome_write": 2, "after_signal_append": 3}


def _points() -> list[str]:
    points = [*KILL_POINTS, "during_call"]
    for point, last in REPEATS.items():
        points += [f"{point}:{n}" for n in range(2, (last if LONG else 2) + 1)]
    return points


def _commands(point: str) -> list[str]:
    return [c for c in ("scan", "recheck") if (point.split(":")[0], c) not in UNREACHABLE]


def _kill_run(data: Path, fake, point: str, command: str, entry: str, export: Path):  # type: ignore[no-untyped-def]
    args = ["scan", "--source", str(export)] if command == "scan" else ["recheck"]
    args += ["--limit", "20"] + (["--json"] if entry == "cli" else [])
    if point != "during_call":
        return run(entry, *args, data_dir=data, env=fake.env(), fault=f"kill_at={point}")
    proc = start(entry, *args, data_dir=data, env=fake.env())
    fake.wait_in_flight()
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    fake.release()
    proc.stdout, proc.stderr = out, err  # type: ignore[misc]
    return proc


def crash_case(baseline: Baseline, work: Path, point: str, command: str, entry: str) -> list[str]:
    """One cell of the matrix; returns the violations found (empty: every promise held)."""
    with running_fake() as fake:
        data = baseline.clone(work / "data", fake)
        if point.startswith("after_cooldown_write"):
            fake.script(FIRST_CALLED[command], "429:1", "verdict")
        elif point == "during_call":
            fake.script(FIRST_CALLED[command], "hold", "verdict")
        before = snapshot(data, fake.calls)
        proc = _kill_run(data, fake, point, command, entry, baseline.full_export)
        problems = []
        if proc.returncode != -signal.SIGKILL:
            problems.append(f"kill point not reached (exit {proc.returncode}): {proc.stderr[-500:]}")
        recovery = recover_until_quiet(data, fake.env(), baseline.full_export, fake=fake)
        problems += recovery.problems
        problems += check_all(data, fake.calls, before=before, expect=Expect(marks=baseline.marks))
        states = {cid: state_of(r) for cid, r in records(data).items()}
        want = {cid: "exhausted" if cid == "bad" else "done" for cid in [*before.attempts, "newa", "newb", "newc"]}
        if states != want:
            problems.append(f"after recovery the comments are {states}, expected {want}")
    return [f"{point} × {command} × {entry}: {p}" for p in problems]


@pytest.mark.parametrize("point", _points())
def test_kill_at_step_boundary_breaks_no_promise(point: str, baseline: Baseline, tmp_path: Path) -> None:
    """SIGKILL at this point of scan and recheck, from both entrypoints: recovery keeps every promise."""
    cells = [(command, entry) for command in _commands(point) for entry in ENTRYPOINTS]
    with ThreadPoolExecutor(max_workers=len(cells)) as pool:
        found = list(pool.map(lambda cell: crash_case(baseline, tmp_path / "-".join(cell), point, *cell), cells))
    for violations in found:
        TALLY.add("crash_points", 1, violations)
    assert [v for vs in found for v in vs] == []
