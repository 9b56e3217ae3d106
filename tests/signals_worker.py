"""Test-only worker process for tests/test_signals_processes.py (not collected by pytest).

    python signals_worker.py append DATA_DIR NAME N KEY [KEY ...]
        append N signal lines (1–3 per call, keys taken in turn) and exit 0
    python signals_worker.py count DATA_DIR PASS_BYTES
        print "ready", then run the counter over and over until DATA_DIR/stop exists (or SIGKILL)

PASS_BYTES is handed to the counter (its ``pass_bytes``), so each run makes many state and cursor
writes and a kill is likely to land between them.
"""

from __future__ import annotations

import itertools
import random
import sys
from pathlib import Path

from watcher.config import Paths
from watcher.store import signals


def append(data_dir: Path, name: str, n: int, keys: list[str]) -> None:
    paths = Paths(data_dir)
    cycle = itertools.cycle(keys)
    done = 0
    while done < n:
        size = min(random.randint(1, 3), n - done)
        events = [
            {"key": next(cycle), "comment": f"{name}{done + i}", "run": name, "entrypoint": "cli"}
            for i in range(size)
        ]
        signals.append(paths, events)
        done += size


def count(data_dir: Path, pass_bytes: int) -> None:
    paths = Paths(data_dir)
    print("ready", flush=True)
    while not (data_dir / "stop").exists():
        signals.run_counter(paths, pass_bytes=pass_bytes)


def main(argv: list[str]) -> None:
    mode, data_dir = argv[0], Path(argv[1])
    if mode == "append":
        append(data_dir, argv[2], int(argv[3]), argv[4:])
    elif mode == "count":
        count(data_dir, int(argv[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
