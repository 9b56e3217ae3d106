"""The rig's machinery: a baseline data dir, the hooks of in-process runs, recovery until quiet, the tally.

In-process runs are :func:`_proc.run_main`: the front end's ``main`` with the argv a user types,
and :func:`rig_hooks`. Each run's store stamps its own synthetic pid on the attempts it reserves
(:class:`RunPidStore`), so the "one call per comment per run" check can tell runs apart even
though they share a process.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _fakes.clock import LEASE_END, later
from _fakes.provider import FakeProvider, in_process
from _proc import Answer, run_main, write_export
from _tally import TALLY  # noqa: F401 - the rig imports it from here

from watcher.state import records
from watcher.config import Paths, Settings
from watcher.models import InboxRecord
from watcher.pipeline import Hooks
from watcher.providers.base import Provider
from watcher.store import Reservation
from watcher.store.files import FileStore

# A provider factory (:attr:`watcher.pipeline.Hooks.make_provider`); ``None``: the real one.
ProviderFactory = Callable[[Settings], Provider] | None

LONG = os.environ.get("WATCHER_RELIABILITY", "").lower() == "long"

# Oldest first: recheck meets the orphan before the failed ones.
BASE_LABELS = ["orph", "flaky", "bad", "done"]
NEW_LABELS = ["newa", "newb", "newc"]
BASE_MARKS = {"done": "replied", "bad": "ignored"}

# SPEC §14: an agent's claim is in flight for 15 minutes. Recovery is a later run: every lease
# a dead or silent agent left has ended by then (its runs get the clock later(LEASE_END)).
AGENT_ENV = {"WATCHER_PROVIDER": "agent"}
# A cooldown the rig's provider sets has ended this much later: its Retry-After is at most 1 s, and a
# 429 without one backs off for a minute at first (provider_state.FIRST_BACKOFF).
COOLDOWN_PASSED = timedelta(minutes=2)
# The fault rig's points around a notification's sends (SPEC §16.1), in the order a round reaches
# them: only a cron round with WATCHER_NOTIFY reaches them (tests/reliability/test_rel_notify_crash.py).
NOTIFY_POINTS = ("after_outbox_write", "before_send", "after_send_accepted", "after_accept_write")
# What makes each entry point print its envelope: the bridge always does, the CLI with --json.
ENVELOPE: dict[str, tuple[str, ...]] = {"cli": ("--json",), "bridge": ()}


# ---- in-process runs --------------------------------------------------------------------------------

# Above Linux's largest pid_max (2**22), so a synthetic pid never equals a real process's.
_pids = itertools.count(5_000_000)
_pid_lock = threading.Lock()


def next_pid() -> int:
    with _pid_lock:
        return next(_pids)


class RunPidStore(FileStore):
    """The store of an in-process run (``Hooks.make_store``; a command opens one store): it stamps
    the run's own synthetic pid on the attempts it reserves, as separate processes would, so the
    invariants can tell the runs of one test process apart."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.pid = next_pid()

    def write_reservation(self, record: InboxRecord) -> Reservation:
        last = record.attempts[-1]
        if last.pid == os.getpid():
            record = record.model_copy(update={"attempts": [*record.attempts[:-1], last.model_copy(update={"pid": self.pid})]})
        return super().write_reservation(record)


def rig_hooks(provider: ProviderFactory = None, clock: Callable[[], datetime] | None = None) -> Hooks:
    """The hooks of the rig's in-process runs (``run_main(..., hooks=)``): :class:`RunPidStore`;
    ``provider`` (e.g. :func:`_fakes.provider.in_process`) swaps only the wire — everything else of
    SPEC §7 runs for real, and the fake's call log is the same as over loopback HTTP; ``clock``: the
    run's "now" for leases (SPEC §14)."""
    return Hooks(make_store=RunPidStore, make_provider=provider, clock=clock)


def calls_of(answer: Answer) -> int:
    result = (answer.envelope or {}).get("result")
    return result.get("calls", 0) if isinstance(result, dict) else 0


def outcomes_of(answer: Answer) -> list[str]:
    result = (answer.envelope or {}).get("result")
    if not isinstance(result, dict):
        return []
    return [item["outcome"] for item in result.get("items", [])]


def error_of(answer: Answer) -> dict[str, Any]:
    """The envelope's error, ``{}`` when there is none (or no envelope)."""
    return (answer.envelope or {}).get("error") or {}


# ---- the baseline every crash and failed-write case starts from -----------------------------------


@dataclass(frozen=True)
class Baseline:
    base_export: Path
    full_export: Path  # the base comments plus NEW_LABELS, which a scan discovers
    marks: dict[str, str]
    data_dir: Path | None = None
    calls: tuple[str, ...] = ()  # the provider calls that built it

    def clone(self, dest: Path, fake: FakeProvider) -> Path:
        """A copy of the baseline data dir for one case, with ``fake`` primed to match it.

        The copied log has a new inode but the same content, so its counts carry on as they
        are (SPEC §13.5): no ``signals --reset`` is needed, and every case runs on a copy.
        """
        assert self.data_dir is not None
        shutil.copytree(self.data_dir, dest)
        fake.calls[:] = list(self.calls)
        script_followups(fake)
        return dest


def build_baseline(data_dir: Path, fake: FakeProvider, work: Path) -> Baseline:
    """done (verdict, marked replied), flaky/bad (failed once), orph (failed, then orphaned by a
    dead process), bad marked ignored, signals counted. Fake scripts set for what follows."""
    env, provider = fake.env(), in_process(fake)
    base = write_export(work / "base.json", BASE_LABELS)
    full = write_export(work / "full.json", BASE_LABELS + NEW_LABELS)
    for label, first in (("done", "verdict"), ("flaky", "malformed"), ("bad", "malformed"), ("orph", "529")):
        fake.script(label, first)
    scanned = run_main("cli", "scan", "--source", str(base), "--limit", "20", "--json", data_dir=data_dir, env=env,
                       hooks=rig_hooks(provider))
    assert scanned.returncode == 0, scanned.stdout + scanned.stderr
    paths = Paths(data_dir)
    record = FileStore(paths).load_record("orph")
    assert record is not None
    FileStore(paths).save_record(records.reserve(record, command="recheck", entrypoint="bridge", provider="openai",
                                    model="fake-model", pid=next_pid()))
    for cid, triage in BASE_MARKS.items():
        assert run_main("bridge", "mark", cid, triage, data_dir=data_dir, env=env, hooks=rig_hooks()).returncode == 0
    assert run_main("cli", "signals", data_dir=data_dir, env=env, hooks=rig_hooks()).returncode == 0
    script_followups(fake)
    return Baseline(base, full, dict(BASE_MARKS), data_dir, tuple(fake.calls))


def script_followups(fake: FakeProvider) -> None:
    """What the provider answers after the baseline: a mix of outcomes, one comment never parses."""
    fake.script("flaky", "verdict")
    fake.script("orph", "verdict")
    fake.script("bad", "malformed")
    fake.script("newa", "verdict")
    fake.script("newb", "malformed", "verdict")
    fake.script("newc", "529", "verdict")


# ---- recovery --------------------------------------------------------------------------------------


@dataclass
class Recovery:
    runs: list[Answer]
    problems: list[str]


def recover_until_quiet(data_dir: Path, env: Mapping[str, str], export: Path, *, max_rounds: int = 10,
                        entries: tuple[str, str] = ("bridge", "cli"), fake: FakeProvider | None = None) -> Recovery:
    """recheck + scan from alternating entrypoints until a round makes no call and finds nothing to
    close; then a final ``signals``. Recovery runs must succeed (a cooldown is waited out). They
    run after every agent's lease has ended (:data:`_fakes.clock.LEASE_END`), as a later cron run would.

    With ``fake``, the runs reach it in process (no socket): recovery is about state, not wire.
    Rounds run a cron round apart by the runs' clock, and a round that meets a cooldown (exit 3)
    is followed by one that runs after it has ended: nobody sleeps."""
    shift = [LEASE_END]
    hooks = rig_hooks(in_process(fake) if fake is not None else None, lambda: later(shift[0])())
    done: list[Answer] = []
    problems: list[str] = []
    for round_no in range(max_rounds):
        # A cron round apart: a comment whose attempt failed on the provider's side is not called
        # again within 10 minutes (SPEC §16.3).
        if round_no:
            shift[0] += timedelta(minutes=30)
        entry = entries[round_no % 2]
        pair = [run_main(entry, "recheck", "--limit", "20", *ENVELOPE[entry], data_dir=data_dir, env=env, hooks=hooks),
                run_main(entry, "scan", "--source", str(export), "--limit", "20", *ENVELOPE[entry], data_dir=data_dir,
                         env=env, hooks=hooks)]
        done += pair
        codes = [a.returncode for a in pair]
        if any(c not in (0, 3) for c in codes):
            problems += [f"recovery {a.args[1]} exited {a.returncode}: {error_of(a) or a.stderr[-300:]}"
                         for a in pair if a.returncode not in (0, 3)]
            continue
        if 3 in codes:
            shift[0] += COOLDOWN_PASSED
            continue
        busy = [o for a in pair for o in outcomes_of(a) if o in ("interrupted", "deferred", "not_started")]
        if sum(calls_of(a) for a in pair) == 0 and not busy:
            break
    else:
        problems.append(f"not quiet after {max_rounds} recovery rounds")
    final = run_main(entries[0], "signals", *ENVELOPE[entries[0]], data_dir=data_dir, env=env, hooks=hooks)
    done.append(final)
    if final.returncode != 0:
        problems.append(f"final signals exited {final.returncode}: {error_of(final) or final.stderr[-300:]}")
    return Recovery(done, problems)
