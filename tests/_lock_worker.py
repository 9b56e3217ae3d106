"""Subprocess worker for test_locks: a process of its own holding or waiting for the pipeline lock.

    python _lock_worker.py hold DATA_DIR HELD_FILE      take the pipeline lock, touch HELD_FILE, sleep
    python _lock_worker.py try DATA_DIR BUDGET_S [TIMEOUT_S ...]
        one store whose lock waits share BUDGET_S seconds (SPEC §16.3) tries the pipeline lock once
        per TIMEOUT_S given (once, with no timeout of its own, if none is); prints one JSON line per
        try and exits 4 if the last one was busy, else 0
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from watcher.config import Paths
from watcher.errors import LockBusy, exit_code_for
from watcher.store.files import FileStore


def hold(paths: Paths, held: Path) -> None:
    with FileStore(paths).pipeline_lock():
        held.touch()
        time.sleep(600)  # until SIGKILLed: the kernel releases the lock, nobody deletes the file


def attempt(paths: Paths, budget: float, timeouts: list[float | None]) -> int:
    store = FileStore(paths, lock_wait=budget)
    code = 0
    for timeout in timeouts:
        started = time.monotonic()
        try:
            with store.pipeline_lock(timeout=timeout):
                report: dict[str, object] = {"acquired": True}
                code = 0
        except LockBusy as exc:
            report = {"acquired": False, "message": str(exc), "waited_s": exc.waited_s}
            code = exit_code_for(exc)
        print(json.dumps({**report, "elapsed": time.monotonic() - started}), flush=True)
    return code


if __name__ == "__main__":
    mode, data = sys.argv[1], Paths(Path(sys.argv[2]))
    if mode == "hold":
        hold(data, Path(sys.argv[3]))
    else:
        timeouts: list[float | None] = [float(t) for t in sys.argv[4:]] or [None]
        sys.exit(attempt(data, float(sys.argv[3]), timeouts))
