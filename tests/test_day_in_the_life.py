"""SPEC §15.2, "done when": an account left running for a day — after every cron round the inbox
lists exactly the comments that still need a reply (precision and recall 1.0), and no comment has
more than 3 + grants attempts. The script and its truth are in tests/_day.py.

The quick lane plays a short morning (8 rounds, the outage in it); ``WATCHER_DAY=long`` (or
``WATCHER_RELIABILITY=long``) plays the whole day, 48 rounds of half an hour, and prints its figures.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _day import play_day
from _mirror import world

LONG = os.environ.get("WATCHER_DAY") == "long" or os.environ.get("WATCHER_RELIABILITY") == "long"


def _play(tmp_path: Path, *, rounds: int, seed: int, outage_round: int) -> None:
    with world(tmp_path) as w:
        figures = play_day(w, rounds=rounds, seed=seed, outage_round=outage_round)
    print(figures.line())
    assert not figures.mismatches, "\n".join(figures.mismatches[:20])
    assert (figures.precision, figures.recall) == (1.0, 1.0)
    assert figures.max_attempts <= 3
    assert figures.comments and figures.edits and figures.deletions + figures.hidden and figures.author_replies


def test_a_morning_of_cron_rounds_keeps_the_inbox_true(tmp_path: Path) -> None:
    """8 rounds with new comments, edits, deletions, hiding, the author's replies, marks and a
    provider outage: after each, `inbox --json` is the truth and no comment passes its budget."""
    _play(tmp_path, rounds=8, seed=11, outage_round=4)


@pytest.mark.skipif(not LONG, reason="the whole day: WATCHER_DAY=long (or WATCHER_RELIABILITY=long)")
def test_a_whole_day_of_cron_rounds_keeps_the_inbox_true(tmp_path: Path) -> None:
    """48 rounds (a day of half-hour cron runs): the inbox is the truth after every one."""
    _play(tmp_path, rounds=48, seed=2026, outage_round=21)
