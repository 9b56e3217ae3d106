"""The signal counter after a long history: what every run pays at its end (SPEC §8).

Counting 100 new lines after 200 MB of already-counted observation log versus after 1 MB.
Target ≤ 2×: the cost must follow the new bytes, not the log's size, or every cron run of an
account with years of history slows down.

Setup (not measured): each log is written in one big write of realistic signal lines and
counted once from zero (that first count's throughput is in the notes: a one-off cost, paid
once per data dir). Then rounds alternate between the two data dirs: append 100 lines with
``watcher.store.signals.append`` (one write, as a run does), time one ``run_counter``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from _common import Row, cid, median, ms, temp_dir, timed

from watcher.config import Paths
from watcher.store import signals

KEYS = (
    "verdict.ok",
    "verdict.ok",
    "verdict.ok",
    "verdict.error.malformed_json",
    "verdict.error.overloaded",
    "item.deferred",
    "state.repaired",
    "attempt.interrupted",
)


def _lines(count: int) -> bytes:
    out = []
    for i in range(count):
        record = {
            "ts": f"2026-05-14T09:{(i // 60) % 60:02d}:{i % 60:02d}.123456Z",
            "key": KEYS[i % len(KEYS)],
            "comment": cid(i),
            "run": f"6a41c2{i % 4096:03x}e1f2c3",
            "entrypoint": ("cli", "bridge")[i % 2],
        }
        out.append(json.dumps(record, separators=(",", ":")) + "\n")
    return "".join(out).encode()


def write_log(path: Path, size: int) -> int:
    """About ``size`` bytes of signal lines in one write, flushed; returns the line count."""
    block = _lines(4096)
    copies = max(1, size // len(block))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(block * copies)
        fh.flush()
        os.fsync(fh.fileno())  # a months-old log is on disk; keep this writeback out of the counts
    return 4096 * copies


def _count_new(paths: Paths, round_: int) -> float:
    """Append 100 lines (one write, as a run does), then time one counter run over them."""
    lines = [
        {"key": "verdict.ok", "comment": cid(round_ * 100 + i), "run": "bench", "entrypoint": "cli"}
        for i in range(100)
    ]
    signals.append(paths, lines)
    result = None

    def count() -> None:
        nonlocal result
        result = signals.run_counter(paths)

    took = timed(count)
    if result is None or result.new_lines != 100:
        raise RuntimeError(f"expected 100 new lines, counted {result}")
    return took


def run(base: Path | None, *, quick: bool) -> list[Row]:
    big, small, reps = (20 << 20, 1 << 20, 7) if quick else (200 << 20, 1 << 20, 15)
    with temp_dir(base, "signals-big") as big_root, temp_dir(base, "signals-small") as small_root:
        big_paths, small_paths = Paths(big_root), Paths(small_root)
        lines = write_log(big_paths.observations, big)
        first = timed(lambda: signals.run_counter(big_paths))  # puts the watermark at the end
        write_log(small_paths.observations, small)
        signals.run_counter(small_paths)
        tail_big, tail_small = [], []
        for r in range(reps):  # alternating, so drift on the shared disk hits both alike
            tail_big.append(_count_new(big_paths, r))
            tail_small.append(_count_new(small_paths, r))
    after_big, after_small = median(tail_big), median(tail_small)
    size_mb = big / (1 << 20)
    ratio = after_big / after_small
    notes = [
        f"medians of {reps} alternating rounds: append 100 lines (one write), then run_counter",
        (
            f"the first count of the {size_mb:.0f} MB log ({lines:,} lines) from zero took "
            f"{ms(first)} ({size_mb / first:.0f} MB/s), once per data dir"
        ),
    ]
    return [
        Row(
            "signals",
            f"count 100 new lines after {size_mb:.0f} MB of history vs after 1 MB",
            ms(after_big),
            f"{ms(after_small)} (after 1 MB)",
            ratio,
            "≤ 2.00×",
            ratio <= 2.0,
            notes,
        )
    ]
