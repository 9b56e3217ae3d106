"""``watcher watch [--every 10m] [--once]`` (SPEC §16.2): ``watcher cron``'s round now, then every
interval, in the foreground, forever — for a terminal, a systemd user service, a launchd agent or a
container, where there is no cron.

- The interval is at least a minute, jittered by ±10 % so that many installs started together do
  not reach dev.to in step, and runs from one round's start to the next's: the wait is what the
  round left of it. A round's own time (the model calls, the sends) does not push every later
  round back, so a comment waits at most one interval for its round (SPEC §16.1's interval +
  10 s; ``python bench/run.py --only reach``), and rounds still start at least 0.9 interval
  apart, since a round that outlasts the interval is followed at once.
- Never two rounds at once: a round holds ``locks/round.lock``; a round that finds it held (another
  ``watch`` of the same data dir) is skipped with one line, and the next interval tries again.
- SIGINT/SIGTERM between rounds end it at once (the wait is an event, not a sleep): exit 130/143.
  During a round they stop it as Ctrl-C stops any command, and a batch is interrupted as §13.6
  says (the attempt in flight recorded as interrupted, the summary printed, 130/143).
- Its stderr lines carry the local time (a journal or a log file shows when each was said).
"""

from __future__ import annotations

import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from types import FrameType
from typing import TextIO

from watcher.errors import (
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    LockBusy,
    UsageError,
    exit_code_for,
)

MIN_EVERY = timedelta(minutes=1)
MAX_EVERY = timedelta(days=1)
DEFAULT_EVERY = "10m"
JITTER = 0.10
_UNITS = {"s": 1, "m": 60, "h": 3600}
_PART = re.compile(r"(\d+)([smh])")


def parse_every(text: str) -> timedelta:
    """``10m``, ``90s``, ``1h``, ``1h30m`` (a bare number is minutes); 1 minute to 1 day, else
    exit 2."""
    raw = text.strip().lower()
    spec = f"{raw}m" if raw.isdigit() else raw
    parts = _PART.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise UsageError(f"--every takes a duration like 10m, 1h or 90s, got {text!r}")
    every = timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))
    if not MIN_EVERY <= every <= MAX_EVERY:
        raise UsageError(
            f"--every must be from 1 minute to 1 day, got {text!r} (dev.to is asked "
            "once a round; more often than a minute only spends its rate limit)"
        )
    return every


class _Signals:
    """SIGINT and SIGTERM for the whole of ``watch``. Between rounds they end the wait at once; in a
    round they stop it as Ctrl-C stops any command (a ``KeyboardInterrupt`` where the round is;
    during a batch the batch's own handlers stand in front of these and do §13.6)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self.in_round = False

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.signum = signum
        self.event.set()
        if self.in_round:
            raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        before = {s: signal.signal(s, self) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for signum, handler in before.items():
                signal.signal(signum, handler)

    @property
    def code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


class Stamped:
    """A text stream that starts each line with the local time (``2026-12-03 14:05:09 ``)."""

    def __init__(self, inner: TextIO, clock: Callable[[], datetime] = datetime.now) -> None:
        self.inner = inner
        self.clock = clock
        self._at_line_start = True

    def write(self, text: str) -> int:
        out = []
        for piece in text.splitlines(keepends=True):
            if self._at_line_start:
                out.append(self.clock().astimezone().strftime("%Y-%m-%d %H:%M:%S "))
            out.append(piece)
            self._at_line_start = piece.endswith("\n")
        self.inner.write("".join(out))
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:
        return self.inner.encoding


def watch(
    run_round: Callable[[], int],
    *,
    every: timedelta,
    once: bool,
    round_lock: Callable[[], AbstractContextManager[None]],
    say: Callable[[str], None],
    jitter: Callable[[], float] = random.random,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], bool] | None = None,
) -> int:
    """Run rounds until a signal ends one, or the wait between two; the exit code (``--once``:
    the round's, else 130/143). ``pause(seconds)`` waits, True when a signal ended the wait
    (default: the signals' event)."""
    signals = _Signals()
    wait_for = pause or signals.event.wait
    with signals.installed():
        while True:
            began = clock()
            code = _one_round(run_round, round_lock, say, signals)
            if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
                # A round stopped by Ctrl-C or SIGTERM (§13.6) ends watch too, with the signal's
                # code: the front end reports an interrupt it caught as Ctrl-C's.
                return signals.code if signals.signum is not None else code
            if once:
                return code
            interval = every.total_seconds() * (1 - JITTER + 2 * JITTER * jitter())
            if wait_for(max(0.0, interval - (clock() - began))):
                return signals.code


def _one_round(
    run_round: Callable[[], int],
    round_lock: Callable[[], AbstractContextManager[None]],
    say: Callable[[str], None],
    signals: _Signals,
) -> int:
    if signals.event.is_set():
        return signals.code
    signals.in_round = True
    try:
        with round_lock():
            return run_round()
    except LockBusy as exc:
        say("watcher watch: another round of this data dir is running; this one is skipped")
        return exit_code_for(exc)
    except KeyboardInterrupt:
        return signals.code
    finally:
        signals.in_round = False


def stamped_stderr() -> Stamped:
    return Stamped(sys.stderr)
