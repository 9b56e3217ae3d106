"""Corrupt and newer-schema state files (SPEC §4): a clear error, quarantine byte-for-byte, and
never an overwrite; a newer schema is refused and left exactly where it is."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from _fakes.records import entry, record

from watcher.config import Paths
from watcher.errors import EXIT_STATE, CorruptState, NewerSchema, UnsafePath, exit_code_for
from watcher.models import SeenFile
from watcher.store.files import FileStore

_GOOD_INBOX = record("abc1").model_dump(mode="json")


def _with(**changes: object) -> bytes:
    return json.dumps({**_GOOD_INBOX, **changes}).encode()


CORRUPT: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b"  \n",
    "truncated": json.dumps(_GOOD_INBOX).encode()[:57],
    "binary": bytes(range(256)),
    "array": b"[1, 2, 3]",
    "string": b'"hello"',
    "null": b"null",
    "wrong_types": _with(cap="three", attempts={"n": 1}),
    "missing_field": json.dumps({k: v for k, v in _GOOD_INBOX.items() if k != "prompt"}).encode(),
    "unknown_field": _with(extra=1),
    "schema_version_as_string": _with(schema_version="2"),
    "schema_version_zero": _with(schema_version=0),
    "unsafe_comment_id": _with(comment={**_GOOD_INBOX["comment"], "id": "../../etc"}),
    "bad_utf8": b'{"schema_version": 1, "comments": {"\xff": 1}}',
}

Loader = Callable[[Paths], object]
TARGETS: dict[str, tuple[Callable[[Paths], Path], Loader, str]] = {
    "inbox": (lambda p: p.inbox_file("abc1"), lambda p: FileStore(p).load_record("abc1"), "inbox-abc1.json"),
    "seen": (lambda p: p.seen, lambda p: FileStore(p).load_index(), "seen.json"),
}


def _plant(paths: Paths, target: str, content: bytes) -> Path:
    path = TARGETS[target][0](paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("target", sorted(TARGETS))
@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_corrupt_file_is_quarantined_byte_for_byte(paths: Paths, target: str, kind: str) -> None:
    """Each kind of corrupt inbox/seen file raises CorruptState and moves, unchanged, to quarantine/."""
    content = CORRUPT[kind]
    path = _plant(paths, target, content)
    with pytest.raises(CorruptState) as info:
        TARGETS[target][1](paths)
    moved = info.value.moved_to
    assert moved is not None and moved.parent == paths.quarantine
    assert moved.name.startswith(TARGETS[target][2] + ".")
    assert moved.read_bytes() == content
    assert not path.exists()


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_corrupt_error_names_the_file_and_where_it_went(paths: Paths, target: str) -> None:
    """The message names the corrupt file and its quarantine path; exit code 5."""
    path = _plant(paths, target, b"{not json")
    with pytest.raises(CorruptState) as info:
        TARGETS[target][1](paths)
    message = str(info.value)
    assert str(path) in message and str(info.value.moved_to) in message
    assert "not valid JSON" in message
    assert exit_code_for(info.value) == EXIT_STATE


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_newer_schema_is_refused_and_left_untouched(paths: Paths, target: str) -> None:
    """schema_version 4 (this release writes at most 3) raises NewerSchema; the file stays byte-for-byte and
    nothing is quarantined."""
    content = json.dumps({"schema_version": 4, "whatever": "a newer watcher wrote"}).encode()
    path = _plant(paths, target, content)
    mtime = path.stat().st_mtime_ns
    with pytest.raises(NewerSchema) as info:
        TARGETS[target][1](paths)
    assert path.read_bytes() == content and path.stat().st_mtime_ns == mtime
    assert not paths.quarantine.exists() or list(paths.quarantine.iterdir()) == []
    assert "schema_version 4" in str(info.value) and "upgrade" in str(info.value)
    assert exit_code_for(info.value) == EXIT_STATE


def test_a_directory_with_files_at_a_state_path_is_a_state_error_left_in_place(paths: Paths) -> None:
    """A directory holding files is never moved (UnsafePath, exit 5); an empty one is quarantined."""
    (paths.seen / "x").mkdir(parents=True)
    with pytest.raises(UnsafePath) as info:
        FileStore(paths).load_index()
    assert exit_code_for(info.value) == EXIT_STATE
    assert "left it in place" in str(info.value) and str(paths.seen) in str(info.value)
    assert paths.seen.is_dir()
    (paths.seen / "x").rmdir()
    with pytest.raises(CorruptState) as moved:
        FileStore(paths).load_index()
    assert moved.value.moved_to is not None and moved.value.moved_to.is_dir() and not paths.seen.exists()


def test_seen_save_over_a_corrupt_file_never_overwrites_it(paths: Paths) -> None:
    """A save that meets a corrupt seen.json fails loudly and does not write a fresh index over it."""
    content = b'{"schema_version": 1, "comments": 7}'
    _plant(paths, "seen", content)
    empty = SeenFile()
    mine = SeenFile(comments={"abc1": entry()})
    with pytest.raises(CorruptState) as info:
        FileStore(paths).save_index(empty, mine)
    assert info.value.moved_to is not None and info.value.moved_to.read_bytes() == content
    assert not paths.seen.exists()


def test_valid_files_load_without_touching_quarantine(paths: Paths) -> None:
    """Healthy files load and nothing appears in quarantine/."""
    FileStore(paths).save_record(record("abc1"))
    FileStore(paths).save_index(SeenFile(), SeenFile())
    assert FileStore(paths).load_record("abc1") == record("abc1")
    assert FileStore(paths).load_index() == SeenFile()
    assert not paths.quarantine.exists()


def test_list_ids_ignores_temp_and_unsafe_names(paths: Paths) -> None:
    """Only <valid id>.json counts as an inbox file; temp files and odd names do not."""
    FileStore(paths).save_record(record("abc1"))
    for name in (".abc1.json.x1.tmp", "ABC.json", "notes.txt", "a-b.json", "x" * 17 + ".json"):
        (paths.inbox / name).write_bytes(b"{}")
    assert FileStore(paths).record_ids() == ["abc1"]


def test_files_that_do_not_use_this_releases_fields_keep_the_first_releases_shape(paths: Paths) -> None:
    """grants, baseline, replied_at, listed_at, triage_by, last_comment_at and breaker are written
    only when set, so a file that does not use them keeps the first release's fields (its version,
    2, still tells an older release to leave it alone: tests/test_formats.py)."""
    import json

    from _fakes.records import entry, record

    from watcher.models import ProviderState, SeenArticle, SeenFile

    first_release = {
        "inbox": {"schema_version", "comment", "prompt", "cap", "attempts", "verdict"},
        "comment": {"article_id", "status", "attempts", "triage", "first_seen_at", "updated_at", "inbox_stamp"},
        "article": {"title", "comments_count", "checked_at", "url"},
        "provider": {"schema_version", "cooldown_until", "reason"},
    }
    article = SeenArticle(title="t", comments_count=1, checked_at="2026-05-14T09:00:00Z")
    index = SeenFile(comments={"a1": entry()}, articles={"1": article})
    assert set(json.loads(record().model_dump_json())) == first_release["inbox"]
    seen_doc = json.loads(index.model_dump_json())
    assert set(seen_doc["comments"]["a1"]) == first_release["comment"]
    assert set(seen_doc["articles"]["1"]) == first_release["article"]
    assert set(json.loads(ProviderState().model_dump_json())) == first_release["provider"]
    used = record().model_copy(update={"baseline": True})
    assert json.loads(used.model_dump_json())["baseline"] is True  # and written once it is used


def test_a_record_read_again_is_the_file_as_it_is_now(paths: Paths) -> None:
    """A store reads a record once and trusts its stamp after (one lstat per re-read): any change
    to the file since — another process's save, a copy written over it in place, a corrupt
    file, its removal — is read and judged as the first read would."""
    from test_store_reads import ReadCounting

    from watcher.state import records

    mine, theirs = ReadCounting(paths), FileStore(paths)
    theirs.save_record(record("abc1"))
    assert mine.load_record("abc1") == record("abc1")
    reads = mine.reads
    reads.clear()
    assert mine.load_record("abc1") == record("abc1") and reads == []  # unchanged: not read again

    reserved = records.reserve(record("abc1"), command="scan", entrypoint="cli", provider="p", model="m")
    theirs.save_record(reserved)  # another process's save: a new inode
    assert mine.load_record("abc1") == reserved and len(reads) == 1

    path = paths.inbox_file("abc1")
    before = path.stat()
    with open(path, "r+b") as fh:  # rewritten in place (a restore with `cp`), same inode
        fh.write(record("abc1").model_dump_json().encode())
        fh.truncate()
    assert path.stat().st_ino == before.st_ino
    assert mine.load_record("abc1") == record("abc1") and len(reads) == 2

    path.write_bytes(b"{ not json")
    with pytest.raises(CorruptState):
        mine.load_record("abc1")
    assert mine.load_record("abc1") is None  # quarantined: gone, not the record read before
