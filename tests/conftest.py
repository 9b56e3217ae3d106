"""Shared fixtures: every test runs against a fresh temporary data dir and sees no real keys."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from watcher.config import Paths


def _fast_temp_root() -> str | None:
    """A RAM-backed directory for every test's files, or ``None`` to keep the system's.

    The suite writes and deletes tens of thousands of small state files; on this project's CI disk
    (ext4 mounted with ``discard``) a write + fsync + directory fsync costs 0.78 ms and an unlink
    0.28 ms, against 0.02 ms on tmpfs (measured 2026-12-01), and pytest's clean-up of an earlier
    run's temp dirs took 7 s of one run. The tests check what the watcher writes and in which
    order, not how fast a disk flushes: the fault rig counts the durable operations themselves and
    the power-loss rig replays them (tests/README.md). ``WATCHER_TESTS_TMP`` names another place
    (``system``: the system's own).
    """
    chosen = os.environ.get("WATCHER_TESTS_TMP", "")
    if chosen:
        return None if chosen == "system" else chosen
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            tmpfs = any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts)
        room = os.statvfs("/dev/shm")
        roomy = room.f_bavail * room.f_frsize > 2 << 30
    except OSError:
        return None
    return "/dev/shm" if tmpfs and roomy and os.access("/dev/shm", os.W_OK) else None


# Before pytest makes its temp root (tempfile.gettempdir(), on first use) and before xdist starts
# its workers, which inherit the variable, as do the processes the tests start.
if (_root := _fast_temp_root()) is not None:
    os.environ["TMPDIR"] = _root
    tempfile.tempdir = None


# Variables that would let a test reach real data or real keys if inherited from the shell.
_PREFIXES = ("WATCHER_", "DEVTO_")
_EXACT = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Clear WATCHER_*/DEVTO_*/provider keys and point WATCHER_DATA_DIR at a fresh tmp dir, and
    XDG_DATA_HOME at another: the default data dir (the user's, SPEC §15.5) is then inside tmp_path
    too, for this process and every process it starts, so a test of the default never reaches the
    real one."""
    for name in list(os.environ):
        if name.startswith(_PREFIXES) or name in _EXACT:
            monkeypatch.delenv(name, raising=False)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("WATCHER_DATA_DIR", str(data))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    # The working directory too: ./data and the demo's ./data/demo then resolve inside tmp_path,
    # for this process and every subprocess it starts, so no test can touch the checkout's data/.
    monkeypatch.chdir(tmp_path)
    yield data


@pytest.fixture
def data_dir(isolated_env: Path) -> Path:
    """The fresh data dir WATCHER_DATA_DIR points at (exists, empty)."""
    return isolated_env


@pytest.fixture
def paths(data_dir: Path) -> Paths:
    """``Paths`` of the fresh data dir."""
    return Paths(data_dir)


# ---- collection: keep pytest's rewritten test modules -------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
        collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Let pytest cache the test modules it rewrites for assertions, even under PYTHONDONTWRITEBYTECODE.

    Some sandboxes set PYTHONDONTWRITEBYTECODE=1, which also stops pytest keeping its rewritten
    copies (tests/__pycache__/*-pytest-*.pyc): every xdist worker then rewrote each test module
    changed since the last cached copy, on every run (all of them: ~3.5 s of CPU a worker, before
    its first test). Only while a test module is collected; the processes tests start still
    inherit the variable.
    """
    if not isinstance(collector, pytest.Module):
        return (yield)
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, False
    try:
        return (yield)
    finally:
        sys.dont_write_bytecode = saved


# ---- order: the tests that wait on real processes first ---------------------------------------------


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Start the ``slow`` tests (real processes, seconds of waiting each) first, keeping the order
    within each group. xdist hands out tests in collection order: waits met at the start overlap
    the in-process tests' CPU on the other workers, while the same waits collected last left
    cores idle at the end of the run. Every worker collects the same order, as xdist requires.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# ---- the code the tests' processes run, compiled once ---------------------------------------------


def pytest_configure(config: pytest.Config) -> None:
    """Compile watcher/, bridge/ and the fault hooks to bytecode once, before any test starts one.

    Under PYTHONDONTWRITEBYTECODE=1 (some sandboxes and CI images set it) nothing writes
    ``__pycache__``, so in a fresh clone every ``watcher`` process the suite starts (~300) would
    compile each module it imports that no test module imported at collection, again. Reading
    bytecode is still allowed under the variable; only writing it is not. In the controller only
    (the workers start after it), and cheap when the files are up to date.
    """
    if hasattr(config, "workerinput"):
        return
    import compileall

    root = Path(__file__).resolve().parent.parent
    for tree in (root / "watcher", root / "bridge", root / "tests" / "_faults"):
        compileall.compile_dir(tree, quiet=1)


# ---- opt-in: the CPU each test costs ---------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """``WATCHER_TESTS_CPU=FILE``: append one line per test (set-up, call and tear-down) to
    ``FILE.<worker>``: its id, then the CPU seconds of this process (every thread), of the processes
    it waited for itself (exec'd), and of the processes the fork server started for it — the
    suite's time on a small machine is CPU, not waiting. ``sort -t$'\\t' -k2 -gr FILE.*`` ranks them
    by the total."""
    target = os.environ.get("WATCHER_TESTS_CPU")
    if not target:
        return (yield)
    import resource
    import time

    from _forkserver import CHILD_CPU

    def now() -> tuple[float, float, float]:
        waited = resource.getrusage(resource.RUSAGE_CHILDREN)
        return time.process_time(), waited.ru_utime + waited.ru_stime, CHILD_CPU[0]

    before = now()
    try:
        return (yield)
    finally:
        own, waited, forked = (b - a for a, b in zip(before, now(), strict=True))
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{target}.{worker}", "a", encoding="utf-8") as out:
            out.write(f"{item.nodeid}\t{own + waited + forked:.3f}\t{own:.3f}\t{waited:.3f}\t{forked:.3f}\n")


# ---- the reliability rig's closing line, also under pytest-xdist ---------------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    from _tally import TALLY

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints the sum
        workeroutput["reliability_tally"] = TALLY.to_dict()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    from _tally import TALLY

    counted = getattr(node, "workeroutput", {}).get("reliability_tally")
    if counted:
        TALLY.merge(counted)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from _tally import TALLY

    if TALLY.touched():
        terminalreporter.write_sep("-", "reliability rig")
        terminalreporter.write_line(TALLY.line())
        for violation in TALLY.violations[:20]:
            terminalreporter.write_line(f"  violation: {violation}")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than there are CPUs. Many tests wait on a `watcher` process,
    a lock or fsync for part of their time; a third worker on 2 cores keeps both busy meanwhile
    (measured here before the fork server: 132 s with 2 workers, 118 s with 3)."""
    return (os.cpu_count() or 1) + 1
