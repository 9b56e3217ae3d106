"""SPEC §7 step 4 as a table: what a batch does with one comment once it holds the lock."""

from __future__ import annotations

from datetime import timedelta

import pytest
from _fakes.records import error, record, verdict

from watcher.models import InboxRecord
from watcher.pipeline import Decision, decide
from watcher.state.records import LEASE, fingerprint, finish, reserve
from watcher.util.timeutil import iso, parse_iso

NOW = parse_iso("2026-05-14T10:00:00Z")


def _reserved(rec: InboxRecord) -> InboxRecord:
    return reserve(rec, command="scan", entrypoint="cli", provider="offline", model="heuristic-v1", pid=4242)


def _claimed(rec: InboxRecord, *, lease_ends_in: timedelta) -> InboxRecord:
    """An agent's claim (SPEC §14) whose lease ends ``lease_ends_in`` after NOW."""
    return reserve(rec, command="claim", entrypoint="bridge", provider="agent", model="agent", pid=4242,
                   lease_until=iso(NOW + lease_ends_in))


def _failed(times: int) -> InboxRecord:
    rec = record()
    for _ in range(times):
        rec = finish(_reserved(rec), verdict=None, error=error())
    return rec


def _done() -> InboxRecord:
    return finish(_reserved(_failed(1)), verdict=verdict(), error=None)


NEW, FAILED_1, FAILED_2, EXHAUSTED = record(), _failed(1), _failed(2), _failed(3)
ORPHAN, DONE = _reserved(_failed(1)), _done()
CLAIMED = _claimed(record(), lease_ends_in=timedelta(minutes=5))  # in flight with an agent
CLAIM_ENDED = _claimed(record(), lease_ends_in=-timedelta(seconds=1))  # lease over, never submitted
CLAIM_AHEAD = _claimed(record(), lease_ends_in=LEASE + timedelta(days=1))  # taken while the clock ran ahead

# (command, record as re-read under the lock, record as planned, decision). Each row is one branch
# of decide(), in SPEC order: a verdict first, then an agent's claim in its lease (§14), then an
# orphan, then a change since planning, then the cap, then recheck's "never attempted", else the call.
ROWS: list[tuple[str, InboxRecord, InboxRecord, Decision]] = [
    ("scan", DONE, DONE, "skipped"),
    ("recheck", DONE, FAILED_1, "skipped"),  # a verdict wins even over a changed fingerprint
    ("scan", ORPHAN, FAILED_1, "interrupted"),
    ("recheck", ORPHAN, ORPHAN, "interrupted"),
    ("recheck", CLAIMED, CLAIMED, "deferred"),  # SPEC §14: in flight elsewhere, not an orphan
    ("scan", CLAIMED, NEW, "deferred"),
    ("claim", CLAIMED, CLAIMED, "deferred"),  # another agent holds it
    ("recheck", CLAIM_ENDED, CLAIM_ENDED, "interrupted"),  # after the lease: an orphan like any
    ("claim", CLAIM_ENDED, CLAIM_ENDED, "interrupted"),
    ("recheck", CLAIM_AHEAD, CLAIM_AHEAD, "interrupted"),  # a lease beyond one LEASE from now does not hold
    ("recheck", FAILED_2, FAILED_1, "deferred"),
    ("scan", FAILED_1, NEW, "deferred"),
    ("recheck", EXHAUSTED, EXHAUSTED, "exhausted"),
    ("recheck", NEW, NEW, "skipped"),  # recheck never makes a first attempt
    ("scan", NEW, NEW, "call"),
    ("recheck", FAILED_1, FAILED_1, "call"),
    ("recheck", FAILED_2, FAILED_2, "call"),
    ("claim", NEW, NEW, "call"),  # claim picks what scan (pending) and recheck (failed) pick
    ("claim", FAILED_2, FAILED_2, "call"),
    ("claim", EXHAUSTED, EXHAUSTED, "exhausted"),
]


@pytest.mark.parametrize(("command", "current", "planned", "expected"), ROWS)
def test_decide_table(command: str, current: InboxRecord, planned: InboxRecord, expected: Decision) -> None:
    """decide() gives the SPEC §7 step-4 answer for every row of the table."""
    assert decide(command, current, fingerprint(planned), now=NOW) == expected  # type: ignore[arg-type]


def test_every_decision_value_is_reached_by_the_table() -> None:
    """The table covers every value of the Decision Literal, so a new branch needs a new row."""
    assert {row[3] for row in ROWS} == set(Decision.__args__)  # type: ignore[attr-defined]


def test_every_no_call_decision_is_an_outcome_name() -> None:
    """What decide() returns instead of "call" is the item's outcome in the summary (SPEC §7.1)."""
    from watcher.pipeline import ItemOutcome

    assert set(Decision.__args__) - {"call"} <= set(ItemOutcome.__args__)  # type: ignore[attr-defined]
