"""The fault rig for reply drafts (SPEC §16.5): a real `watcher draft` killed at every draft point,
and while its call is out, then drafted again until refused; failed writes; and the invariant
"never a 4th draft call", counted where the calls arrive, at the loopback provider.

A draft is reserved durably before its call under the pipeline and call locks (SPEC §7, §15.1):
an orphan is closed as interrupted by the next draft and still counts, so a kill anywhere costs
at most the draft it was making, and the comment's verdict attempts are never touched.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from _draft_data import drafts_of, seed
from _fakes.provider import FakeProvider, in_process_hooks, IN_PROCESS_ENV, running_fake
from _faults.sitecustomize import KILL_POINTS
from _proc import run, run_main, start

from watcher.config import Paths
from watcher.errors import SaveFailed
from watcher.models import InboxRecord
from watcher.pipeline import Hooks
from watcher.state.drafts import DRAFT_CAP
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow

DRAFT_POINTS = [p for p in KILL_POINTS if p.startswith("draft_") and p != "draft_after_interrupted"]
# Where a kill leaves the draft it was making: reserved (the next draft closes it), or not at all.
RESERVED_AFTER = {"draft_before_reserve": False, "draft_after_reserve": True, "draft_after_answer": True,
                  "draft_after_outcome": False, "during_call": True}


def _kill(data: Path, fake: FakeProvider, point: str, *, env: dict[str, str] | None = None) -> int:
    """`watcher draft q1` killed at ``point``; returns its exit status."""
    if point != "during_call":
        return run("cli", "draft", "q1", "--json", data_dir=data, env=env or fake.env(),
                   fault=f"kill_at={point}").returncode
    fake.script("q1", "hold", "verdict")
    proc = start("cli", "draft", "q1", "--json", data_dir=data, env=fake.env())
    fake.wait_in_flight()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    fake.release()
    return proc.returncode


def _until_refused(data: Path, fake: FakeProvider) -> list[int]:
    """Draft again (each a real process) until the budget refuses; the exit codes."""
    codes: list[int] = []
    while not codes or codes[-1] == 0:
        codes.append(run("cli", "draft", "q1", "--json", data_dir=data, env=fake.env()).returncode)
        assert len(codes) <= DRAFT_CAP + 1, codes
    return codes


def _violations(data: Path, fake: FakeProvider, attempts_before: list[object]) -> list[str]:
    """Every promise of a draft's budget, checked on the files and at the provider."""
    record = FileStore(Paths(data)).load_record("q1")
    assert record is not None
    drafts, calls = record.drafts, [c for c in fake.calls if c == "q1"]
    found = []
    if len(calls) > DRAFT_CAP:
        found.append(f"{len(calls)} draft calls for one comment")
    if len(calls) > len(drafts):
        found.append(f"{len(calls)} calls but {len(drafts)} drafts reserved: a call was not paid for")
    if len(drafts) != DRAFT_CAP:
        found.append(f"{len(drafts)} drafts at the end, not {DRAFT_CAP}")
    if any(d.outcome is None for d in drafts):
        found.append("a draft reservation left open")
    if [d.n for d in drafts] != list(range(1, len(drafts) + 1)):
        found.append(f"draft numbers {[d.n for d in drafts]}")
    if [a.model_dump() for a in record.attempts] != attempts_before:
        found.append("the verdict's attempts changed")
    return found


@pytest.mark.parametrize("point", [*DRAFT_POINTS, "during_call"])
def test_a_draft_killed_at_each_point_never_buys_a_fourth_call(tmp_path: Path, point: str) -> None:
    """Killed at ``point``, then drafted until refused: at most 3 calls, every call paid for by a
    reservation on disk, the killed draft closed as interrupted if it was reserved, no attempt
    touched."""
    data = tmp_path / "data"
    with running_fake() as fake:
        fake.label_last = True
        record = seed(data).load_record("q1")
        assert record is not None
        attempts = [a.model_dump() for a in record.attempts]
        assert _kill(data, fake, point) == -signal.SIGKILL
        left = drafts_of(data)
        assert (len(left) == 1 and left[0]["outcome"] is None) == RESERVED_AFTER[point], left
        codes = _until_refused(data, fake)
        assert codes[-1] == 2 and set(codes[:-1]) == {0}
        assert _violations(data, fake, attempts) == []
        if RESERVED_AFTER[point]:
            assert drafts_of(data)[0]["error"]["kind"] == "interrupted"  # type: ignore[index]


def test_a_draft_killed_while_closing_an_orphan_closes_it_once(tmp_path: Path) -> None:
    """Killed right after it closed an orphan (before reserving its own): the orphan stays closed
    and counted once, and the budget still ends at 3 drafts."""
    data = tmp_path / "data"
    with running_fake() as fake:
        fake.label_last = True
        seed(data)
        assert _kill(data, fake, "draft_after_reserve") == -signal.SIGKILL
        assert _kill(data, fake, "draft_after_interrupted") == -signal.SIGKILL
        assert [d["error"]["kind"] for d in drafts_of(data)] == ["interrupted"]  # type: ignore[index]
        _until_refused(data, fake)
        assert _violations(data, fake, []) == []
        assert len([c for c in fake.calls if c == "q1"]) == 2  # drafts 2 and 3


class _FailingDrafts(FileStore):
    """A store whose draft writes fail as a full disk does: the reservation (``reserve``) or the
    outcome (``outcome``), the first ``times`` times."""

    def __init__(self, paths: Paths, fails: str, times: list[int]) -> None:
        super().__init__(paths)
        self.fails, self.times = fails, times

    def save_record(self, record: InboxRecord) -> None:
        last = record.drafts[-1] if record.drafts else None
        kind = None if last is None else ("reserve" if last.outcome is None else "outcome")
        if kind == self.fails and self.times[0] > 0 and (last is not None and last.error is None
                                                          or kind == "reserve"):
            self.times[0] -= 1
            raise SaveFailed(self.paths.inbox_file(record.comment.id), OSError(28, "No space left (injected)"))
        super().save_record(record)


def _hooks(fake: FakeProvider, fails: str, times: int) -> Hooks:
    left = [times]
    base = in_process_hooks(fake)
    return Hooks(make_provider=base.make_provider, make_store=lambda paths: _FailingDrafts(paths, fails, left))


def test_a_reservation_that_cannot_be_written_makes_no_call(data_dir: Path) -> None:
    """The draft's reservation fails to save: exit 5, no call, nothing counted."""
    seed(data_dir)
    fake = FakeProvider()
    fake.label_last = True
    budget = {**IN_PROCESS_ENV, "WATCHER_MONTHLY_TOKENS": "1000000"}  # a budget keeps the tally
    proc = run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=budget,
                    hooks=_hooks(fake, "reserve", 1))
    assert proc.returncode == 5
    assert fake.calls == [] and drafts_of(data_dir) == []
    tally = FileStore(Paths(data_dir)).load_token_tally()  # admitted, then taken back (SPEC §16.4)
    assert tally is not None and (tally.open, tally.used) == ({}, 0)


def test_an_outcome_that_cannot_be_written_keeps_the_draft_counted_and_shown(data_dir: Path) -> None:
    """The draft's outcome fails to save: exit 5, its text still printed, the reservation left on
    disk and closed as interrupted by the next draft — counted, never a 4th call."""
    seed(data_dir)
    fake = FakeProvider()
    fake.label_last = True
    hooks = _hooks(fake, "outcome", 1)
    failed = run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    assert failed.returncode == 5
    assert json.loads(failed.stdout)["result"]["text"]
    assert [d["outcome"] for d in drafts_of(data_dir)] == [None]
    codes = [run_main("cli", "draft", "q1", data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks).returncode
             for _ in range(3)]
    assert codes == [0, 0, 2]
    kept = drafts_of(data_dir)
    assert [d["outcome"] for d in kept] == ["error", "ok", "ok"]
    assert kept[0]["error"]["kind"] == "interrupted"  # type: ignore[index]
    assert len(fake.calls) == 3
