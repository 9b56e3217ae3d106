"""Real processes (SPEC §4.2): 8 writers saving seen.json at once — 4 marking, 4 batch-saving
with stale bases over the very same comments — lose no mark, no comment, no attempt."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import _seen_worker as plan
from _fakes.records import record
from _forkserver import ForkedProcess
from _proc import script

from watcher.config import Paths
from watcher.models import SeenFile
from watcher.store.files import FileStore

WORKER = Path(__file__).with_name("_seen_worker.py")
MARKERS = BATCHERS = 4


def _seed(paths: Paths) -> None:
    for cid in plan.SHARED:
        FileStore(paths).save_record(record(cid))
    index, _ = FileStore(paths).reconcile_index(SeenFile())
    FileStore(paths).save_index(SeenFile(), index)


def _run_all(paths: Paths, start: Path) -> list[subprocess.Popen[str] | ForkedProcess]:
    roles = [("mark", k) for k in range(MARKERS)] + [("batch", k) for k in range(BATCHERS)]
    procs = [script(WORKER, str(paths.root), str(start), role, str(k)) for role, k in roles]
    deadline = time.monotonic() + 60
    while len(list(start.parent.glob(f"{start.name}.ready.*"))) < len(procs):
        assert time.monotonic() < deadline, "workers never got ready"
        assert all(p.poll() is None for p in procs), "a worker died before the start"
        time.sleep(0.01)
    start.touch()  # the barrier: all eight are spinning on this file, and go together
    return procs


def test_eight_concurrent_writers_lose_nothing(paths: Paths, tmp_path: Path) -> None:
    """Every last mark, every discovered comment, every article and the max attempts survive."""
    _seed(paths)
    procs = _run_all(paths, tmp_path / "go")
    for proc in procs:
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    final = FileStore(paths).load_index()
    for k in range(MARKERS):
        for cid in plan.marked_by(k):
            assert final.comments[cid].triage == plan.final_mark(k), (cid, k)
    top = max(plan.attempts_of(k, plan.ROUNDS - 1) for k in range(BATCHERS))
    for cid in plan.SHARED:
        assert final.comments[cid].attempts == top, cid
    expected_new = {plan.discovered(k, r) for k in range(BATCHERS) for r in range(plan.ROUNDS)}
    assert set(final.comments) == set(plan.SHARED) | expected_new
    assert len(final.articles) == BATCHERS * plan.ROUNDS


def test_concurrent_writers_leave_no_temp_files_or_quarantine(paths: Paths, tmp_path: Path) -> None:
    """After the storm the data dir holds seen.json, the lock file, inbox — no temp, no quarantine."""
    _seed(paths)
    for proc in _run_all(paths, tmp_path / "go"):
        proc.communicate(timeout=120)
        assert proc.returncode == 0
    leftovers = [p for p in paths.root.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    assert not paths.quarantine.exists()
    assert paths.seen_lock_file.exists()
