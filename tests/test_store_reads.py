"""What a store reads again and what it trusts by stamp (SPEC §4.2).

A store reads a file once and, while the file keeps the stamp of that read or of its own write
(every durable write makes a new inode), answers from what it read. Anything another process
wrote since has a new stamp and is read."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from watcher.config import Paths
from watcher.errors import UnsafePath
from watcher.models import ProviderState
from watcher.store.dirs import real_directories
from watcher.store.files import FileStore


class ReadCounting(FileStore):
    """The real store, noting the path of every file it reads (its one read, ``_read``)."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.reads: list[Path] = []

    def _read(self, path: Path, *args: Any, **kwargs: Any) -> Any:
        self.reads.append(path)
        return super()._read(path, *args, **kwargs)


def test_provider_state_is_read_again_only_when_another_process_wrote_it(paths: Paths) -> None:
    """The gate asks for provider.json after every answer: a file unchanged since this store
    wrote or read it is not read again, and a file another store wrote since is."""
    mine, theirs = ReadCounting(paths), FileStore(paths)
    reads = mine.reads
    assert mine.load_provider_state() == ProviderState()
    assert mine.load_provider_state() == ProviderState()
    assert reads == [paths.provider_state]  # no file: looked at by its stamp the second time

    cooled = ProviderState(cooldown_until="2026-12-01T12:00:00Z", reason="rate_limited: slow down")
    theirs.save_provider_state(cooled)
    assert mine.load_provider_state() == cooled
    assert mine.load_provider_state() == cooled
    assert reads == [paths.provider_state] * 2

    mine.save_provider_state(ProviderState(rate_limited_in_a_row=2))
    assert mine.load_provider_state() == ProviderState(rate_limited_in_a_row=2)  # its own write: no read
    assert reads == [paths.provider_state] * 2

    theirs.save_provider_state(ProviderState())
    os.utime(paths.provider_state, ns=(1, 1))  # same inode, new stamp: still read again
    assert mine.load_provider_state() == ProviderState()
    paths.provider_state.unlink()
    assert mine.load_provider_state() == ProviderState()
    assert reads == [paths.provider_state] * 4


def test_a_directory_checked_before_is_checked_again(paths: Paths, tmp_path: Path) -> None:
    """The names to check are worked out once per directory; the check itself is made every
    time: inbox/ swapped for a link after a first good check is refused at the next."""
    store = FileStore(paths)
    paths.inbox.mkdir(parents=True)
    real_directories(paths.inbox, below=paths.root)
    assert store.load_record("abc1") is None
    elsewhere = tmp_path / "elsewhere"
    paths.inbox.rename(elsewhere)
    paths.inbox.symlink_to(elsewhere)
    with pytest.raises(UnsafePath, match="symbolic link"):
        real_directories(paths.inbox, below=paths.root)
    with pytest.raises(UnsafePath, match="symbolic link"):
        store.load_record("abc1")
    assert paths.inbox_file("abc1") is paths.inbox_file("abc1")  # made once per comment
