"""The rig's machinery: a baseline data dir, in-process runs, recovery until quiet, the tally.

In-process runs go through :func:`watcher.commands.execute` exactly like both front ends do.
Each one gets its own synthetic pid on the attempts it reserves (see :func:`run_pid`), so the
"one call per comment per run" check can tell runs apart even though they share a process.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _fakes.provider import FakeProvider, in_process
from _proc import write_export
from _tally import TALLY  # noqa: F401 - the rig imports it from here

from watcher import commands, records
from watcher.commands import Context, Envelope
from watcher.config import Paths, Settings, load_settings
from watcher.models import InboxRecord
from watcher.pipeline import Hooks
from watcher.providers.base import Provider
from watcher.store import Reservation
from watcher.store.files import FileStore
from watcher.timeutil import utcnow

# A provider factory (:attr:`watcher.pipeline.Hooks.make_provider`); ``None``: the real one.
ProviderFactory = Callable[[Settings], Provider] | None

LONG = os.environ.get("WATCHER_RELIABILITY", "").lower() == "long"

# Oldest first: recheck meets the orphan before the failed ones.
BASE_LABELS = ["orph", "flaky", "bad", "done"]
NEW_LABELS = ["newa", "newb", "newc"]
BASE_MARKS = {"done": "replied", "bad": "ignored"}

# SPEC §14: an agent's claim is in flight for 15 minutes. Recovery is a later run: every lease
# a dead or silent agent left has ended by then (the runs get a clock this much ahead).
AFTER_THE_LEASE = timedelta(minutes=16)
AGENT_ENV = {"WATCHER_PROVIDER": "agent"}


# ---- synthetic pids for in-process runs -----------------------------------------------------------

_local = threading.local()
# Above Linux's largest pid_max (2**22), so a synthetic pid never equals a real process's.
_pids = itertools.count(5_000_000)
_pid_lock = threading.Lock()


def next_pid() -> int:
    with _pid_lock:
        return next(_pids)


class RunPidStore(FileStore):
    """The store of in-process runs (``Hooks.make_store``): each run stamps its own synthetic pid on
    the attempts it reserves, as separate processes would, so the invariants can tell the runs of
    one test process apart."""

    def write_reservation(self, record: InboxRecord) -> Reservation:
        pid = getattr(_local, "pid", None)
        last = record.attempts[-1]
        if pid is not None and last.pid == os.getpid():
            record = record.model_copy(update={"attempts": [*record.attempts[:-1], last.model_copy(update={"pid": pid})]})
        return super().write_reservation(record)


@contextmanager
def run_pid() -> Iterator[int]:
    _local.pid = next_pid()
    try:
        yield _local.pid
    finally:
        _local.pid = None


# ---- in-process commands --------------------------------------------------------------------------


def later_clock(ahead: timedelta) -> Callable[[], datetime]:
    """A clock for :attr:`watcher.pipeline.Hooks.clock`: now, ``ahead`` of the real one."""
    return lambda: utcnow() + ahead


def inproc(data_dir: Path, env: Mapping[str, str], entry: str, command: str, *,
           provider: ProviderFactory = None, clock: Callable[[], datetime] | None = None, **kw: Any) -> Envelope:
    """Run one command in this process as front end ``entry`` would; never raises.

    ``provider`` (e.g. :func:`_fakes.provider.in_process`) swaps only the wire: everything else
    of SPEC §7 runs for real, and the fake's call log is the same as over loopback HTTP.
    ``clock``: the run's "now" for leases (SPEC §14)."""
    ctx = Context(entrypoint=entry, data_dir=data_dir, hooks=Hooks(make_provider=provider, clock=clock,
                                                                    make_store=RunPidStore))
    ctx._settings = load_settings(data_dir=data_dir, env={**env, "WATCHER_DATA_DIR": str(data_dir)})
    fns: dict[str, Callable[[Context], Any]] = {
        "scan": lambda c: commands.scan(c, limit=kw.get("limit", 20), source=str(kw["source"])),
        "recheck": lambda c: commands.recheck(c, limit=kw.get("limit", 20), ids=kw.get("ids", ())),
        "mark": lambda c: commands.mark(c, kw["id"], kw["triage"]),
        "signals": lambda c: commands.signals_cmd(c, reset=kw.get("reset", False)),
        "status": commands.status,
        "inbox": commands.inbox_view,
        "show": lambda c: commands.show(c, kw["id"]),
        "claim": lambda c: commands.claim(c, limit=kw.get("limit", 20)),
        "submit": lambda c: commands.submit(c, kw["id"], kw["n"], kw["verdict"]),
    }
    with run_pid():
        return commands.execute(command, ctx, fns[command])


def calls_of(envelope: Envelope) -> int:
    result = envelope.result
    return result.get("calls", 0) if isinstance(result, dict) else 0


def outcomes_of(envelope: Envelope) -> list[str]:
    result = envelope.result
    if not isinstance(result, dict):
        return []
    return [item["outcome"] for item in result.get("items", [])]


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
    env_scan = inproc(data_dir, env, "cli", "scan", source=base, provider=provider)
    assert env_scan.exit_code == 0, env_scan.to_json()
    paths = Paths(data_dir)
    record = FileStore(paths).load_record("orph")
    assert record is not None
    FileStore(paths).save_record(records.reserve(record, command="recheck", entrypoint="bridge", provider="openai",
                                    model="fake-model", pid=next_pid()))
    for cid, triage in BASE_MARKS.items():
        assert inproc(data_dir, env, "bridge", "mark", id=cid, triage=triage).exit_code == 0
    assert inproc(data_dir, env, "cli", "signals").exit_code == 0
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
    envelopes: list[Envelope]
    problems: list[str]


def recover_until_quiet(data_dir: Path, env: Mapping[str, str], export: Path, *, max_rounds: int = 10,
                        entries: tuple[str, str] = ("bridge", "cli"), fake: FakeProvider | None = None) -> Recovery:
    """recheck + scan from alternating entrypoints until a round makes no call and finds nothing to
    close; then a final ``signals``. Recovery runs must succeed (a cooldown is waited out). They
    run after every agent's lease has ended (:data:`AFTER_THE_LEASE`), as a later cron run would.

    With ``fake``, the runs reach it in process (no socket): recovery is about state, not wire."""
    provider = in_process(fake) if fake is not None else None
    clock = later_clock(AFTER_THE_LEASE)
    done: list[Envelope] = []
    problems: list[str] = []
    for round_no in range(max_rounds):
        entry = entries[round_no % 2]
        pair = [inproc(data_dir, env, entry, "recheck", provider=provider, clock=clock),
                inproc(data_dir, env, entry, "scan", source=export, provider=provider, clock=clock)]
        done += pair
        codes = [e.exit_code for e in pair]
        if any(c not in (0, 3) for c in codes):
            problems += [f"recovery {e.command} exited {e.exit_code}: {e.error}" for e in pair if e.exit_code not in (0, 3)]
            continue
        if 3 in codes:
            time.sleep(0.5)  # a cooldown from a 429 (Retry-After ≤ 1 s in the rig)
            continue
        busy = [o for e in pair for o in outcomes_of(e) if o in ("interrupted", "deferred", "not_started")]
        if sum(calls_of(e) for e in pair) == 0 and not busy:
            break
    else:
        problems.append(f"not quiet after {max_rounds} recovery rounds")
    final = inproc(data_dir, env, entries[0], "signals", provider=provider, clock=clock)
    done.append(final)
    if final.exit_code != 0:
        problems.append(f"final signals exited {final.exit_code}: {final.error}")
    return Recovery(done, problems)
