"""Subprocess worker for test_locks.

    python _lock_worker.py hold DATA_DIR HELD_FILE   take the pipeline lock, touch HELD_FILE, sleep
    python _lock_worker.py try DATA_DIR WAIT_S       try the pipeline lock (waiting at most WAIT_S, set
                                                     as the module's wait); print JSON, exit 4 or 0
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from watcher.config import Paths
from watcher.errors import LockBusy, exit_code_for
from watcher.store import locks
from watcher.store.files import FileStore


def hold(paths: Paths, held: Path) -> None:
    with FileStore(paths).pipeline_lock():
        held.touch()
        time.sleep(600)  # until SIGKILLed: the kernel releases the lock, nobody deletes the file


def attempt(paths: Paths) -> int:
    started = time.monotonic()
    try:
        with FileStore(paths).pipeline_lock():
            report = {"acquired": True, "elapsed": time.monotonic() - started}
            code = 0
    except LockBusy as exc:
        report = {"acquired": False, "elapsed": time.monotonic() - started, "message": str(exc),
                  "waited_s": exc.waited_s}
        code = exit_code_for(exc)
    print(json.dumps(report))
    return code


if __name__ == "__main__":
    mode, data = sys.argv[1], Paths(Path(sys.argv[2]))
    if mode == "hold":
        hold(data, Path(sys.argv[3]))
    else:
        locks.PIPELINE_WAIT_S = float(sys.argv[3])  # read by FileStore.pipeline_lock at call time
        sys.exit(attempt(data))
