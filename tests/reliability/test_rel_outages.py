"""Provider outages in the rig (SPEC §16.6): every kind of tests/_outage.py, with ``--parallel`` 1, 4
and 8, three hours of cron rounds (every 30 minutes, ``scan`` then ``recheck``, the injected clock)
and then an hour with the provider answering.

Every promise the rig checks from disk and the call log holds — but those that tell runs apart by
their pid (one call per comment per run, a setup stop is a run's last call), since these runs share
this process: tests/test_outage.py holds those from the call log round by round — and so does the
outage's own: one outage, at most one counted attempt per stop plus the half-open
calls, and no comment more than one; when it ends, every comment gets its verdict. The runs count
as soak operations in the rig's closing line.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _outage import KINDS, TRANSIENT, cron, play
from _rel_harness import TALLY
from _rel_invariants import (
    call_budget,
    edits_consistent,
    index_follows_inbox,
    no_open_reservation,
    quarantine_empty,
    raw_kept,
    records,
    signals_match_log,
    verdicts_final,
)

OUTAGE = timedelta(hours=3)
COMMENTS = 8


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [1, 4, 8])
@pytest.mark.parametrize("kind", KINDS)
def test_an_outage_in_the_rig_breaks_no_promise(tmp_path: Path, kind: str, parallel: int) -> None:
    """Three hours of one outage, then an hour of answers: no promise broken, no comment spent
    twice in the outage, none exhausted, every one judged at the end."""
    schedule = cron(OUTAGE.total_seconds() / 3600 + 1.0)
    with running_fake() as fake:
        played = play(tmp_path, fake, kind, parallel=parallel, schedule=schedule,
                      outage_until=OUTAGE, comments=COMMENTS)
        calls = list(fake.calls)
    data = tmp_path / "data"
    recs = records(data)
    found = call_budget(recs, calls) + verdicts_final(recs, calls, None) + edits_consistent(recs)
    found += raw_kept(recs) + no_open_reservation(recs) + index_follows_inbox(data, recs)
    found += signals_match_log(data) + quarantine_empty(data)
    rounds = sum(1 for r in played.rounds if r.at < OUTAGE)
    first = 2 if kind in TRANSIENT else 1
    spent = sum(played.in_outage.values())
    if spent > first + rounds - 1:
        found.append(f"{spent} attempts in {rounds} rounds of outage: more than a stop and half-opens")
    found += [f"{cid} spent {n} attempts in one outage" for cid, n in played.in_outage.items() if n > 1]
    if played.verdicts != COMMENTS:
        found.append(f"an hour after the outage {played.verdicts} of {COMMENTS} comments judged")
    TALLY.add("soak_ops", 2 * len(played.rounds), [f"outage {kind} × {parallel}: {v}" for v in found])
    assert found == []
