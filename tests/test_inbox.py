"""Inbox records (SPEC §4.1): the pure operations and the derived state."""

from __future__ import annotations

import pytest
from _fakes.records import error, record, verdict

from watcher.state import records
from watcher.config import Paths
from watcher.models import InboxRecord, Usage
from watcher.state.records import (
    EMPTY,
    RAW_LIMIT,
    Fingerprint,
    fingerprint,
    finish,
    mark_interrupted,
    reserve,
    state_of,
)
from watcher.store import _index
from watcher.store.files import FileStore


def _reserve(rec: InboxRecord) -> InboxRecord:
    return reserve(rec, command="scan", entrypoint="cli", provider="offline", model="heuristic-v1", pid=4242)


def _failed(times: int) -> InboxRecord:
    rec = record()
    for _ in range(times):
        rec = finish(_reserve(rec), verdict=None, error=error())
    return rec


def test_new_record_is_pending_with_cached_prompt_and_cap_3() -> None:
    """A fresh record has no attempts, no verdict, cap 3, and its prompt cached."""
    rec = records.new_record(record().comment, record().prompt)
    assert (state_of(rec), rec.cap, rec.attempts, rec.verdict) == ("pending", 3, [], None)
    assert rec.prompt == record().prompt


def test_reserve_appends_attempt_n_plus_1_with_null_outcome() -> None:
    """reserve adds attempt n+1, outcome null, with who reserved it; the state is reserved."""
    rec = _reserve(_failed(1))
    last = rec.attempts[-1]
    assert (last.n, last.outcome, last.pid, last.command, last.entrypoint) == (2, None, 4242, "scan", "cli")
    assert last.reserved_at.endswith("Z")
    assert state_of(rec) == "reserved"


def test_reserve_does_not_mutate_its_input() -> None:
    """Pure: the record passed in is unchanged."""
    rec = record()
    _reserve(rec)
    assert rec.attempts == []


def test_reserve_defaults_pid_to_this_process() -> None:
    """Without pid=, the reservation names the current process."""
    import os

    rec = reserve(record(), command="recheck", entrypoint="bridge", provider="openai", model="m")
    assert rec.attempts[-1].pid == os.getpid()


def test_cannot_reserve_past_the_cap() -> None:
    """After cap attempts, reserve refuses (the budget is 3, the first included)."""
    rec = _failed(3)
    assert state_of(rec) == "exhausted"
    with pytest.raises(ValueError, match="no attempt left"):
        _reserve(rec)


def test_cannot_reserve_after_a_verdict() -> None:
    """A record with a verdict is done; reserve refuses."""
    rec = finish(_reserve(record()), verdict=verdict(), error=None)
    with pytest.raises(ValueError, match="no attempt left"):
        _reserve(rec)


def test_cannot_reserve_over_an_open_reservation() -> None:
    """A reserved attempt must be closed (finished or interrupted) before another is reserved."""
    with pytest.raises(ValueError, match="still reserved"):
        _reserve(_reserve(record()))


def test_finish_with_verdict_is_done() -> None:
    """finish(verdict) sets outcome ok, finished_at, the verdict; state done."""
    rec = finish(_reserve(record()), verdict=verdict(), error=None, raw='{"x":1}', usage=Usage(input_tokens=3),
                 duration_ms=12)
    last = rec.attempts[-1]
    assert (last.outcome, last.error, last.raw, last.duration_ms) == ("ok", None, '{"x":1}', 12)
    assert last.finished_at is not None and rec.verdict == verdict()
    assert state_of(rec) == "done"


def test_finish_with_error_is_failed_below_cap() -> None:
    """finish(error) with attempts < cap: outcome error, state failed."""
    rec = _failed(2)
    assert [a.outcome for a in rec.attempts] == ["error", "error"]
    assert rec.attempts[-1].error == error()
    assert state_of(rec) == "failed"


def test_finish_requires_exactly_one_of_verdict_or_error() -> None:
    """Both or neither is a programming error."""
    reserved = _reserve(record())
    with pytest.raises(ValueError):
        finish(reserved, verdict=None, error=None)
    with pytest.raises(ValueError):
        finish(reserved, verdict=verdict(), error=error())


def test_finish_requires_a_reserved_attempt() -> None:
    """finish on a record whose last attempt is closed (or absent) refuses."""
    with pytest.raises(ValueError, match="not reserved"):
        finish(record(), verdict=verdict(), error=None)
    with pytest.raises(ValueError, match="not reserved"):
        finish(_failed(1), verdict=verdict(), error=None)


def test_finish_keeps_at_most_raw_limit_of_the_raw_body() -> None:
    """The raw body is kept, truncated to the first 16 KiB."""
    rec = finish(_reserve(record()), verdict=None, error=error(), raw="x" * (RAW_LIMIT + 100))
    assert rec.attempts[-1].raw == "x" * RAW_LIMIT
    wide = finish(_reserve(record()), verdict=None, error=error(), raw="é" * RAW_LIMIT).attempts[-1].raw
    assert wide is not None and len(wide.encode()) <= RAW_LIMIT and set(wide) == {"é"}


def test_mark_interrupted_closes_the_orphan_and_keeps_it_spent() -> None:
    """An orphaned reservation becomes error kind interrupted; the attempt still counts."""
    rec = mark_interrupted(_reserve(_failed(1)))
    last = rec.attempts[-1]
    assert (len(rec.attempts), last.outcome, last.error and last.error.kind) == (2, "error", "interrupted")
    assert "4242" in last.error.message  # type: ignore[union-attr]
    assert state_of(rec) == "failed"


def test_interrupted_third_attempt_is_exhausted() -> None:
    """An interrupted attempt at the cap leaves the comment exhausted."""
    assert state_of(mark_interrupted(_reserve(_failed(2)))) == "exhausted"


def test_mark_interrupted_requires_a_reservation() -> None:
    """Nothing to interrupt when the last attempt is closed."""
    with pytest.raises(ValueError):
        mark_interrupted(_failed(1))


def test_reserved_wins_over_exhausted_in_derived_state() -> None:
    """A reservation at the cap reads as reserved, so recheck can close it as interrupted."""
    assert state_of(_reserve(_failed(2))) == "reserved"


def test_fingerprint_of_missing_record_is_empty() -> None:
    """A comment discovered by this run is planned as an empty record."""
    assert fingerprint(None) == EMPTY == fingerprint(record()) == Fingerprint(0, None, None, False)


def test_fingerprint_tracks_attempts_outcome_error_kind_and_verdict() -> None:
    """Every change another command can make shows up in the fingerprint."""
    reserved = _reserve(record())
    failed = finish(reserved, verdict=None, error=error("timeout"))
    done = finish(_reserve(failed), verdict=verdict(), error=None)
    prints = [fingerprint(r) for r in (record(), reserved, failed, done)]
    assert prints == [
        Fingerprint(0, None, None, False),
        Fingerprint(1, None, None, False),
        Fingerprint(1, "error", "timeout", False),
        Fingerprint(2, "ok", None, True),
    ]
    assert fingerprint(failed) != fingerprint(finish(reserved, verdict=None, error=error("network")))


def test_save_then_load_round_trips(paths: Paths) -> None:
    """save writes inbox/<id>.json durably; load reads it back equal."""
    rec = _failed(1)
    FileStore(paths).save_record(rec)
    assert paths.inbox_file("abc1").exists()
    assert FileStore(paths).load_record("abc1") == rec
    assert FileStore(paths).load_record("zzz9") is None


def test_stamp_changes_on_every_save(paths: Paths) -> None:
    """The stamp identifies a version: a new save gives a new stamp; a missing file gives None."""
    assert _index.stamp(paths.inbox_file("abc1")) is None
    FileStore(paths).save_record(record())
    first = _index.stamp(paths.inbox_file("abc1"))
    FileStore(paths).save_record(record())
    assert first is not None and _index.stamp(paths.inbox_file("abc1")) != first


@pytest.mark.parametrize("cid", ["abc1", "z", "0123456789abcdef"])
def test_valid_ids(cid: str) -> None:
    """Forem id_codes: lower-case letters and digits, 1–16 chars."""
    assert records.is_valid_id(cid)


@pytest.mark.parametrize("cid", ["", "ABC", "a/b", "..", "a.json", "0123456789abcdef0", "a b", "é"])
def test_invalid_ids(cid: str) -> None:
    """Anything that could walk out of inbox/ or collide is rejected."""
    assert not records.is_valid_id(cid)
