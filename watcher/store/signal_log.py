"""The observation log (SPEC §8, §13.5): appending whole lines to ``observations.jsonl``, and
recognising the log the counter counted (:mod:`watcher.store.signals`).

Appenders add whole JSON lines with one ``write`` under the short signals lock, so lines never
interleave. End offsets only identify lines within one stable, append-only file, so the counter
checks that the log is still the one counted — by content, as log shippers that survive copies
do: the hash of its first line, the hash of the line ending at ``applied``, and a length of at
least ``applied``. Device and inode are recorded but prove nothing: ``cp -r``/``cp -a``, a backup
restore or a new machine give the same log a new inode, and the counter carries on exactly.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watcher.config import Paths
from watcher.errors import LogReplaced, SaveFailed, StateError, UnsafePath
from watcher.models import LogIdentity, SignalState
from watcher.store import durable
from watcher.store.dirs import make_dirs, real_directories
from watcher.store.locks import signals_lock
from watcher.store.oscalls import OS, OsCalls
from watcher.util.timeutil import iso

# The first line and the line ending at `applied` are hashed to recognise the log; lines are
# short, but a hand-made one could be huge, and the identity check must stay cheap, so only this
# many bytes of each count (the first line's start, the last line's end).
HEAD_CAP = 4096


# --------------------------------------------------------------------------------------- append


AppendBytes = Callable[[Path, bytes], None]
WriteModel = Callable[[Path, BaseModel], object]


def append(
    paths: Paths,
    events: Iterable[Mapping[str, Any]],
    *,
    writer: AppendBytes | None = None,
    lock: Callable[[], AbstractContextManager[None]] | None = None,
    calls: OsCalls = OS,
) -> None:
    """Append one JSON line per event to ``observations.jsonl``.

    Each event needs a non-empty string ``"key"``; other fields (``comment``, ``run``,
    ``entrypoint``) are copied, ``None`` values dropped, and ``"ts"`` is added first. All lines go
    in one ``os.write`` under the signals lock (the counter fsyncs before counting). Creates the
    file and its directory. Raises :class:`SaveFailed` on an OS error, :class:`LockBusy` if the
    lock is stuck, and ``ValueError`` for an event without a key (a programming error).
    ``lock``: how to take the signals lock (a store's, whose waits a signal ends); ``calls``: the
    OS calls (:mod:`watcher.store.oscalls`)."""
    ts = iso()
    payload = b"".join(_encode(event, ts) for event in events)
    if not payload:
        return
    path = paths.observations
    real_directories(path.parent, below=paths.user_part)  # the log is never appended through a link
    with signals_lock(paths) if lock is None else lock():
        try:
            if writer is None:
                append_bytes(path, payload, calls)
            else:
                writer(path, payload)
        except OSError as exc:
            raise SaveFailed(path, exc) from exc


def _encode(event: Mapping[str, Any], ts: str) -> bytes:
    key = event.get("key")
    if not isinstance(key, str) or not key:
        raise ValueError(f"a signal needs a non-empty string 'key', got {key!r}")
    record: dict[str, Any] = {"ts": ts, "key": key}
    record.update((name, value) for name, value in event.items() if value is not None)
    # json.dumps escapes control characters, so the text can never contain a raw newline.
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# O_NOFOLLOW: a symlink planted at observations.jsonl made every run append to the file it
# pointed at, outside the data dir; O_NONBLOCK: a FIFO there must not hang the run (§13.5).
_APPEND_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def append_bytes(path: Path, payload: bytes, calls: OsCalls = OS) -> None:
    """Append ``payload`` (whole lines) to the log at ``path``, starting a fresh line after a
    torn one."""
    try:
        try:
            fd = calls.open(path, _APPEND_FLAGS, 0o644)
        except FileNotFoundError:  # no data dir yet; made here, not tried before every append
            make_dirs(path.parent, calls)
            fd = calls.open(path, _APPEND_FLAGS, 0o644)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
            raise UnsafePath(
                path, "a symbolic link, FIFO or directory, not the observation log"
            ) from exc
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(path, "not a regular file (a FIFO or device), not the observation log")
        size = info.st_size
        # A writer that died mid-write (or a disk that filled up) may have left a line without
        # its newline. Gluing our first line onto it would spoil ours too; start a fresh line so
        # the fragment is counted as one invalid line and ours stays valid.
        if size and calls.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        written = calls.write(fd, payload)
        while written < len(payload):  # a short write; we hold the lock, so still contiguous
            written += calls.write(fd, payload[written:])
        # No fsync per append: one per model call made bookkeeping ~1.6x the floor of its two
        # durable writes. The counter fsyncs the log before it saves a
        # watermark past these lines, so a counted line is always durable; a power cut can only
        # lose lines nobody has counted yet (never a process kill: the page cache survives it).
    finally:
        os.close(fd)
    if size == 0:
        calls.sync_dir(path.parent)  # the file may be new: make its name durable too


# ---------------------------------------------------------------------------- the log's identity


def read_state(paths: Paths) -> SignalState | None:
    """The saved counter state, ``None`` before the first count (guarded read, see durable)."""
    return durable.read_model(
        paths.signals_state, SignalState, quarantine_dir=paths.quarantine, within=paths.user_part
    )


def tail_of(line: bytes, end: int) -> tuple[int, str]:
    """(start, sha256) of the last HEAD_CAP bytes of ``line``, a whole line ending at ``end``."""
    kept = line[-HEAD_CAP:]
    return end - len(kept), hashlib.sha256(kept).hexdigest()


def log_identity(fd: int, calls: OsCalls = OS) -> tuple[LogIdentity, int]:
    """(dev, inode, hash of the first line) of the open log, and its current size."""
    st = os.fstat(fd)
    head = calls.pread(fd, HEAD_CAP, 0)
    newline = head.find(b"\n")
    if newline >= 0:
        digest: str | None = hashlib.sha256(head[: newline + 1]).hexdigest()
    elif len(head) >= HEAD_CAP:
        digest = hashlib.sha256(head).hexdigest()  # an over-long first line: its prefix is stable
    else:
        digest = None  # no complete first line yet: nothing that could have been counted
    return LogIdentity(dev=st.st_dev, inode=st.st_ino, head_sha256=digest), st.st_size


def check_same_log(paths: Paths, fd: int, state: SignalState, calls: OsCalls = OS) -> LogIdentity:
    """The open log's identity, with the tail of ``state.applied``; raise :class:`LogReplaced`
    unless it is the log ``state`` counted.

    Content, not inode, decides (SPEC §13.5): a copy is the same log. Two short reads at most —
    the first line and the line ending at ``applied`` — so the cost never follows the log's size.
    """
    now, size = log_identity(fd, calls)
    was = state.log
    if was is None or state.applied == 0:
        return now  # nothing counted yet, so nothing to protect
    if size < state.applied:
        raise log_changed(
            paths, f"was truncated (it has {size} bytes, {state.applied} were already counted)"
        )
    if was.head_sha256 and now.head_sha256 != was.head_sha256:
        raise log_changed(paths, "was replaced (its first line changed)")
    if was.tail_sha256 is None or was.tail_start is None:
        # A state saved before tails were recorded: take the tail from the log now (the first
        # line and length agree), and the next save records it.
        start, digest = _tail_at(paths, fd, state.applied, calls)
    else:
        start, digest = was.tail_start, was.tail_sha256
        length = state.applied - start
        data = calls.pread(fd, length, start) if 0 < length <= HEAD_CAP else b""
        if hashlib.sha256(data).hexdigest() != digest:
            raise log_changed(
                paths,
                f"was replaced (the last line counted, ending at byte {state.applied}, "
                "is not the same)",
            )
    return now.model_copy(update={"tail_start": start, "tail_sha256": digest})


def _tail_at(paths: Paths, fd: int, end: int, calls: OsCalls) -> tuple[int, str]:
    """(start, sha256) of the line ending at ``end``, as :func:`_read_batch` records it."""
    base = max(0, end - HEAD_CAP)
    data = calls.pread(fd, end - base, base)
    if not data.endswith(b"\n"):
        raise log_changed(
            paths, f"was replaced (no line ends at byte {end}, where counting stopped)"
        )
    return tail_of(data[data.rfind(b"\n", 0, len(data) - 1) + 1 :], end)


def log_trouble(paths: Paths, state: SignalState | None = None) -> str | None:
    """Why the counter would stop (log replaced, truncated, removed or unreadable), else ``None``.

    For ``watcher status``: counts nothing, takes no lock, writes nothing; reads ``state`` (the
    saved one if not given), the log's first line and the line ending at ``applied``. Never
    raises a :class:`StateError`: its message (which names ``watcher signals --reset``) is the
    answer.
    """
    try:
        state = state if state is not None else read_state(paths)
        if state is None or state.applied == 0:
            return None
        fd = open_log(paths)
        if fd is None:
            raise log_changed(
                paths, f"was removed ({state.applied} bytes of it were already counted)"
            )
        try:
            check_same_log(paths, fd, state)
        except OSError as exc:
            raise StateError(f"cannot read {paths.observations}: {exc}") from exc
        finally:
            os.close(fd)
    except StateError as exc:
        return str(exc)
    return None


def open_log(paths: Paths, calls: OsCalls = OS) -> int | None:
    """The log open for reading, or ``None`` if there is none. Never follows a symlink and never
    blocks (a FIFO planted there would hang every command, status included); anything but a
    regular file is a :class:`StateError` naming the path."""
    real_directories(paths.observations.parent, below=paths.user_part)
    try:
        fd = calls.open(paths.observations, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {paths.observations}: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StateError(f"cannot read {paths.observations}: not a regular file; move it aside")
    return fd


def log_changed(paths: Paths, what: str) -> LogReplaced:
    return LogReplaced(
        f"{paths.observations} {what}. The signal counter stopped rather than mix counts from "
        "two different logs; run `watcher signals --reset` to discard the saved counts and "
        "recount this log from zero on purpose"
    )
