"""The pipeline run in-process with an injected provider factory (no loopback server, no sleeps)."""

from __future__ import annotations

from pathlib import Path

from _fakes.provider import FakeProvider, in_process_context
from _proc import write_export

from watcher import commands
from watcher.commands import Context
from watcher.config import Paths
from watcher.errors import RateLimited
from watcher.pipeline import ItemResult, Partial
from watcher.store.files import FileStore


def _ctx(data_dir: Path, fake: FakeProvider, **hooks: object) -> Context:
    return in_process_context(data_dir, fake, **hooks)  # type: ignore[no-any-return]


def test_scan_calls_the_injected_provider_once_per_new_comment(data_dir: Path, tmp_path: Path) -> None:
    """A scan through the injected factory reserves, calls and saves exactly as over HTTP."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["aa1", "bb2"])
    planned: list[int] = []
    items: list[ItemResult] = []
    out = commands.scan(_ctx(data_dir, fake, on_planned=planned.append, on_item=items.append), source=str(export))
    assert isinstance(out, Partial) and out.error is None
    assert fake.calls == ["aa1", "bb2"]
    assert planned == [2] and [(i.id, i.outcome) for i in items] == [("aa1", "verdict"), ("bb2", "verdict")]
    record = FileStore(Paths(data_dir)).load_record("aa1")
    assert record is not None and record.verdict is not None and len(record.attempts) == 1
    assert out.result["signals"]["new_lines"] >= 2


def test_a_429_stops_the_batch_with_a_partial_result(data_dir: Path, tmp_path: Path) -> None:
    """The stop's error travels beside the summary, and the rest are reported not_started."""
    fake = FakeProvider()
    fake.script("aa1", "429:60")
    export = write_export(tmp_path / "export.json", ["aa1", "bb2", "cc3"])
    out = commands.scan(_ctx(data_dir, fake), source=str(export))
    assert isinstance(out.error, RateLimited)
    assert fake.calls == ["aa1"]
    assert [(i["id"], i["outcome"]) for i in out.result["items"]] == [
        ("aa1", "error"), ("bb2", "not_started"), ("cc3", "not_started")]
    assert out.result["stopped"] == "rate_limited"
    envelope = commands.execute("scan", _ctx(data_dir, fake), lambda c: out)
    assert (envelope.exit_code, envelope.result["stopped"]) == (3, "rate_limited")


def test_dry_run_touches_nothing(data_dir: Path, tmp_path: Path) -> None:
    """--dry-run plans and lists what would be called: no call, no inbox file, no observation."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["aa1"])
    out = commands.scan(_ctx(data_dir, fake), source=str(export), dry_run=True)
    assert out.error is None and out.result["would_call"] == ["aa1"]
    assert fake.calls == [] and sorted(p.name for p in data_dir.iterdir()) == []
