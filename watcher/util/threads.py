"""watcher's own helper threads, which never take SIGINT or SIGTERM (SPEC §13.6).

A signal sent to the process goes to any one of its threads that does not block it. Python runs
its handler on the main thread, but only once that thread next runs: a main thread blocked in a
model call's ``recv`` is not woken when the kernel hands the signal to the deadline thread. Ctrl-C
or SIGTERM during a call then did nothing until the call's deadline, 30 s later by default: 3 of
300 signalled scans under two CPU hogs hung so, and a CI run of tests/test_state_touched.py timed
out. A thread started here blocks both from its first instruction, so the kernel gives them to the
main thread, and its ``recv`` returns at once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

# Windows has no per-thread signal mask, and delivers SIGINT on a thread of its own anyway.
_MASKABLE = hasattr(signal, "pthread_sigmask")
_STOPS = {signal.SIGINT, signal.SIGTERM}


def start_daemon(
    target: Callable[..., Any], *, name: str, args: tuple[Any, ...] = ()
) -> threading.Thread:
    """Start a daemon thread that blocks SIGINT and SIGTERM.

    The mask is set here, around the start: a new thread inherits its creator's, so there is no
    moment at which it can take one of them."""
    thread = threading.Thread(target=target, args=args, name=name, daemon=True)
    if not _MASKABLE:
        thread.start()
        return thread
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return thread
