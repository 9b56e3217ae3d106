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
- ``tokens.json`` (SPEC §16.4): the data dir's tally of the month is counted again from every
  attempt once the source's are in, so the calls the source made this month count against a
  budget; a data dir with no tally yet gets one from its first call's run, counted the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from typing import Any

from watcher.models import CronProblem, CronState, ProviderState
from watcher.store import Store
from watcher.store.migrating import (
    end_log_line,
    log_head,
    read_log,
    read_regular,
    sync_log,
    write_settings,
)

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
    data = read_log(src.paths)
    head = None if data is None else log_head(data)
    if data is None or head is None:
        return 0
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
        end_log_line(dst.paths)
    if events or torn:
        sync_log(dst.paths)
    return len(events)


def _migrated_through(dst: Store, head: str) -> tuple[int, bool]:
    """Where in the source log (the one whose first line hashes to ``head``) the lines the data
    dir's log already has end (0: it has none of them), and whether the last of them lacks its
    newline — a power cut kept all of the write but its last byte: complete, but not counted
    until the line is ended, and not to be appended again."""
    data = read_log(dst.paths) or b""
    through, torn = 0, False
    tag = FROM.encode()
    lines = data.split(b"\n")
    for i, line in enumerate(lines):
        event = _parsed(line) if tag in line else None
        if event is not None and event.get(FROM) == head and isinstance(event.get(AT), int):
            through = max(through, event[AT])
            torn = i == len(lines) - 1
    return through, torn


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) else None


# ---- config.toml ----------------------------------------------------------------------------


def bring_config(src: Store, dst: Store) -> str:
    """The source's ``config.toml`` (its settings: provider, account, maybe a key) into a data dir
    that has none: ``"copied"``; ``"same"`` when the data dir's is identical, ``"kept"`` when it
    has its own (never replaced), ``"none"`` when the source has no readable one."""
    data = read_regular(src.paths.config_file)
    if data is None:
        return "none"
    target = dst.paths.config_file
    if os.path.lexists(target):
        return "same" if read_regular(target) == data else "kept"
    write_settings(dst.paths, data)
    return "copied"


# ---- tokens.json ---------------------------------------------------------------------------------


def recount_tokens(dst: Store) -> bool:
    """Count the data dir's month again from its attempts, now with the source's (a read of the
    month's inbox files under the lock: a migration holds it anyway). Whether a tally was there."""
    from watcher.pipeline.budget import count_month

    tally = dst.load_token_tally()
    if tally is None:
        return False
    dst.save_token_tally(count_month(dst, tally.month))
    return True
