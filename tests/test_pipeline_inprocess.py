"""The pipeline run in-process with an injected provider factory (no loopback server, no sleeps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.config import Paths
from watcher.pipeline import ItemResult
from watcher.store.files import FileStore


def _scan(data_dir: Path, fake: FakeProvider, export: Path, *args: str, **hooks: Any) -> dict[str, Any]:
    """`watcher-bridge scan --source EXPORT ARGS` in this process, its calls to ``fake``: the envelope."""
    done = run_main("bridge", "scan", "--source", str(export), *args, data_dir=data_dir, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake, **hooks))
    assert done.envelope is not None and done.envelope["exit_code"] == done.returncode, done.stderr
    return done.envelope


def test_scan_calls_the_injected_provider_once_per_new_comment(data_dir: Path, tmp_path: Path) -> None:
    """A scan through the injected factory reserves, calls and saves exactly as over HTTP."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["aa1", "bb2"])
    planned: list[int] = []
    items: list[ItemResult] = []
    out = _scan(data_dir, fake, export, on_planned=planned.append, on_item=items.append)
    assert out["exit_code"] == 0 and out["error"] is None
    assert fake.calls == ["aa1", "bb2"]
    assert planned == [2] and [(i.id, i.outcome) for i in items] == [("aa1", "verdict"), ("bb2", "verdict")]
    record = FileStore(Paths(data_dir)).load_record("aa1")
    assert record is not None and record.verdict is not None and len(record.attempts) == 1
    assert out["result"]["signals"]["new_lines"] >= 2


def test_a_429_stops_the_batch_with_a_partial_result(data_dir: Path, tmp_path: Path) -> None:
    """The stop's error travels beside the summary (exit 3), and the rest are reported not_started."""
    fake = FakeProvider()
    fake.script("aa1", "429:60")
    export = write_export(tmp_path / "export.json", ["aa1", "bb2", "cc3"])
    out = _scan(data_dir, fake, export)
    assert (out["exit_code"], out["error"]["kind"]) == (3, "rate_limited")
    assert fake.calls == ["aa1"]
    assert [(i["id"], i["outcome"]) for i in out["result"]["items"]] == [
        ("aa1", "error"), ("bb2", "not_started"), ("cc3", "not_started")]
    assert out["result"]["stopped"] == "rate_limited"


def test_dry_run_touches_nothing(data_dir: Path, tmp_path: Path) -> None:
    """--dry-run plans and lists what would be called: no call, no inbox file, no observation."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["aa1"])
    out = _scan(data_dir, fake, export, "--dry-run")
    assert out["error"] is None and out["result"]["would_call"] == ["aa1"]
    assert fake.calls == [] and sorted(p.name for p in data_dir.iterdir()) == []
