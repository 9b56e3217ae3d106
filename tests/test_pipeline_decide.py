"""SPEC §7 step 4 as a table: what a batch does with one comment once it holds the lock."""

from __future__ import annotations

import pytest
from _records import error, record, verdict

from watcher.inbox import fingerprint, finish, reserve
from watcher.models import InboxRecord
from watcher.pipeline import Decision, decide


def _reserved(rec: InboxRecord) -> InboxRecord:
    return reserve(rec, command="scan", entrypoint="cli", provider="offline", model="heuristic-v1", pid=4242)


def _failed(times: int) -> InboxRecord:
    rec = record()
    for _ in range(times):
        rec = finish(_reserved(rec), verdict=None, error=error())
    return rec


def _done() -> InboxRecord:
    return finish(_reserved(_failed(1)), verdict=verdict(), error=None)


NEW, FAILED_1, FAILED_2, EXHAUSTED = record(), _failed(1), _failed(2), _failed(3)
ORPHAN, DONE = _reserved(_failed(1)), _done()

# (command, record as re-read under the lock, record as planned, decision). Each row is one branch
# of decide(), in SPEC order: a verdict first, then an orphan, then a change since planning, then
# the cap, then recheck's "never attempted", else the call.
ROWS: list[tuple[str, InboxRecord, InboxRecord, Decision]] = [
    ("scan", DONE, DONE, "skipped"),
    ("recheck", DONE, FAILED_1, "skipped"),  # a verdict wins even over a changed fingerprint
    ("scan", ORPHAN, FAILED_1, "interrupted"),
    ("recheck", ORPHAN, ORPHAN, "interrupted"),
    ("recheck", FAILED_2, FAILED_1, "deferred"),
    ("scan", FAILED_1, NEW, "deferred"),
    ("recheck", EXHAUSTED, EXHAUSTED, "exhausted"),
    ("recheck", NEW, NEW, "skipped"),  # recheck never makes a first attempt
    ("scan", NEW, NEW, "call"),
    ("recheck", FAILED_1, FAILED_1, "call"),
    ("recheck", FAILED_2, FAILED_2, "call"),
]


@pytest.mark.parametrize(("command", "now", "planned", "expected"), ROWS)
def test_decide_table(command: str, now: InboxRecord, planned: InboxRecord, expected: Decision) -> None:
    """decide() gives the SPEC §7 step-4 answer for every row of the table."""
    assert decide(command, now, fingerprint(planned)) == expected  # type: ignore[arg-type]


def test_every_decision_value_is_reached_by_the_table() -> None:
    """The table covers every value of the Decision Literal, so a new branch needs a new row."""
    assert {row[3] for row in ROWS} == set(Decision.__args__)  # type: ignore[attr-defined]


def test_every_no_call_decision_is_an_outcome_name() -> None:
    """What decide() returns instead of "call" is the item's outcome in the summary (SPEC §7.1)."""
    from watcher.pipeline import Outcome

    assert set(Decision.__args__) - {"call"} <= set(Outcome.__args__)  # type: ignore[attr-defined]
