"""``watcher watch`` (SPEC §16.2): the interval it takes, the jitter, the one-round-at-a-time lock,
and stderr lines that carry their time."""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from watcher.commands.watch import Stamped, parse_every, watch
from watcher.config import Paths
from watcher.errors import UsageError
from watcher.notify.check import check_targets
from watcher.notify.targets import parse_targets
from watcher.store.outbox import round_lock


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("1h", 3600), ("90s", 90),
                                               ("1h30m", 5400), ("5", 300)])
def test_every_takes_durations(text: str, seconds: int) -> None:
    """Minutes, hours, seconds, combined; a bare number is minutes."""
    assert parse_every(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["30s", "59s", "2d", "ten", "10x", ""])
def test_every_below_a_minute_or_unreadable_is_refused(text: str) -> None:
    """Under a minute, over a day, or not a duration: a usage error (exit 2)."""
    with pytest.raises(UsageError):
        parse_every(text)


def test_stamped_lines_start_with_the_time() -> None:
    """Every line, also one written in pieces, starts with the local time once."""
    out = io.StringIO()
    stream = Stamped(out, clock=lambda: datetime(2026, 12, 3, 14, 5, 9).astimezone())
    stream.write("first ")
    stream.write("line\nsecond line\n")
    assert out.getvalue() == "2026-12-03 14:05:09 first line\n2026-12-03 14:05:09 second line\n"


def test_once_returns_the_rounds_code() -> None:
    """``--once``: one round, its exit code."""
    rounds: list[int] = []

    @contextmanager
    def free() -> Iterator[None]:
        yield

    code = watch(lambda: rounds.append(1) or 3, every=timedelta(minutes=1), once=True,
                 round_lock=free, say=print)
    assert (code, rounds) == (3, [1])


def test_a_round_while_another_holds_the_lock_is_skipped(tmp_path: Path) -> None:
    """Never two rounds at once: with round.lock held elsewhere, the round does not run (exit 4)."""
    paths = Paths(tmp_path)
    said: list[str] = []
    with round_lock(paths):
        code = watch(lambda: 0, every=timedelta(minutes=1), once=True,
                     round_lock=lambda: round_lock(paths), say=said.append)
    assert code == 4 and "another round" in said[0]


def test_check_names_each_target_redacted_without_sending() -> None:
    """A URL Apprise understands passes, one it does not fails; neither shows its secret."""
    rows = check_targets(parse_targets("json://u:pw0rdSecret@127.0.0.1:1/x nosuchservice://pw0rdSecret"))
    assert [r.ok for r in rows] == [True, False]
    assert [r.name for r in rows] == ["notify #1", "notify #2"]
    assert all("pw0rdSecret" not in r.detail + r.fix for r in rows)


def test_check_has_no_notify_row_without_targets() -> None:
    """WATCHER_NOTIFY unset: check's rows stay those it always had."""
    assert check_targets(()) == []


@contextmanager
def _free() -> Iterator[None]:
    yield


def test_a_signal_between_rounds_ends_the_wait_at_once() -> None:
    """SIGTERM after a round, with an hour to wait: watch returns 143 without a second round."""
    import os
    import signal

    rounds: list[int] = []

    def signal_then_jitter() -> float:
        os.kill(os.getpid(), signal.SIGTERM)
        return 0.5

    code = watch(lambda: rounds.append(1) or 0, every=timedelta(hours=1), once=False,
                 round_lock=_free, say=print, jitter=signal_then_jitter)
    assert (code, rounds) == (143, [1])


def test_a_signal_during_a_round_ends_watch() -> None:
    """SIGINT inside a round stops it where it is; watch exits 130 and runs no other round."""
    import os
    import signal

    reached: list[str] = []

    def round_interrupted() -> int:
        reached.append("start")
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after")  # never: the handler raised where the round was
        return 0

    code = watch(round_interrupted, every=timedelta(minutes=1), once=False, round_lock=_free,
                 say=print)
    assert (code, reached) == (130, ["start"])


def test_the_interval_runs_from_one_rounds_start_to_the_next() -> None:
    """A 1-minute interval after a 20 s round waits 40 s; after a 70 s round, nothing."""
    now = [0.0]
    took = [20.0, 70.0]
    waits: list[float] = []

    def round_taking_time() -> int:
        now[0] += took[len(waits)]
        return 0

    def pause(seconds: float) -> bool:
        waits.append(seconds)
        now[0] += seconds
        return len(waits) == len(took)  # as a signal would: the wait ends watch

    watch(round_taking_time, every=timedelta(minutes=1), once=False, round_lock=_free, say=print,
          jitter=lambda: 0.5, clock=lambda: now[0], pause=pause)
    assert waits == [40.0, 0.0]
