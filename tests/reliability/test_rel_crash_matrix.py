"""Crash matrix: SIGKILL a real `watcher` / `watcher-bridge` at every step boundary of SPEC §7/§8.

Each case starts from the same baseline (a verdict marked replied, two failed comments, an
orphaned reservation, counted signals), kills a real scan or recheck at one named point (the
``kill_at`` fault in tests/_faults/sitecustomize.py, or a kill from outside while the provider
holds the request), runs recovery until quiet, and checks every promise of SPEC §1.

An agent's side (SPEC §14) is killed the same way: a ``claim`` after its reservation is on disk,
a ``submit`` after the verdict was validated and before its outcome is written, and an agent that
claims and never submits. Recovery comes after the lease; a submit that arrives after it is
refused and changes nothing.
"""

from __future__ import annotations

import json
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import VERDICT, FakeProvider, running_fake
from _faults.sitecustomize import KILL_POINTS, MIGRATE_POINTS
from _proc import envelope, run, run_main, start
from _rel_harness import AGENT_ENV, ENVELOPE, LONG, NOTIFY_POINTS, TALLY, Baseline, error_of, recover_until_quiet, rig_hooks
from _rel_invariants import Expect, Snapshot, check_all, records, snapshot

from watcher.state.records import state_of

pytestmark = pytest.mark.slow

ENTRYPOINTS = ("cli", "bridge")
# The first comment each command calls the model for (recheck first meets the orphan: no call).
FIRST_CALLED = {"scan": "newa", "recheck": "flaky"}
# scan closes orphaned reservations too (SPEC §13.6), so it reaches after_interrupted_write.
UNREACHABLE = {("after_inbox_create", "recheck")}
# Later occurrences: die mid-batch with earlier items finished.
REPEATS = {"after_inbox_create": 3, "after_reserve_write": 2, "after_outcome_write": 2, "after_signal_append": 3}


# An agent's claim and submit (SPEC §14) have cells of their own, below; a cron round's sends
# (SPEC §16.1) a matrix of their own (test_rel_notify_crash.py): scan and recheck send nothing.
AGENT_POINTS = ("after_claim_write", "after_submit_validated")


def _points() -> list[str]:
    # migrate's points have a rig of their own (test_rel_migrate.py), and so have a draft's
    # (test_rel_drafts.py): `watcher scan` and `recheck` meet neither.
    skipped = AGENT_POINTS + NOTIFY_POINTS + MIGRATE_POINTS
    points = [p for p in KILL_POINTS if p not in skipped and not p.startswith("draft_")]
    points += ["during_call"]
    for point, last in REPEATS.items():
        points += [f"{point}:{n}" for n in range(2, (last if LONG else 2) + 1)]
    return points


def _commands(point: str) -> list[str]:
    return [c for c in ("scan", "recheck") if (point.split(":")[0], c) not in UNREACHABLE]


def _kill_run(data: Path, fake, point: str, command: str, entry: str, export: Path,  # type: ignore[no-untyped-def]
              parallel: int | None = None):
    args = ["scan", "--source", str(export)] if command == "scan" else ["recheck"]
    args += ["--limit", "20"] + (["--json"] if entry == "cli" else [])
    args += ["--parallel", str(parallel)] if parallel else []
    if point != "during_call":
        return run(entry, *args, data_dir=data, env=fake.env(), fault=f"kill_at={point}")
    proc = start(entry, *args, data_dir=data, env=fake.env())
    fake.wait_in_flight()
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    fake.release()
    proc.stdout, proc.stderr = out, err  # type: ignore[misc]
    return proc


def crash_case(baseline: Baseline, work: Path, point: str, command: str, entry: str,
               parallel: int | None = None) -> list[str]:
    """One cell of the matrix; returns the violations found (empty: every promise held)."""
    with running_fake() as fake:
        data = baseline.clone(work / "data", fake)
        if point.startswith("after_cooldown_write"):
            fake.script(FIRST_CALLED[command], "429:1", "verdict")
        elif point == "during_call":
            fake.script(FIRST_CALLED[command], "hold", "verdict")
        before = snapshot(data, fake.calls)
        proc = _kill_run(data, fake, point, command, entry, baseline.full_export, parallel)
        problems = []
        if proc.returncode != -signal.SIGKILL:
            problems.append(f"kill point not reached (exit {proc.returncode}): {proc.stderr[-500:]}")
        recovery = recover_until_quiet(data, fake.env(), baseline.full_export, fake=fake)
        problems += recovery.problems
        problems += _recovered(data, fake, baseline, before)
    mode = f" × --parallel {parallel}" if parallel else ""
    return [f"{point} × {command} × {entry}{mode}: {p}" for p in problems]


def _recovered(data: Path, fake: FakeProvider, baseline: Baseline, before: Snapshot) -> list[str]:
    """After recovery: every promise held, and every comment ended with a verdict ("bad" spent)."""
    problems = check_all(data, fake.calls, before=before, expect=Expect(marks=baseline.marks))
    states = {cid: state_of(r) for cid, r in records(data).items()}
    want = {cid: "exhausted" if cid == "bad" else "done" for cid in [*before.attempts, "newa", "newb", "newc"]}
    if states != want:
        problems.append(f"after recovery the comments are {states}, expected {want}")
    return problems


@pytest.mark.parametrize("point", _points())
def test_kill_at_step_boundary_breaks_no_promise(point: str, baseline: Baseline, tmp_path: Path) -> None:
    """SIGKILL at this point of scan and recheck, from both entrypoints: recovery keeps every promise."""
    cells = [(command, entry) for command in _commands(point) for entry in ENTRYPOINTS]
    with ThreadPoolExecutor(max_workers=len(cells)) as pool:
        found = list(pool.map(lambda cell: crash_case(baseline, tmp_path / "-".join(cell), point, *cell), cells))
    for violations in found:
        TALLY.add("crash_points", 1, violations)
    assert [v for vs in found for v in vs] == []


# ---- parallel batches (SPEC §15.1) --------------------------------------------------------------------

# With 4 calls in flight, the kill lands with several reservations open at once, answers arriving
# in any order and outcomes written between other comments' calls. The quick lane takes the points
# where that differs most from a serial batch; the long lane takes every point.
PARALLEL_POINTS = [p for p in _points() if LONG or p in ("before_outcome_write", "during_call")]


@pytest.mark.parametrize("point", PARALLEL_POINTS)
def test_kill_a_parallel_batch_at_step_boundary_breaks_no_promise(point: str, baseline: Baseline,
                                                                  tmp_path: Path) -> None:
    """SIGKILL a --parallel 4 scan or recheck at this point, from both entrypoints: every call lock is
    free after the kill, and recovery keeps every promise."""
    cells = [(command, entry) for command in _commands(point) for entry in ENTRYPOINTS]
    with ThreadPoolExecutor(max_workers=len(cells)) as pool:
        found = list(pool.map(lambda cell: crash_case(baseline, tmp_path / "-".join(cell), point, *cell, 4),
                              cells))
    for violations in found:
        TALLY.add("crash_points", 1, violations)
    assert [v for vs in found for v in vs] == []


# ---- the agent's side (SPEC §14) -------------------------------------------------------------------------

# "between_claim_and_submit": the claim ran to its end, then the agent died without submitting.
# The long lane also kills a claim at the steps it shares with scan/recheck, a later claim write,
# and a submit whose verdict failed the schema.
AGENT_CASES = ["after_claim_write", "after_submit_validated", "between_claim_and_submit"] + (
    ["after_claim_write:2", "after_submit_validated/invalid", "after_lock", "after_interrupted_write",
     "after_signal_append", "before_seen_save", "after_seen_save", "counter_before_state"] if LONG else [])
INVALID = json.dumps({"needs_reply": "maybe"})


def _claim_args(entry: str) -> list[str]:
    return ["claim", "--limit", "20"] + (["--json"] if entry == "cli" else [])


def agent_crash_case(baseline: Baseline, work: Path, case: str, entry: str) -> list[str]:
    """One cell: an agent's claim or submit killed (or never sent), recovery after the lease, then a
    late submit of the same claim; returns the violations found."""
    point, _, variant = case.partition("/")
    with running_fake() as fake:
        data = baseline.clone(work / "data", fake)
        before = snapshot(data, fake.calls)
        problems: list[str] = []
        claimed: dict[str, Any] | None = None
        if point == "after_submit_validated":
            # flaky and bad (orph is closed as interrupted)
            got = run_main(entry, *_claim_args(entry), data_dir=data, env=AGENT_ENV, hooks=rig_hooks())
            claimed = envelope(got)["result"]["claimed"][0]
            proc = run(entry, "submit", claimed["id"], str(claimed["n"]), INVALID if variant else json.dumps(VERDICT),
                       data_dir=data, env=AGENT_ENV, fault=f"kill_at={point}")
        elif point == "between_claim_and_submit":
            proc = run(entry, *_claim_args(entry), data_dir=data, env=AGENT_ENV)
            claimed = envelope(proc)["result"]["claimed"][0] if proc.returncode == 0 else None
        else:
            proc = run(entry, *_claim_args(entry), data_dir=data, env=AGENT_ENV, fault=f"kill_at={point}")
        expected = 0 if point == "between_claim_and_submit" else -signal.SIGKILL
        if proc.returncode != expected:
            problems.append(f"exit {proc.returncode}, expected {expected}: {proc.stderr[-500:]}")
        # A claim killed after its write handed nothing out, but an agent could still guess the attempt.
        claimed = claimed or next(({"id": cid, "n": len(r.attempts)} for cid, r in records(data).items()
                                   if r.attempts and r.attempts[-1].outcome is None and r.attempts[-1].lease_until),
                                  None)
        recovery = recover_until_quiet(data, fake.env(), baseline.full_export, fake=fake)
        problems += recovery.problems
        if claimed is not None:
            problems += _late_submit_changes_nothing(data, entry, claimed)
        problems += _recovered(data, fake, baseline, before)
    return [f"{case} × agent {entry}: {p}" for p in problems]


def _late_submit_changes_nothing(data: Path, entry: str, claimed: dict[str, Any]) -> list[str]:
    """The claim's lease ended and recovery closed it: its submit now is refused, no byte changes."""
    path = data / "inbox" / f"{claimed['id']}.json"
    on_disk = path.read_bytes()
    late = run_main(entry, "submit", claimed["id"], str(claimed["n"]), json.dumps(VERDICT), *ENVELOPE[entry],
                    data_dir=data, env=AGENT_ENV, hooks=rig_hooks())
    problems = []
    if (late.returncode, error_of(late).get("kind")) != (2, "submit_refused"):
        problems.append(f"a late submit of {claimed['id']} attempt {claimed['n']} answered {late.stdout}{late.stderr}")
    if path.read_bytes() != on_disk:
        problems.append(f"a refused submit changed {path.name}")
    return problems


@pytest.mark.parametrize("case", AGENT_CASES)
def test_kill_an_agent_between_claim_and_submit_breaks_no_promise(case: str, baseline: Baseline,
                                                                  tmp_path: Path) -> None:
    """An agent's claim or submit killed at this point, from both entrypoints: recovery after the lease
    keeps every promise, claims count as attempts, and the late submit is refused."""
    with ThreadPoolExecutor(max_workers=len(ENTRYPOINTS)) as pool:
        found = list(pool.map(lambda entry: agent_crash_case(baseline, tmp_path / entry, case, entry), ENTRYPOINTS))
    for violations in found:
        TALLY.add("crash_points", 1, violations)
    assert [v for vs in found for v in vs] == []
