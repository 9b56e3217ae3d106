"""What ``watcher migrate`` brings besides the comments (SPEC §16.3): the provider state, what cron
has said, and the observation signals — each merged so that a rerun changes nothing more.

- ``provider.json`` (SPEC §7.2, §13.1, §15.5, §16.6): the stricter of the two. The later cooldown,
  the longer run of 429s, the later unanswered transient failure, an open breaker over none (the
  data dir's own when both have one: a breaker holds only for the setup it was opened for, and the
  data dir's is the latest word on it), and the comments that spent an attempt in the outage from
  both. Each is a maximum or a union, so merging again is a no-op. The month's usage is not kept
  here: ``watcher usage`` reads it from the attempts, which come with the comments.
- ``cron.json`` (SPEC §15.3): what was said is not said again — a problem keeps the latest time it
  was said, a comment named by either store stays named. A round forgets what no longer holds.
- ``observations.jsonl`` (SPEC §8): the source's valid lines the data dir's log has not had yet
  are appended in one write, each tagged with the source log (the hash of its first line) and
  where the line ends there; the counter then counts each once, as every appended line. A rerun
  starts after the last tagged line the data dir's log holds — also when a power cut kept only a
  part of the write — so nothing is counted twice. Lines about the bundled sample's comments are
  left out, as the comments are.
- ``config.toml`` (SPEC §3): the settings of the source's data dir, copied into a data dir that has
  none — a store configured there would otherwise lose its provider and account on the way in;
  a data dir's own settings are never replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Any

from watcher.models import CronProblem, CronState, ProviderState
from watcher.store import Store, durable
from watcher.store.signal_log import HEAD_CAP, open_log

# Each line brought over says from which log (the hash of its first line) and where it ended there.
FROM, AT = "migrated_from", "migrated_at"


# ---- provider.json -------------------------------------------------------------------------------


def bring_provider(src: Store, dst: Store, sample: Collection[str]) -> bool:
    """Merge the source's provider state into the data dir's; whether anything was written."""
    theirs = dst.load_provider_state()
    merged = merged_provider(src.load_provider_state(), theirs, sample)
    if merged == theirs:
        return False
    dst.save_provider_state(merged)
    return True


def merged_provider(
    src: ProviderState, dst: ProviderState, sample: Collection[str] = ()
) -> ProviderState:
    """The stricter of two provider states (see the module's docstring)."""
    update: dict[str, Any] = {
        "rate_limited_in_a_row": max(src.rate_limited_in_a_row, dst.rate_limited_in_a_row),
        "spent": [*dst.spent, *(c for c in src.spent if c not in dst.spent and c not in sample)],
        "breaker": dst.breaker or src.breaker,
    }
    if src.cooldown_until and (not dst.cooldown_until or src.cooldown_until > dst.cooldown_until):
        update |= {
            "cooldown_until": src.cooldown_until,
            "reason": src.reason,
            "retry_after_s": src.retry_after_s,
        }
    if src.transient and (not dst.transient or src.transient.at > dst.transient.at):
        update["transient"] = src.transient
    return dst.model_copy(update=update)


# ---- cron.json -----------------------------------------------------------------------------------


def bring_cron(src: Store, dst: Store, sample: Collection[str]) -> bool:
    """Merge what the source's cron said into the data dir's; whether anything was written."""
    theirs = dst.load_cron_state()
    merged = merged_cron(src.load_cron_state(), theirs, sample)
    if merged == theirs:
        return False
    dst.save_cron_state(merged)
    return True


def merged_cron(src: CronState, dst: CronState, sample: Collection[str] = ()) -> CronState:
    """Everything either store's cron said, each problem at the latest time it was said."""
    problems: dict[str, CronProblem] = dict(dst.problems)
    for key, said in src.problems.items():
        if key not in problems or said.said_at > problems[key].said_at:
            problems[key] = said

    def union(mine: list[str], other: list[str]) -> list[str]:
        return sorted({*mine, *(c for c in other if c not in sample)})

    return dst.model_copy(
        update={
            "problems": problems,
            "named": union(dst.named, src.named),
            "named_failing": union(dst.named_failing, src.named_failing),
        }
    )


# ---- observations.jsonl --------------------------------------------------------------------------


def bring_signals(src: Store, dst: Store, sample: Collection[str]) -> int:
    """Append the source log's lines the data dir's log has not had yet; how many were appended."""
    data = _read_log(src)
    first = -1 if data is None else data.find(b"\n")
    if data is None or first < 0:
        return 0
    head = hashlib.sha256(data[: min(first + 1, HEAD_CAP)]).hexdigest()
    start, torn = _migrated_through(dst, head)
    events: list[dict[str, Any]] = []
    offset = start
    while (newline := data.find(b"\n", offset)) >= 0:  # a line without its newline: not yet
        event = _parsed(data[offset:newline])
        offset = newline + 1
        key = event.get("key") if event is not None else None
        # The others were counted as invalid where they were written: nothing to carry over.
        if (
            event is not None
            and isinstance(key, str)
            and key
            and event.get("comment") not in sample
        ):
            events.append({**event, FROM: head, AT: offset})
    if events:
        dst.append_signals(events)  # after a torn last line, a fresh line first (signal_log)
    elif torn:
        _end_line(dst)
    if events or torn:
        _sync_log(dst)
    return len(events)


def _read_log(store: Store) -> bytes | None:
    fd = open_log(store.paths)
    if fd is None:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _migrated_through(dst: Store, head: str) -> tuple[int, bool]:
    """Where in the source log (the one whose first line hashes to ``head``) the lines the data
    dir's log already has end (0: it has none of them), and whether the last of them lacks its
    newline — a power cut kept all of the write but its last byte: complete, but not counted
    until the line is ended, and not to be appended again."""
    data = _read_log(dst) or b""
    through, torn = 0, False
    tag = FROM.encode()
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        event = _parsed(line) if tag in line else None
        if event is not None and event.get(FROM) == head and isinstance(event.get(AT), int):
            through = max(through, event[AT])
            torn = i == len(lines) - 1
    return through, torn


def _end_line(dst: Store) -> None:
    """Give the log's last line its newline (the one append of nothing makes), under the lock."""
    from watcher.store.locks import signals_lock
    from watcher.store.signal_log import append_bytes

    with signals_lock(dst.paths):
        append_bytes(dst.paths.observations, b"")


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


def _sync_log(dst: Store) -> None:
    """Make the appended lines durable before the migration is finished: appends are not synced
    (the counter syncs before it counts), and a power cut that kept only some of them, with the
    migration done, would have them appended and counted again by a rerun."""
    fd = open_log(dst.paths)
    if fd is None:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- config.toml ----------------------------------------------------------------------------


def bring_config(src: Store, dst: Store) -> str:
    """The source's ``config.toml`` (its settings: provider, account, maybe a key) into a data dir
    that has none: ``"copied"``; ``"same"`` when the data dir's is identical, ``"kept"`` when it
    has its own (never replaced), ``"none"`` when the source has no readable one."""
    data = _read_regular(src.paths.config_file)
    if data is None:
        return "none"
    target = dst.paths.config_file
    if os.path.lexists(target):
        return "same" if _read_regular(target) == data else "kept"
    # A temp file made by mkstemp is 0600, as a file that may hold a key should be.
    durable.write_bytes(target, data, within=dst.paths.user_part)
    return "copied"


def _read_regular(path: Path) -> bytes | None:
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
