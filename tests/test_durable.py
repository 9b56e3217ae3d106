"""The one durable write (SPEC §4): temp + fsync + replace + fsync dir, and its failure modes.

"Previous file intact" is exact for failures *before* ``os.replace`` (temp fsync, replace): the
old bytes are still at the path. The directory fsync runs *after* the replace, so by then the new
bytes are already in place; the write still fails loudly with ``SaveFailed`` (the rename may not
survive a power cut), and no temp file is left either way.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import pytest
from _fakes.records import record

from watcher.config import Paths
from watcher.errors import EXIT_STATE, SaveFailed, WatcherError, exit_code_for
from watcher.models import InboxRecord
from watcher.store.durable import quarantine, read_model, write_bytes, write_json, write_model
from watcher.store.oscalls import OsCalls

OLD = {"schema_version": 1, "value": "old"}
NEW = {"schema_version": 1, "value": "new"}


def _is_dir_fd(fd: int) -> bool:
    return stat.S_ISDIR(os.fstat(fd).st_mode)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def state_file(data_dir: Path) -> Path:
    path = data_dir / "state.json"
    write_json(path, OLD)
    return path


def test_write_json_round_trips_and_leaves_no_temp(data_dir: Path) -> None:
    """A successful write puts exactly the JSON at the path and no temp file beside it."""
    path = data_dir / "sub" / "state.json"
    write_json(path, NEW)
    assert json.loads(path.read_text("utf-8")) == NEW
    assert _leftovers(path.parent) == []


def test_write_replaces_the_inode(state_file: Path) -> None:
    """Every write is a new inode (a reader's stat tells versions apart; see quarantine)."""
    before = os.stat(state_file).st_ino
    write_json(state_file, NEW)
    assert os.stat(state_file).st_ino != before


def test_write_model_round_trips_through_read_model(paths: Paths) -> None:
    """write_model then read_model gives back an equal model."""
    rec = record("abc1")
    write_model(paths.inbox_file("abc1"), rec)
    assert read_model(paths.inbox_file("abc1"), InboxRecord, quarantine_dir=paths.quarantine) == rec


class Failing(OsCalls):
    """The real OS calls, but ``name`` fails with a full disk whenever ``when(*args)`` says so."""

    def __init__(self, name: str, when: Callable[..., bool]) -> None:
        self.name, self.when = name, when
        self.failed: list[tuple[object, ...]] = []

    def _check(self, name: str, *args: object) -> None:
        if name == self.name and self.when(*args):
            self.failed.append(args)
            raise OSError(28, "No space left on device (injected)")

    def fsync(self, fd: int) -> None:
        self._check("fsync", fd)
        super().fsync(fd)

    def replace(self, src: str | Path, dst: str | Path) -> None:
        self._check("replace", src, dst)
        super().replace(src, dst)


def test_fsync_failure_keeps_previous_file_and_no_temp(state_file: Path) -> None:
    """OSError at the temp file's fsync: SaveFailed, old bytes intact, temp removed."""
    old_bytes = state_file.read_bytes()
    calls = Failing("fsync", lambda fd: not _is_dir_fd(fd))
    with pytest.raises(SaveFailed) as info:
        write_json(state_file, NEW, calls=calls)
    assert calls.failed, "the injected fsync was never reached"
    assert state_file.read_bytes() == old_bytes
    assert _leftovers(state_file.parent) == []
    assert str(state_file) in str(info.value)


def test_replace_failure_keeps_previous_file_and_no_temp(state_file: Path) -> None:
    """OSError at os.replace: SaveFailed, old bytes intact, temp removed."""
    old_bytes = state_file.read_bytes()
    calls = Failing("replace", lambda src, dst: True)
    with pytest.raises(SaveFailed):
        write_json(state_file, NEW, calls=calls)
    assert calls.failed
    assert state_file.read_bytes() == old_bytes
    assert _leftovers(state_file.parent) == []


def test_directory_fsync_failure_is_loud_new_content_in_place_no_temp(state_file: Path) -> None:
    """OSError at the directory fsync (after replace): SaveFailed, new bytes in place, no temp."""
    calls = Failing("fsync", _is_dir_fd)
    with pytest.raises(SaveFailed) as info:
        write_json(state_file, NEW, calls=calls)
    assert calls.failed
    assert json.loads(state_file.read_text("utf-8")) == NEW
    assert _leftovers(state_file.parent) == []
    assert exit_code_for(info.value) == EXIT_STATE


def test_write_failure_mid_payload_keeps_previous_file(state_file: Path) -> None:
    """A failing data write (disk full) leaves the old file and no temp, and raises SaveFailed."""
    old_bytes = state_file.read_bytes()

    class Full:
        def __init__(self, fd: int) -> None:
            self._fh = os.fdopen(fd, "wb")

        def __enter__(self) -> Self:
            return self

        def __exit__(self, *exc: object) -> None:
            self._fh.close()

        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device (injected)")

    class DiskFull(OsCalls):
        def fdopen(self, fd: int, mode: str) -> Any:
            return Full(fd)

    with pytest.raises(SaveFailed):
        write_bytes(state_file, b"{}", calls=DiskFull())
    assert state_file.read_bytes() == old_bytes
    assert _leftovers(state_file.parent) == []


def test_interrupt_during_write_removes_temp(state_file: Path) -> None:
    """A non-OSError (Ctrl-C) between temp and replace propagates and still removes the temp."""
    old_bytes = state_file.read_bytes()

    class Interrupted(OsCalls):
        def replace(self, src: str | Path, dst: str | Path) -> None:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_json(state_file, NEW, calls=Interrupted())
    assert state_file.read_bytes() == old_bytes
    assert _leftovers(state_file.parent) == []


def test_quarantine_never_overwrites_an_earlier_quarantined_file(data_dir: Path) -> None:
    """Two files quarantined under the same name in the same second both survive, byte-for-byte."""
    qdir = data_dir / "quarantine"
    path = data_dir / "seen.json"
    path.write_bytes(b"first")
    first = quarantine(path, qdir)
    path.write_bytes(b"second")
    second = quarantine(path, qdir)
    assert first is not None and second is not None and first != second
    assert (first.read_bytes(), second.read_bytes()) == (b"first", b"second")


def test_quarantine_of_a_missing_file_returns_none(data_dir: Path) -> None:
    """Another reader already moved it: nothing to do, nothing raised."""
    assert quarantine(data_dir / "seen.json", data_dir / "quarantine") is None


def test_quarantine_leaves_a_file_replaced_since_it_was_read(data_dir: Path) -> None:
    """If a durable write replaced the corrupt file after we read it, the healthy file stays."""
    path = data_dir / "seen.json"
    path.write_bytes(b"{corrupt")
    seen_then = os.stat(path)
    write_json(path, NEW)
    assert quarantine(path, data_dir / "quarantine", expected=seen_then) is None
    assert json.loads(path.read_text("utf-8")) == NEW
    assert list((data_dir / "quarantine").iterdir()) == []


def test_read_model_never_moves_a_healthy_file_written_during_the_move(paths: Paths) -> None:
    """A write landing between the corrupt read and the move: the healthy record is returned, kept."""
    target = paths.inbox_file("abc1")
    target.parent.mkdir(parents=True)
    target.write_bytes(b"{truncated")
    healthy = record("abc1")

    class WriterWinsTheRace(OsCalls):
        raced = False

        def rename(self, src: str | Path, dst: str | Path) -> None:
            if not self.raced:
                self.raced = True
                write_model(target, healthy)  # the concurrent writer's os.replace lands right here
            super().rename(src, dst)

    calls = WriterWinsTheRace()
    assert read_model(target, InboxRecord, quarantine_dir=paths.quarantine, calls=calls) == healthy
    assert calls.raced
    assert read_model(target, InboxRecord, quarantine_dir=paths.quarantine) == healthy
    assert list(paths.quarantine.iterdir()) == []


def test_read_model_of_a_missing_file_is_none(paths: Paths) -> None:
    """No file yet is not an error."""
    assert read_model(paths.seen, InboxRecord, quarantine_dir=paths.quarantine) is None



def test_write_into_a_new_directory_makes_the_directory_durable(data_dir: Path) -> None:
    """Creating inbox/ on the first write fsyncs its parent too, not only the file's directory."""
    synced: list[Path] = []

    class Watched(OsCalls):
        def sync_dir(self, directory: Path) -> None:
            synced.append(Path(directory))
            super().sync_dir(directory)

    write_json(data_dir / "inbox" / "abc1.json", NEW, calls=Watched())
    assert synced == [data_dir, data_dir / "inbox"]


def test_sweep_removes_only_old_temp_files_of_killed_writers(tmp_path: Path) -> None:
    """Old `.name.*.tmp` files go; young ones (a live writer's) and data files stay."""
    import os
    import time

    from watcher.store.durable import sweep_stale_temps

    where = tmp_path / "dir"
    where.mkdir()
    old_tmp, young_tmp = where / ".seen.json.abc.tmp", where / ".seen.json.def.tmp"
    data, hidden = where / "seen.json", where / ".keep"
    for f in (old_tmp, young_tmp, data, hidden):
        f.write_text("x")
    long_ago = time.time() - 7200
    for f in (old_tmp, data, hidden):
        os.utime(f, (long_ago, long_ago))
    assert sweep_stale_temps(where) == 1
    assert sorted(p.name for p in where.iterdir()) == [".keep", ".seen.json.def.tmp", "seen.json"]
    assert sweep_stale_temps(tmp_path / "missing") == 0


def _one_pass_cases() -> dict[str, bytes]:
    good = record("op1").model_dump(mode="json")
    text = json.dumps(good)
    return {
        "valid": text.encode(),
        "newer_schema": json.dumps({**good, "schema_version": 3}).encode(),
        "unknown_field": json.dumps({**good, "surprise": 1}).encode(),
        "wrong_type": json.dumps({**good, "cap": "three"}).encode(),
        "lone_surrogate": text.replace('"text": "', '"text": "\\ud800', 1).encode(),
        "not_json": b"{not json",
        "not_an_object": b"[1, 2]",
        "bom": b"\xef\xbb\xbf" + text.encode(),
        "bad_utf8": text.replace('"text": "', '"text": "\xff', 1).encode("latin-1"),
        "other_name": text.replace('"op1"', '"op2"').encode(),
    }


@pytest.mark.parametrize("case", sorted(_one_pass_cases()))
def test_one_pass_reads_judge_every_file_as_the_two_pass_read(paths: Paths, case: str) -> None:
    """read_model(one_pass=True) gives the same record, error and quarantine as the json.loads
    path, for good files and for every way a file can be bad."""
    def named_op1(loaded: InboxRecord) -> str | None:
        return None if loaded.comment.id == "op1" else "holds another comment"

    outcomes = []
    for one_pass in (False, True):
        path = paths.inbox_file("op1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_one_pass_cases()[case])
        try:
            got: object = read_model(path, InboxRecord, quarantine_dir=paths.quarantine, check=named_op1,
                                     one_pass=one_pass)
        except WatcherError as exc:  # compared below: same class, same message
            got = (type(exc).__name__, str(exc).split(" moved to ")[0])
        outcomes.append((got, path.exists()))
    assert outcomes[0] == outcomes[1]
