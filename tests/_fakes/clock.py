"""The suite's two clocks: wall-clock "now" for leases, and monotonic time for pacing.

``later(by)`` is the one way a test moves "now": a :attr:`watcher.pipeline.Hooks.clock` for a
command run in this process (``run_main(..., hooks=Hooks(clock=later(LEASE_END)))``). A process
of its own gets the same clock with ``_proc.run(..., clock_shift=by)``: tests/_faults/sitecustomize.py
gives every Hooks its front end builds this clock.

:class:`FakeClock` is the dev.to client's ``clock``/``sleep`` pair (:func:`watcher.source.fetch_devto`):
time that moves only when the client sleeps, so pacing and back-off are asserted, never waited for.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from watcher.util.timeutil import utcnow

# SPEC §14: a claim's lease is 15 minutes; a run this much later finds every lease ended.
LEASE_END = timedelta(minutes=16)


def later(by: timedelta) -> Callable[[], datetime]:
    """Now, ``by`` ahead of the real clock: the "now" of a run started that much later."""
    return lambda: utcnow() + by


class FakeClock:
    """Monotonic time that moves only when someone sleeps (or a test moves :attr:`now`)."""

    def __init__(self, start: float = 1000.25) -> None:
        # Not on a whole second by default: Forem's rate-limit windows are whole seconds.
        self.now = start
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
