"""Figure 4: the signal counter — throughput, and the cost of new lines after a long history.

Throughput floor: a bare loop that reads the same log line by line and ``json.loads`` each
line (no counting, no state, no durability). Target: the counter reaches ≥ 0.5× its throughput.

History: counting 100 new lines after 200 MB of already-counted log versus after 1 MB.
Target ≤ 2×: the cost must follow the new bytes, not the log's size.

Setup (not measured): the log is written with one big write of realistic signal lines; the
first full count of it is the throughput measurement and leaves the watermark at the end.
The 100 new lines are appended with ``watcher.store.signals.append`` (one write, as a run does).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from _common import Row, cid, median, ms, temp_dir, timed

from watcher.config import Paths
from watcher.store import signals

KEYS = ("verdict.ok", "verdict.ok", "verdict.ok", "verdict.error.malformed_json", "verdict.error.overloaded",
        "item.deferred", "state.repaired", "attempt.interrupted")


def _lines(count: int) -> bytes:
    out = []
    for i in range(count):
        record = {"ts": f"2026-05-14T09:{(i // 60) % 60:02d}:{i % 60:02d}.123456Z", "key": KEYS[i % len(KEYS)],
                  "comment": cid(i), "run": f"6a41c2{i % 4096:03x}e1f2c3", "entrypoint": ("cli", "bridge")[i % 2]}
        out.append(json.dumps(record, separators=(",", ":")) + "\n")
    return "".join(out).encode()


def write_log(path: Path, size: int) -> int:
    """About ``size`` bytes of signal lines in one write; returns the line count."""
    block = _lines(4096)
    copies = max(1, size // len(block))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(block * copies)
        # A real log of this size was written over months and is long on disk; flushing it here
        # keeps that one-off writeback out of the measured first count.
        fh.flush()
        os.fsync(fh.fileno())
    return 4096 * copies


def bare_loop(path: Path) -> int:
    """The floor: read every line and parse it, nothing else."""
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            json.loads(line)
            n += 1
    return n


def _append_100(paths: Paths, round_: int) -> None:
    signals.append(paths, [{"key": "verdict.ok", "comment": cid(round_ * 100 + i), "run": "bench", "entrypoint": "cli"}
                           for i in range(100)])


def _count_new(paths: Paths, round_: int) -> float:
    """Append 100 lines (one write, as a run does), then time one counter run over them."""
    _append_100(paths, round_)
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
        first_big = timed(lambda: signals.run_counter(big_paths))  # also puts the watermark at the end
        # The same bytes, page cache as warm as it was for the counter.
        bare = median([timed(lambda: bare_loop(big_paths.observations)) for _ in range(2)])
        write_log(small_paths.observations, small)
        signals.run_counter(small_paths)
        # Rounds alternate between the two logs, so fsync drift on the shared disk hits both alike.
        tail_big, tail_small = [], []
        for r in range(reps):
            tail_big.append(_count_new(big_paths, r))
            tail_small.append(_count_new(small_paths, r))
        state = signals.read_state(big_paths)
        counted = sum(state.counts.values()) + state.invalid if state else 0
    tail_big_m, tail_small_m = median(tail_big), median(tail_small)
    size_mb = big / (1 << 20)
    throughput = bare / first_big  # counter throughput as a fraction of the bare loop's
    passes = big // signals.PASS_BYTES
    rows = [
        Row("4a", f"counter throughput over {size_mb:.0f} MB ({lines:,} lines), first count from zero",
            f"{ms(first_big)} ({size_mb / first_big:.0f} MB/s)", f"{ms(bare)} bare read+json.loads "
            f"({size_mb / bare:.0f} MB/s)", throughput, "≥ 0.50× the bare loop's throughput", throughput >= 0.5,
            [(f"ratio is counter throughput / bare-loop throughput; counted {counted:,} lines "
             f"(+{reps * 100} appended later) in about {passes} durable state updates "
             f"(one per {signals.PASS_BYTES >> 20} MB pass, each a state + cursor write)")]),
        Row("4b", f"count 100 new lines after {size_mb:.0f} MB of history vs after 1 MB",
            ms(tail_big_m), f"{ms(tail_small_m)} (after 1 MB)", tail_big_m / tail_small_m, "≤ 2.00×",
            tail_big_m / tail_small_m <= 2.0,
            [(f"medians of {reps} alternating rounds, each: append 100 lines (one write), then run_counter; "
             "cost = two guarded reads, identity check (stat + first-line hash), the new bytes, two durable writes")]),
    ]
    return rows
