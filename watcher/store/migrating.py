"""The file operations of ``watcher migrate`` besides the store's own (SPEC §16.3): reading a whole
observation log, ending its last line, syncing it, and copying a data dir's ``config.toml``. The
merges that decide what to write are :mod:`watcher.commands.migrate_state`'s.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from watcher.config import Paths
from watcher.store import durable
from watcher.store.locks import signals_lock
from watcher.store.signal_log import HEAD_CAP, append_bytes, open_log


def read_log(paths: Paths) -> bytes | None:
    """The whole observation log, ``None`` when there is none (never through a link or a FIFO)."""
    fd = open_log(paths)
    if fd is None:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def log_head(data: bytes) -> str | None:
    """What names a log by content, as the counter does (SPEC §13.5): the hash of its first line
    (at most HEAD_CAP bytes of it); ``None`` before a first whole line."""
    first = data.find(b"\n")
    return None if first < 0 else hashlib.sha256(data[: min(first + 1, HEAD_CAP)]).hexdigest()


def end_log_line(paths: Paths) -> None:
    """Give the log's last line its newline (what an append of nothing writes), under the lock."""
    with signals_lock(paths):
        append_bytes(paths.observations, b"")


def sync_log(paths: Paths) -> None:
    """Make what was appended to the log durable (appends themselves are not synced, SPEC §8)."""
    fd = open_log(paths)
    if fd is None:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_regular(path: Path) -> bytes | None:
    """A regular file's bytes, never through a symlink; ``None`` when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_settings(paths: Paths, data: bytes) -> None:
    """``config.toml`` of the data dir, durably; mkstemp's temp file makes it 0600, as a file that
    may hold a key should be."""
    durable.write_bytes(paths.config_file, data, within=paths.user_part)
