"""Observation signals: the append-only log and the counter that counts each line once (SPEC §8).

Appenders add whole JSON lines to ``observations.jsonl`` with one ``write`` under the short
signals lock, so lines never interleave. The counter turns the log into counts per ``key``,
exactly once per line, across crashes, by keeping two files with different jobs:

- ``signals/cursor.json`` ``{offset}`` says where the next *read* starts. It is only a hint.
- ``signals/state.json`` ``{counts, applied, invalid, log}`` holds the counts together with the
  *applied watermark* (end offset of the last line counted). Counts and watermark are one durable
  write, so no crash can leave one without the other.

Order of a pass: read complete lines after the cursor (cursor untouched) → under the lock load
the state, count only lines ending past ``applied``, save the state → then advance the cursor.
A crash before the state save loses nothing (the lines are read again); a crash after it counts
nothing twice (the re-read lines end at or before ``applied`` and are skipped). The cursor may
therefore lag ``applied``; that is the normal trace of a crash, not an error.

End offsets only identify lines within one stable, append-only file, so every pass checks that
the log is still the one counted — by content, as log shippers that survive copies do: the hash
of its first line, the hash of the line ending at ``applied``, and a length of at least
``applied``. Device and inode are recorded but prove nothing: ``cp -r``/``cp -a``, a backup
restore or a new machine give the same log a new inode, and the counter carries on exactly.
A replaced or truncated log stops the counter (:class:`LogReplaced`) until ``watcher signals
--reset`` recounts it from zero on purpose; only ``watcher signals`` exits 5 for that, ``scan``
and ``recheck`` warn, and ``status`` asks :func:`log_trouble` (SPEC §13.5).
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watcher.config import Paths
from watcher.errors import LogReplaced, SaveFailed, StateError, UnsafePath
from watcher.models import LogIdentity, SignalCursor, SignalState
from watcher.store import durable
from watcher.store.dirs import real_directories
from watcher.store.locks import signals_lock
from watcher.util.timeutil import iso

# The first line and the line ending at `applied` are hashed to recognise the log; lines are
# short, but a hand-made one could be huge, and the identity check must stay cheap, so only this
# many bytes of each count (the first line's start, the last line's end).
HEAD_CAP = 4096
# One durable state update per this many new bytes at most: a large backlog is counted in
# several passes, so memory and the time the lock is held stay bounded.
PASS_BYTES = 1 << 20
_READ_BLOCK = 64 * 1024


# --------------------------------------------------------------------------------------- append


AppendBytes = Callable[[Path, bytes], None]
WriteModel = Callable[[Path, BaseModel], object]


def append(
    paths: Paths,
    events: Iterable[Mapping[str, Any]],
    *,
    writer: AppendBytes | None = None,
    lock: Callable[[], AbstractContextManager[None]] | None = None,
) -> None:
    """Append one JSON line per event to ``observations.jsonl``.

    Each event needs a non-empty string ``"key"``; other fields (``comment``, ``run``,
    ``entrypoint``) are copied, ``None`` values dropped, and ``"ts"`` is added first. All lines go
    in one ``os.write`` under the signals lock (the counter fsyncs before counting). Creates the file and its
    directory. Raises :class:`SaveFailed` on an OS error, :class:`LockBusy` if the lock is stuck,
    and ``ValueError`` for an event without a key (a programming error). ``lock``: how to take the
    signals lock (a store keeps its descriptor open: :class:`watcher.store.locks.KeptLock`).
    """
    ts = iso()
    payload = b"".join(_encode(event, ts) for event in events)
    if not payload:
        return
    path = paths.observations
    real_directories(path.parent, below=paths.user_part)  # the log is never appended through a link
    with signals_lock(paths) if lock is None else lock():
        try:
            (writer or append_bytes)(path, payload)
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


def append_bytes(path: Path, payload: bytes) -> None:
    """Append ``payload`` (whole lines) to the log at ``path``, starting a fresh line after a torn one."""
    try:
        try:
            fd = os.open(path, _APPEND_FLAGS, 0o644)
        except FileNotFoundError:  # no data dir yet; made here, not tried before every append
            durable.make_dirs(path.parent)
            fd = os.open(path, _APPEND_FLAGS, 0o644)
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
        if size and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload
        written = os.write(fd, payload)
        while written < len(payload):  # a short write; we hold the lock, so still contiguous
            written += os.write(fd, payload[written:])
        # No fsync per append: one per model call made bookkeeping ~1.6x the floor of its two
        # durable writes (bench/run.py figure 1). The counter fsyncs the log before it saves a
        # watermark past these lines, so a counted line is always durable; a power cut can only
        # lose lines nobody has counted yet (never a process kill: the page cache survives it).
    finally:
        os.close(fd)
    if size == 0:
        durable.fsync_dir(path.parent)  # the file may be new: make its name durable too


# -------------------------------------------------------------------------------------- counter


@dataclass(frozen=True)
class CountResult:
    """What one counter run left on disk, and what it did.

    ``counts``/``invalid``/``applied`` are the saved state after the run (the cursor is saved
    equal to ``applied``); ``new_lines`` how many lines this run counted (valid or invalid);
    ``lines_read`` how many complete lines it read, including re-read ones it skipped as already
    counted.
    """

    counts: dict[str, int]
    invalid: int
    applied: int
    new_lines: int
    lines_read: int = 0


@dataclass(frozen=True)
class _Batch:
    start: int
    end: int  # end offset of the last complete line read; == start when none was complete
    lines: list[tuple[int, str | None]] = field(default_factory=list)  # (end offset, key or None)
    tail: tuple[int, str] | None = None  # (start, sha256) of the last line's last HEAD_CAP bytes


def read_state(paths: Paths) -> SignalState | None:
    """The saved counter state, ``None`` before the first count (guarded read, see durable)."""
    return durable.read_model(
        paths.signals_state, SignalState, quarantine_dir=paths.quarantine, within=paths.user_part
    )


def run_counter(
    paths: Paths, *, reset: bool = False, write: WriteModel | None = None
) -> CountResult:
    """Count every complete log line not counted yet, exactly once; return the saved totals.

    ``reset=True`` discards the saved counts and recounts the current log from offset 0 (what
    ``watcher signals --reset`` does after a replaced log). A missing log is zero new lines.
    Raises :class:`LogReplaced` when the log is not the file the counts came from (or is shorter
    than what was counted), :class:`SaveFailed` when a state or cursor write fails,
    :class:`CorruptState`/:class:`NewerSchema` for unreadable state, :class:`LockBusy`.
    """
    write = write or functools.partial(durable.write_model, within=paths.user_part)
    fd = _open_log(paths)
    if fd is None:
        counted = _count_without_log(paths, reset=reset, write=write)
        if counted is not None:
            return counted
        fd = _open_log(paths)  # created (and maybe counted by another counter) since we looked
        if fd is None:
            raise _log_changed(paths, "disappeared while it was being counted")
    try:
        if reset:
            _reset(paths, _identity(fd)[0], write)
        # Lines appended after this snapshot wait for the next run, so a busy log cannot keep
        # one run going forever.
        stop = os.fstat(fd).st_size
        new_lines = lines_read = 0
        synced = [False]  # one fsync of the log per run covers every pass (all read below `stop`)
        while True:
            batch, state, new = _one_pass(paths, fd, stop, synced, write)
            new_lines += new
            lines_read += len(batch.lines)
            if not batch.lines or batch.end >= stop:
                break
    finally:
        os.close(fd)
    return CountResult(dict(state.counts), state.invalid, state.applied, new_lines, lines_read)


def _one_pass(
    paths: Paths, fd: int, stop: int, synced: list[bool], write: WriteModel
) -> tuple[_Batch, SignalState, int]:
    # Read before taking the lock, so appenders are not kept waiting while we parse.
    start, cursor = _start_offset(paths)
    batch = _read_batch(fd, start, stop)
    with signals_lock(paths):
        state = read_state(paths) or SignalState()
        identity = _check_same_log(paths, fd, state)
        if state.applied < batch.start:
            # A concurrent --reset (or a state.json lost since we looked) moved the watermark
            # back past where we began reading; counting our batch alone would skip the gap.
            batch = _read_batch(fd, state.applied, stop)
        new_state, new = _apply(state, batch, identity)
        if new_state != state:
            # Appends are not fsynced (see append_bytes): make the counted lines durable before
            # the watermark that claims them, or a power cut could leave applied past the log's end.
            if not synced[0]:
                os.fsync(fd)
                synced[0] = True
            # Counts and watermark in ONE durable write: the unit that makes replays harmless.
            write(paths.signals_state, new_state)
        # Only now may the cursor move. It is written under the lock so two counters cannot
        # leave it behind each other's watermark; a crash before this write just means the same
        # lines are read again and skipped.
        if cursor != new_state.applied:
            write(paths.signals_cursor, SignalCursor(offset=new_state.applied))
    return batch, new_state, new


def _start_offset(paths: Paths) -> tuple[int, int]:
    """Where to start reading, and the saved cursor: the cursor, but never past the watermark.

    The cursor is written after the state, so normally ``cursor <= applied``. A cursor *ahead*
    of ``applied`` means the state is older than the cursor (state.json lost, quarantined or
    restored): the state is the authority on what was counted, so we read from ``applied`` and
    recount the lines it does not cover rather than silently skip them.
    """
    cursor = durable.read_model(
        paths.signals_cursor, SignalCursor, quarantine_dir=paths.quarantine, within=paths.user_part
    )
    state = read_state(paths)
    offset = cursor.offset if cursor else 0
    return min(offset, state.applied if state else 0), offset


def _read_batch(fd: int, start: int, stop: int) -> _Batch:
    """Complete lines from ``start`` (a line boundary) up to ``stop``; about PASS_BYTES of them.

    Cost follows the bytes after ``start``, never the log's size. A trailing line without its
    newline is not returned: it is still being written, or its writer died; it waits.
    """
    lines: list[tuple[int, str | None]] = []
    end = read_to = start
    last = b""
    pending = bytearray()
    while read_to < stop:
        chunk = os.pread(fd, min(_READ_BLOCK, stop - read_to), read_to)
        if not chunk:
            break
        read_to += len(chunk)
        pending += chunk
        *complete, rest = bytes(pending).split(b"\n")
        for raw in complete:
            end += len(raw) + 1
            lines.append((end, _key_of(raw)))
            last = raw
            if end - start >= PASS_BYTES:
                return _Batch(
                    start, end, lines, _tail_of(last + b"\n", end)
                )  # the rest is the next pass's
        pending = bytearray(rest)
    return _Batch(start, end, lines, _tail_of(last + b"\n", end) if lines else None)


def _tail_of(line: bytes, end: int) -> tuple[int, str]:
    """(start, sha256) of the last HEAD_CAP bytes of ``line``, a whole line ending at ``end``."""
    kept = line[-HEAD_CAP:]
    return end - len(kept), hashlib.sha256(kept).hexdigest()


def _key_of(raw: bytes) -> str | None:
    """The line's key, or ``None`` if it is not a JSON object with a non-empty string ``key``."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    key = data.get("key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


def _apply(state: SignalState, batch: _Batch, identity: LogIdentity) -> tuple[SignalState, int]:
    """Pure: the state after counting ``batch``, and how many lines were new."""
    counts = dict(state.counts)
    invalid = state.invalid
    new = 0
    for end, key in batch.lines:
        if end <= state.applied:
            continue  # counted by a run whose cursor write never happened
        new += 1
        if key is None:
            invalid += 1
        else:
            counts[key] = counts.get(key, 0) + 1
    applied = max(state.applied, batch.end)
    if applied > state.applied and batch.tail is not None:
        # The watermark moves to the batch's last line: that line is what the next run checks.
        identity = identity.model_copy(
            update={"tail_start": batch.tail[0], "tail_sha256": batch.tail[1]}
        )
    log = identity if identity.head_sha256 or state.log is None else state.log
    return SignalState(counts=counts, applied=applied, invalid=invalid, log=log), new


# ------------------------------------------------------------------------------- identity, reset


def _identity(fd: int) -> tuple[LogIdentity, int]:
    """(dev, inode, hash of the first line) of the open log, and its current size."""
    st = os.fstat(fd)
    head = os.pread(fd, HEAD_CAP, 0)
    newline = head.find(b"\n")
    if newline >= 0:
        digest: str | None = hashlib.sha256(head[: newline + 1]).hexdigest()
    elif len(head) >= HEAD_CAP:
        digest = hashlib.sha256(head).hexdigest()  # an over-long first line: its prefix is stable
    else:
        digest = None  # no complete first line yet: nothing that could have been counted
    return LogIdentity(dev=st.st_dev, inode=st.st_ino, head_sha256=digest), st.st_size


def _check_same_log(paths: Paths, fd: int, state: SignalState) -> LogIdentity:
    """The open log's identity, with the tail of ``state.applied``; raise :class:`LogReplaced`
    unless it is the log ``state`` counted.

    Content, not inode, decides (SPEC §13.5): a copy is the same log. Two short reads at most —
    the first line and the line ending at ``applied`` — so the cost never follows the log's size.
    """
    now, size = _identity(fd)
    was = state.log
    if was is None or state.applied == 0:
        return now  # nothing counted yet, so nothing to protect
    if size < state.applied:
        raise _log_changed(
            paths, f"was truncated (it has {size} bytes, {state.applied} were already counted)"
        )
    if was.head_sha256 and now.head_sha256 != was.head_sha256:
        raise _log_changed(paths, "was replaced (its first line changed)")
    if was.tail_sha256 is None or was.tail_start is None:
        # A state saved before tails were recorded: take the tail from the log now (the first
        # line and length agree), and the next save records it.
        start, digest = _tail_at(paths, fd, state.applied)
    else:
        start, digest = was.tail_start, was.tail_sha256
        length = state.applied - start
        data = os.pread(fd, length, start) if 0 < length <= HEAD_CAP else b""
        if hashlib.sha256(data).hexdigest() != digest:
            raise _log_changed(
                paths,
                f"was replaced (the last line counted, ending at byte {state.applied}, "
                "is not the same)",
            )
    return now.model_copy(update={"tail_start": start, "tail_sha256": digest})


def _tail_at(paths: Paths, fd: int, end: int) -> tuple[int, str]:
    """(start, sha256) of the line ending at ``end``, as :func:`_read_batch` records it."""
    base = max(0, end - HEAD_CAP)
    data = os.pread(fd, end - base, base)
    if not data.endswith(b"\n"):
        raise _log_changed(
            paths, f"was replaced (no line ends at byte {end}, where counting stopped)"
        )
    return _tail_of(data[data.rfind(b"\n", 0, len(data) - 1) + 1 :], end)


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
        fd = _open_log(paths)
        if fd is None:
            raise _log_changed(
                paths, f"was removed ({state.applied} bytes of it were already counted)"
            )
        try:
            _check_same_log(paths, fd, state)
        except OSError as exc:
            raise StateError(f"cannot read {paths.observations}: {exc}") from exc
        finally:
            os.close(fd)
    except StateError as exc:
        return str(exc)
    return None


def _open_log(paths: Paths) -> int | None:
    """The log open for reading, or ``None`` if there is none. Never follows a symlink and never
    blocks (a FIFO planted there would hang every command, status included); anything but a
    regular file is a :class:`StateError` naming the path."""
    real_directories(paths.observations.parent, below=paths.user_part)
    try:
        fd = os.open(paths.observations, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {paths.observations}: {exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StateError(f"cannot read {paths.observations}: not a regular file; move it aside")
    return fd


def _log_changed(paths: Paths, what: str) -> LogReplaced:
    return LogReplaced(
        f"{paths.observations} {what}. The signal counter stopped rather than mix counts from "
        "two different logs; run `watcher signals --reset` to discard the saved counts and "
        "recount this log from zero on purpose"
    )


def _reset(paths: Paths, identity: LogIdentity | None, write: WriteModel) -> None:
    """Fresh state for the current log, then cursor 0.

    A crash between the two writes leaves ``applied == 0`` with the old cursor; reading starts
    at ``min(cursor, applied)`` = 0, so the recount still covers the whole log.
    """
    with signals_lock(paths):
        write(paths.signals_state, SignalState(log=identity))
        write(paths.signals_cursor, SignalCursor(offset=0))


def _count_without_log(paths: Paths, *, reset: bool, write: WriteModel) -> CountResult | None:
    """No log when we looked: zero new lines — or ``None`` when one exists by the time we hold the
    lock. The log is created under the signals lock (append), so only there does "no log, yet
    lines were counted" mean it was removed; without the lock, a counter that found no log while
    another process appended and counted took a new log for a removed one (exit 5 for nothing;
    tests/test_signals.py)."""
    if reset:
        _reset(paths, None, write)
    state = read_state(paths) or SignalState()
    if state.applied > 0:
        with signals_lock(
            paths
        ):  # taken only here: a count of a data dir with no log writes nothing
            if os.path.lexists(paths.observations):
                return None
            state = read_state(paths) or SignalState()
    if state.applied > 0:
        raise _log_changed(paths, f"was removed ({state.applied} bytes of it were already counted)")
    return CountResult(dict(state.counts), state.invalid, state.applied, 0)
