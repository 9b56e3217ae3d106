"""SPEC §15.2, "done when": an account left running for a day — after every cron round the inbox
lists exactly the comments that still need a reply (precision and recall 1.0), and no comment has
more than 3 + grants attempts; and SPEC §16.1: each round runs ``watcher cron`` with
``WATCHER_NOTIFY`` at a real HTTP receiver on loopback, and every comment that needs a reply and
whose verdict says so reaches it by the end of that round, exactly once over the day, nothing else
reaching it. The script and its truth are in tests/_day.py.

The quick lane plays a short morning (8 rounds, the outage in it) and 30 rounds of outages;
``WATCHER_DAY=long`` (or ``WATCHER_RELIABILITY=long``) plays the whole day, 48 rounds of half an
hour, and prints its figures.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest
from _day import play_day
from _mirror import world

LONG = os.environ.get("WATCHER_DAY") == "long" or os.environ.get("WATCHER_RELIABILITY") == "long"


def _play(
    tmp_path: Path,
    *,
    rounds: int,
    seed: int,
    outage_round: int = 0,
    parallel: int = 1,
    outages: Mapping[int, str] | None = None,
) -> None:
    with world(tmp_path) as w:
        figures = play_day(
            w,
            rounds=rounds,
            seed=seed,
            outage_round=outage_round,
            parallel=parallel,
            outages=outages,
        )
        exhausted = _exhausted(w.data_dir)
    print(figures.line())
    assert exhausted == [], exhausted
    assert not figures.mismatches, "\n".join(figures.mismatches[:20])
    assert (figures.precision, figures.recall) == (1.0, 1.0)
    assert figures.max_attempts <= 3
    assert (
        figures.comments
        and figures.edits
        and figures.deletions + figures.hidden
        and figures.author_replies
    )
    assert figures.notified, "no comment reached the receiver: the delivery check checked nothing"


def test_a_morning_of_cron_rounds_keeps_the_inbox_true(tmp_path: Path) -> None:
    """8 rounds with new comments, edits, deletions, hiding, the author's replies, marks and a
    provider outage: after each, `inbox --json` is the truth, no comment passes its budget, and
    what needs a reply has reached the receiver, once."""
    _play(tmp_path, rounds=8, seed=11, outage_round=4)


# Every kind of outage of SPEC §16.6, two cron rounds each (the models endpoint says yes all along).
OUTAGES = {
    3: "refused",
    4: "refused",
    6: "401",
    7: "401",
    9: "429",
    10: "429",
    12: "429-none",
    13: "429-none",
    15: "500",
    16: "500",
    18: "503",
    19: "503",
    21: "529",
    22: "529",
    24: "hang",
    25: "hang",
    27: "drop",
    28: "drop",
}


def test_a_day_of_outages_with_parallel_calls_exhausts_no_comment(tmp_path: Path) -> None:
    """30 rounds with 4 calls in parallel and nine kinds of outage, two rounds each: the inbox is
    the truth after every round, no comment's attempts are spent by an outage (SPEC §16.6), and
    what needs a reply reaches the receiver in its round, outage or not, once."""
    _play(tmp_path, rounds=30, seed=16, parallel=4, outages=OUTAGES)


def _exhausted(data_dir: Path) -> list[str]:
    """The comments whose attempts are all spent without a verdict: here only failures spend
    attempts without one, and every failure is an outage's."""
    spent = []
    for path in (data_dir / "inbox").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        cap = 3 + sum(g["n"] for g in record.get("grants", []))
        counted = sum(1 for a in record["attempts"] if not a.get("not_sent"))
        if record.get("verdict") is None and counted >= cap:
            spent.append(path.stem)
    return spent


@pytest.mark.skipif(
    not LONG, reason="the whole day: WATCHER_DAY=long (or WATCHER_RELIABILITY=long)"
)
def test_a_whole_day_of_cron_rounds_keeps_the_inbox_true(tmp_path: Path) -> None:
    """48 rounds (a day of half-hour cron runs): the inbox is the truth after every one, and what
    needs a reply reached the receiver, once."""
    _play(tmp_path, rounds=48, seed=2026, outage_round=21)
