"""SPEC §8 with real processes: concurrent appenders and counters, and counters killed mid-count."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest
from _forkserver import ForkedProcess
from _proc import envelope, run, run_main, script

from watcher.config import Paths
from watcher.models import SignalCursor
from watcher.store import durable, signals

WORKER = Path(__file__).with_name("signals_worker.py")
KEYS = ["verdict.ok", "verdict.error.malformed_json", "item.deferred"]
# Small passes: every counter run makes many state/cursor writes, so kills land between them.
PASS_BYTES = "600"
_FORK = multiprocessing.get_context("fork")


def _spawn(*args: str) -> subprocess.Popen[str] | ForkedProcess:
    return script(WORKER, *args)


def _appender(data_dir: Path, name: str, n: int) -> subprocess.Popen[str] | ForkedProcess:
    return _spawn("append", str(data_dir), name, str(n), *KEYS)


def _counter(data_dir: Path) -> subprocess.Popen[str] | ForkedProcess:
    proc = _spawn("count", str(data_dir), PASS_BYTES)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    return proc


def _finish(proc: subprocess.Popen[str] | ForkedProcess) -> None:
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def _expected(n_per_appender: dict[str, int]) -> Counter[str]:
    """Keys each appender was told to write: KEYS in turn, n lines."""
    expected: Counter[str] = Counter()
    for n in n_per_appender.values():
        for i in range(n):
            expected[KEYS[i % len(KEYS)]] += 1
    return expected


def _log_keys(paths: Paths) -> Counter[str]:
    """Keys as they stand in the log; every line must be a whole, valid record."""
    lines = paths.observations.read_bytes().split(b"\n")
    assert lines[-1] == b""
    return Counter(json.loads(line)["key"] for line in lines[:-1])


@pytest.mark.slow
def test_four_appenders_and_two_counters_count_every_line_exactly_once(paths: Paths) -> None:
    """4 appender and 2 counter processes at once: final counts equal the lines per key."""
    written = {f"a{i}": 120 for i in range(4)}
    counters = [_counter(paths.root) for _ in range(2)]
    appenders = [_appender(paths.root, name, n) for name, n in written.items()]
    for proc in appenders:
        _finish(proc)
    (paths.root / "stop").touch()
    for proc in counters:
        _finish(proc)

    result = signals.run_counter(paths)

    # The concurrent counters did the counting; this run only mops up (else the test proves nothing).
    assert result.new_lines < sum(written.values())

    assert _log_keys(paths) == _expected(written)
    assert Counter(result.counts) == _expected(written)
    assert result.invalid == 0
    cursor = durable.read_model(paths.signals_cursor, SignalCursor, quarantine_dir=paths.quarantine)
    assert cursor is not None and result.applied == cursor.offset == paths.observations.stat().st_size


def _count_forever(data_dir: Path, ready: Connection) -> None:
    """Forked counter: lower PASS_BYTES in this process only, say ready, count until killed."""
    signals.PASS_BYTES = int(PASS_BYTES)
    ready.send("ready")
    paths = Paths(data_dir)
    while True:
        signals.run_counter(paths)


def _append_until(data_dir: Path, stop: Event, report: Connection) -> None:
    """Forked appender: 1–3 lines per call, keys in turn, until told to stop; report the total."""
    paths = Paths(data_dir)
    written = 0
    while not stop.is_set():
        size = 1 + written % 3
        signals.append(paths, [{"key": KEYS[(written + i) % len(KEYS)], "run": "bg"} for i in range(size)])
        written += size
        time.sleep(0.001)
    report.send(written)


def _fork(target: Callable[..., None], *args: object) -> multiprocessing.process.BaseProcess:
    # fork, not spawn: a fresh interpreter takes ~0.5 s to import pydantic, and this test
    # starts 50 counters; a forked child is just as real a process for SIGKILL and flock.
    proc = _FORK.Process(target=target, args=args, daemon=True)
    proc.start()
    return proc


def _forked_counter(data_dir: Path) -> multiprocessing.process.BaseProcess:
    ours, theirs = _FORK.Pipe()
    proc = _fork(_count_forever, data_dir, theirs)
    assert ours.poll(30) and ours.recv() == "ready"
    return proc


@pytest.mark.slow
def test_counters_killed_at_random_moments_never_lose_or_double_count(paths: Paths) -> None:
    """25 rounds of 2 counters SIGKILLed at random moments while lines arrive: counts stay exact."""
    rng = random.Random(6)
    signals.append(paths, [{"key": KEYS[i % len(KEYS)], "run": "pre"} for i in range(300)])
    stop, (ours, theirs) = _FORK.Event(), _FORK.Pipe()
    appender = _fork(_append_until, paths.root, stop, theirs)
    for _ in range(25):
        counters = [_forked_counter(paths.root) for _ in range(2)]
        time.sleep(rng.uniform(0.0, 0.03))
        for proc in counters:
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(30)
            assert proc.exitcode == -signal.SIGKILL
    stop.set()
    assert ours.poll(30)
    written = {"pre": 300, "bg": ours.recv()}
    appender.join(30)
    # The killed counters must have saved counts, or the clean run below would pass on its own.
    killed_state = signals.read_state(paths)
    assert killed_state is not None and killed_state.applied > 0

    result = signals.run_counter(paths)

    assert _log_keys(paths) == _expected(written)
    assert Counter(result.counts) == _expected(written)
    assert result.invalid == 0
    assert signals.run_counter(paths).new_lines == 0


@pytest.mark.parametrize("copy", ["copytree", "cp -a"])
def test_a_counter_killed_between_state_and_cursor_then_copied_counts_each_line_once(
        paths: Paths, tmp_path: Path, copy: str) -> None:
    """SIGKILL after the state write, before the cursor's; copy the dir: the copy replays the
    counted lines without counting them again and counts the new ones once (SPEC §8, §13.5)."""
    signals.append(paths, [{"key": KEYS[i % len(KEYS)], "run": "pre"} for i in range(7)])
    killed = run("cli", "signals", "--json", data_dir=paths.root, fault="kill_at=counter_after_state")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    state = signals.read_state(paths)
    cursor = durable.read_model(paths.signals_cursor, SignalCursor, quarantine_dir=paths.quarantine)
    assert state is not None and state.applied == paths.observations.stat().st_size and cursor is None

    dest = Paths(tmp_path / "data2")
    if copy == "copytree":
        shutil.copytree(paths.root, dest.root)
    else:
        subprocess.run(["cp", "-a", str(paths.root), str(dest.root)], check=True)
    assert dest.observations.stat().st_ino != paths.observations.stat().st_ino
    signals.append(dest, [{"key": KEYS[i % len(KEYS)], "run": "post"} for i in range(5)])
    done = run_main("cli", "signals", "--json", data_dir=dest.root)  # the copy's count: no process needed
    assert done.returncode == 0, done.stderr

    result = envelope(done)["result"]
    assert (result["new_lines"], Counter(result["counts"])) == (5, _log_keys(dest))
    assert _log_keys(dest) == _expected({"pre": 7, "post": 5})
