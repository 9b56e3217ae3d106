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

import functools
import json
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

from watcher.config import Paths
from watcher.models import LogIdentity, SignalCursor, SignalState
from watcher.store import durable
from watcher.store.locks import signals_lock
from watcher.store.oscalls import OS, OsCalls
from watcher.store.signal_log import (
    HEAD_CAP,
    AppendBytes,
    WriteModel,
    append,
    append_bytes,
    log_trouble,
    read_state,
)

# The log's appender and identity live in watcher.store.signal_log; the counter's callers and
# the store reach both here.
__all__ = [
    "HEAD_CAP",
    "PASS_BYTES",
    "AppendBytes",
    "CountResult",
    "WriteModel",
    "append",
    "append_bytes",
    "log_trouble",
    "read_state",
    "run_counter",
]
from watcher.store.signal_log import check_same_log, log_changed, log_identity, open_log, tail_of

# One durable state update per this many new bytes at most: a large backlog is counted in
# several passes, so memory and the time the lock is held stay bounded.
PASS_BYTES = 1 << 20
_READ_BLOCK = 64 * 1024


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


@dataclass(frozen=True)
class _Counting:
    """One counter run's paths and the seams it works through."""

    paths: Paths
    write: WriteModel
    lock: Callable[[], AbstractContextManager[None]]
    calls: OsCalls
    fsync: Callable[[int], None]
    pass_bytes: int


def run_counter(
    paths: Paths,
    *,
    reset: bool = False,
    write: WriteModel | None = None,
    lock: Callable[[], AbstractContextManager[None]] | None = None,
    calls: OsCalls | None = None,
    pass_bytes: int | None = None,
) -> CountResult:
    """Count every complete log line not counted yet, exactly once; return the saved totals.

    ``reset=True`` discards the saved counts and recounts the current log from offset 0 (what
    ``watcher signals --reset`` does after a replaced log). A missing log is zero new lines.
    Raises :class:`LogReplaced` when the log is not the file the counts came from (or is shorter
    than what was counted), :class:`SaveFailed` when a state or cursor write fails,
    :class:`CorruptState`/:class:`NewerSchema` for unreadable state, :class:`LockBusy`.

    ``write``: the durable write of the state and cursor; ``lock``: how to take the signals
    lock; ``calls``: the OS calls (:mod:`watcher.store.oscalls`); ``pass_bytes``: the new bytes
    one durable pass counts at most (:data:`PASS_BYTES`).
    """
    c = _Counting(
        paths,
        write or functools.partial(durable.write_model, within=paths.user_part, calls=calls),
        lock or functools.partial(signals_lock, paths),
        calls or OS,
        # The real fsync through this module's ``os``, looked up when it runs: the power-loss rig
        # plants a counter without it there (tests/reliability/test_rel_power_loss.py).
        calls.fsync if calls is not None else lambda fd: os.fsync(fd),
        PASS_BYTES if pass_bytes is None else pass_bytes,
    )
    fd = open_log(paths, c.calls)
    if fd is None:
        counted = _count_without_log(c, reset=reset)
        if counted is not None:
            return counted
        fd = open_log(paths, c.calls)  # created (and maybe counted by another) since we looked
        if fd is None:
            raise log_changed(paths, "disappeared while it was being counted")
    try:
        if reset:
            _reset(c, log_identity(fd, c.calls)[0])
        # Lines appended after this snapshot wait for the next run, so a busy log cannot keep
        # one run going forever.
        stop = os.fstat(fd).st_size
        new_lines = lines_read = 0
        synced = [False]  # one fsync of the log per run covers every pass (all read below `stop`)
        while True:
            batch, state, new = _one_pass(c, fd, stop, synced)
            new_lines += new
            lines_read += len(batch.lines)
            if not batch.lines or batch.end >= stop:
                break
    finally:
        os.close(fd)
    return CountResult(dict(state.counts), state.invalid, state.applied, new_lines, lines_read)


def _one_pass(
    c: _Counting, fd: int, stop: int, synced: list[bool]
) -> tuple[_Batch, SignalState, int]:
    paths, write = c.paths, c.write
    # Read before taking the lock, so appenders are not kept waiting while we parse.
    start, cursor = _start_offset(paths)
    batch = _read_batch(c, fd, start, stop)
    with c.lock():
        state = read_state(paths) or SignalState()
        identity = check_same_log(paths, fd, state, c.calls)
        if state.applied < batch.start:
            # A concurrent --reset (or a state.json lost since we looked) moved the watermark
            # back past where we began reading; counting our batch alone would skip the gap.
            batch = _read_batch(c, fd, state.applied, stop)
        new_state, new = _apply(state, batch, identity)
        if new_state != state:
            # Appends are not fsynced (see append_bytes): make the counted lines durable before
            # the watermark that claims them, or a power cut could leave applied past the log's end.
            if not synced[0]:
                c.fsync(fd)
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


def _read_batch(c: _Counting, fd: int, start: int, stop: int) -> _Batch:
    """Complete lines from ``start`` (a line boundary) up to ``stop``; about ``c.pass_bytes`` of
    them.

    Cost follows the bytes after ``start``, never the log's size. A trailing line without its
    newline is not returned: it is still being written, or its writer died; it waits.
    """
    lines: list[tuple[int, str | None]] = []
    end = read_to = start
    last = b""
    pending = bytearray()
    while read_to < stop:
        chunk = c.calls.pread(fd, min(_READ_BLOCK, stop - read_to), read_to)
        if not chunk:
            break
        read_to += len(chunk)
        pending += chunk
        *complete, rest = bytes(pending).split(b"\n")
        for raw in complete:
            end += len(raw) + 1
            lines.append((end, _key_of(raw)))
            last = raw
            if end - start >= c.pass_bytes:
                return _Batch(
                    start, end, lines, tail_of(last + b"\n", end)
                )  # the rest is the next pass's
        pending = bytearray(rest)
    return _Batch(start, end, lines, tail_of(last + b"\n", end) if lines else None)


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


def _reset(c: _Counting, identity: LogIdentity | None) -> None:
    """Fresh state for the current log, then cursor 0.

    A crash between the two writes leaves ``applied == 0`` with the old cursor; reading starts
    at ``min(cursor, applied)`` = 0, so the recount still covers the whole log.
    """
    paths = c.paths
    with c.lock():
        c.write(paths.signals_state, SignalState(log=identity))
        c.write(paths.signals_cursor, SignalCursor(offset=0))


def _count_without_log(c: _Counting, *, reset: bool) -> CountResult | None:
    """No log when we looked: zero new lines — or ``None`` when one exists by the time we hold the
    lock. The log is created under the signals lock (append), so only there does "no log, yet
    lines were counted" mean it was removed; without the lock, a counter that found no log while
    another process appended and counted took a new log for a removed one (exit 5 for nothing;
    tests/test_signals.py)."""
    paths = c.paths
    if reset:
        _reset(c, None)
    state = read_state(paths) or SignalState()
    if state.applied > 0:
        with c.lock():  # taken only here: a count of a data dir with no log writes nothing
            if os.path.lexists(paths.observations):
                return None
            state = read_state(paths) or SignalState()
    if state.applied > 0:
        raise log_changed(paths, f"was removed ({state.applied} bytes of it were already counted)")
    return CountResult(dict(state.counts), state.invalid, state.applied, 0)
