"""SPEC §7.1: a batch that stops lists as not_started at most `limit` comments, the one it stopped
at included; the rest are counted in `remaining`."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.errors import LockBusy
from watcher.store.files import FileStore


class _BusyAtTheFirstItem(FileStore):
    """The pipeline lock is busy once, when the batch takes it to decide its first item
    (``_begin`` in watcher/pipeline/locked.py): another run held it just then."""

    busy = True

    def pipeline_lock(self, *, timeout: float | None = None) -> AbstractContextManager[None]:
        if _BusyAtTheFirstItem.busy and sys._getframe(1).f_code.co_name == "_begin":
            _BusyAtTheFirstItem.busy = False
            raise LockBusy(self.paths.root / "pipeline.lock", 0.0)
        return super().pipeline_lock(timeout=timeout)


def test_a_scan_stopped_at_its_first_item_lists_no_more_than_the_limit(data_dir: Path, tmp_path: Path) -> None:
    """--limit 5 of 8 new comments, the lock busy at the first: 5 not_started, 3 remaining."""
    export = write_export(tmp_path / "export.json", [f"c{i}" for i in range(8)])

    hooks: Any = in_process_hooks(FakeProvider(), make_store=_BusyAtTheFirstItem)
    _BusyAtTheFirstItem.busy = True
    done = run_main("bridge", "scan", "--source", str(export), "--limit", "5", data_dir=data_dir,
                    env=IN_PROCESS_ENV, hooks=hooks)
    out = done.envelope
    assert out is not None and out["error"]["kind"] == "lock_busy", done.stderr
    result = out["result"]
    assert result["calls"] == 0
    assert [i["outcome"] for i in result["items"]] == ["not_started"] * 5
    assert result["remaining"] == 3
