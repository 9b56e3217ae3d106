"""Index saves that race `migrate` and `forget` (SPEC §4.2, §16.3): real processes, each held at an
exact step (the fault rig's ``pause_at``) so that the interleaving happens for sure; then what the
person decided is checked from disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _fakes import records as rec
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks, running_fake
from _proc import Notices, run, run_main, start, write_export

from watcher.config import Paths
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow


def _seen(root: Path) -> dict[str, dict[str, Any]]:
    return json.loads((root / "seen.json").read_text())["comments"]  # type: ignore[no-any-return]


def _source(root: Path, tmp_path: Path) -> Path:
    """A store whose m2 has a verdict the person marked replied."""
    root.mkdir()
    export = write_export(tmp_path / "old.json", ["m2"])
    hooks = in_process_hooks(FakeProvider())
    scan = run_main("cli", "scan", "--source", str(export), data_dir=root, env=IN_PROCESS_ENV,
                    hooks=hooks)
    assert scan.returncode == 0, scan.stderr
    assert run_main("cli", "mark", "m2", "replied", data_dir=root, env=IN_PROCESS_ENV).returncode == 0
    return root


def _held(entry_args: tuple[str, ...], data_dir: Path, point: str, notices: Notices) -> Any:
    proc = start("cli", *entry_args, data_dir=data_dir, fault=f"pause_at={point}", notices=notices)
    notices.wait(point, proc)
    return proc


def test_an_index_save_of_a_read_command_during_a_migration_loses_no_mark(
    tmp_path: Path, data_dir: Path
) -> None:
    """`inbox` read the data dir before the migration began and saves its index while migrate is
    bringing comments (m2's inbox file there, not yet indexed, so both index it): m2 keeps the
    source's replied mark, its time and who made it."""
    src = _source(tmp_path / "old", tmp_path)
    FileStore(Paths(data_dir)).save_record(rec.record("m2"))
    reader_notes, migrate_notes = Notices(tmp_path / "reader"), Notices(tmp_path / "migrate")
    reader = _held(("inbox", "--all"), data_dir, "before_seen_save", reader_notes)
    migrating = _held(("migrate", str(src)), data_dir, "migrate_after_comment", migrate_notes)
    reader_notes.resume()
    assert reader.wait(timeout=30) == 0
    migrate_notes.resume()
    out, err = migrating.communicate(timeout=30)
    assert migrating.returncode == 0, err
    want = {k: _seen(src)["m2"][k] for k in ("triage", "triage_by", "triage_at")}
    assert {k: _seen(data_dir)["m2"].get(k) for k in want} == want


def test_a_read_commands_index_save_after_a_migration_keeps_what_it_brought(
    tmp_path: Path, data_dir: Path
) -> None:
    """`inbox` read the data dir before the migration (m2 not indexed there) and saves after it:
    m2's mark, its time and who made it stay as the migration brought them."""
    src = _source(tmp_path / "old", tmp_path)
    FileStore(Paths(data_dir)).save_record(rec.record("m2"))
    notes = Notices(tmp_path / "reader")
    reader = _held(("inbox", "--all"), data_dir, "before_seen_save", notes)
    assert run("cli", "migrate", str(src), data_dir=data_dir).returncode == 0
    notes.resume()
    assert reader.wait(timeout=30) == 0
    want = {k: _seen(src)["m2"][k] for k in ("triage", "triage_by", "triage_at")}
    assert {k: _seen(data_dir)["m2"].get(k) for k in want} == want


def test_forget_during_a_batch_stays_forgotten_after_the_batchs_index_save(
    tmp_path: Path, data_dir: Path
) -> None:
    """A scan discovered and judged f1 and is about to save its index when the person forgets f1:
    the batch's save does not bring it back."""
    export = write_export(tmp_path / "export.json", ["f1"])
    notes = Notices(tmp_path / "scan")
    with running_fake() as fake:
        batch = start("cli", "scan", "--source", str(export), data_dir=data_dir, env=fake.env(),
                      fault="pause_at=before_seen_save", notices=notes)
        notes.wait("before_seen_save", batch)
        forgot = run("cli", "forget", "f1", data_dir=data_dir)
        assert forgot.returncode == 0, forgot.stderr
        notes.resume()
        out, err = batch.communicate(timeout=30)
    assert batch.returncode == 0, err
    assert _seen(data_dir)["f1"]["status"] == "forgotten"
    listed = run("cli", "inbox", "--all", "--json", data_dir=data_dir)
    assert json.loads(listed.stdout)["result"]["comments"] == []
