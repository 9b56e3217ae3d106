"""SPEC §8: the observation log and the counter that counts each line exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from _fakes.records import emit as _emit
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.config import Paths
from watcher.errors import CorruptState, LogReplaced, SaveFailed, exit_code_for
from watcher.models import SignalCursor, SignalState
from watcher.pipeline import new_run_id
from watcher.store import durable, signals
from watcher.store.locks import signals_lock
from watcher.store.oscalls import OsCalls


def _line(key: str, width: int = 40) -> bytes:
    """One valid signal line of exactly ``width`` bytes, newline included."""
    head = json.dumps({"key": key, "pad": ""}, separators=(",", ":"))
    pad = width - len(head) - 1
    assert pad >= 0
    return (json.dumps({"key": key, "pad": "x" * pad}, separators=(",", ":")) + "\n").encode()


def _write_raw(paths: Paths, data: bytes) -> None:
    """Append bytes to the log as a (possibly broken) writer would, bypassing append()."""
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.observations, "ab") as fh:
        fh.write(data)


class FailReplaceInto(OsCalls):
    """The real OS calls, but the next ``times`` durable writes of ``target`` fail at the rename
    (a full disk); ``failed`` logs them."""

    def __init__(self, target: Path, *, times: int = 1) -> None:
        self.target, self.times = target, times
        self.failed: list[str] = []

    def replace(self, src: str | Path, dst: str | Path) -> None:
        if Path(dst) == self.target and len(self.failed) < self.times:
            self.failed.append(str(dst))
            raise OSError(28, "No space left on device (injected)")
        super().replace(src, dst)


def _cursor(paths: Paths) -> int:
    cursor = durable.read_model(paths.signals_cursor, SignalCursor, quarantine_dir=paths.quarantine)
    return cursor.offset if cursor else 0


def _counts(paths: Paths) -> dict[str, int]:
    state = signals.read_state(paths)
    return state.counts if state else {}


# ------------------------------------------------------------------------------------ appending


def test_append_writes_one_json_line_per_event_with_ts_first(paths: Paths) -> None:
    """Each event becomes one line: ts first, then key and the caller's fields."""
    signals.append(
        paths,
        [
            {"key": "verdict.ok", "comment": "3bkf", "run": "r1", "entrypoint": "cli"},
            {"key": "lock.busy", "run": "r1", "entrypoint": "bridge"},
        ],
    )
    lines = paths.observations.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [list(r) for r in records] == [
        ["ts", "key", "comment", "run", "entrypoint"],
        ["ts", "key", "run", "entrypoint"],
    ]
    assert records[0]["key"] == "verdict.ok" and records[1]["entrypoint"] == "bridge"
    assert records[0]["ts"].endswith("Z")


def test_append_puts_all_lines_of_one_call_in_a_single_write(paths: Paths) -> None:
    """Three events are one os.write of three whole lines, so they cannot interleave."""
    writes: list[bytes] = []

    class Watched(OsCalls):
        def write(self, fd: int, data: bytes) -> int:
            writes.append(bytes(data))
            return super().write(fd, data)

    events = [{"key": f"k{i}", "run": "r", "entrypoint": "cli"} for i in range(3)]
    signals.append(paths, events, calls=Watched())
    assert len(writes) == 1
    assert writes[0].count(b"\n") == 3 and writes[0].endswith(b"\n")


def test_emit_appends_one_line_and_leaves_out_a_missing_comment(paths: Paths) -> None:
    """emit() writes one line; comment=None is omitted rather than written as null."""
    _emit(paths, "batch.stopped.rate_limited", run="r9", entrypoint="bridge")
    (record,) = [json.loads(line) for line in paths.observations.read_text().splitlines()]
    assert record["key"] == "batch.stopped.rate_limited"
    assert "comment" not in record and record["run"] == "r9" and record["entrypoint"] == "bridge"


def test_append_of_no_events_creates_nothing(paths: Paths) -> None:
    """An empty batch writes nothing and does not create the log."""
    signals.append(paths, [])
    assert not paths.observations.exists()


def test_append_rejects_an_event_without_a_string_key(paths: Paths) -> None:
    """A programming error (no key) is refused before anything is written."""
    with pytest.raises(ValueError, match="key"):
        signals.append(paths, [{"key": "ok"}, {"comment": "3bkf"}])
    assert not paths.observations.exists()


def test_append_starts_a_fresh_line_after_a_torn_tail(paths: Paths) -> None:
    """A dead writer's unterminated fragment becomes one invalid line, not part of ours."""
    _write_raw(paths, b'{"key":"half')
    _emit(paths, "verdict.ok", run="r", entrypoint="cli")
    result = signals.run_counter(paths)
    assert result.counts == {"verdict.ok": 1}
    assert result.invalid == 1


def test_append_raises_save_failed_when_the_disk_fails(paths: Paths) -> None:
    """An OSError while appending surfaces as SaveFailed (exit 5)."""

    _emit(paths, "verdict.ok", run="r", entrypoint="cli")  # the log exists already

    class Full(OsCalls):
        def write(self, fd: int, data: bytes) -> int:
            raise OSError(28, "No space left on device (injected)")

    with pytest.raises(SaveFailed) as caught:
        signals.append(paths, [{"key": "verdict.ok", "run": "r", "entrypoint": "cli"}], calls=Full())
    assert exit_code_for(caught.value) == 5
    assert str(paths.observations) in str(caught.value)


def test_counted_lines_are_fsynced_before_the_watermark_that_claims_them(paths: Paths) -> None:
    """Appends skip fsync; the counter fsyncs the log before saving state, so applied never
    points past durable bytes after a power cut."""
    _emit(paths, "verdict.ok", run="r", entrypoint="cli")
    events: list[str] = []

    class Watched(OsCalls):
        def fsync(self, fd: int) -> None:
            if os.path.samestat(os.fstat(fd), os.stat(paths.observations)):
                events.append("log fsync")
            super().fsync(fd)

    def write_model(path: Path, model: Any) -> None:
        events.append(f"write {path.name}")
        durable.write_model(path, model, calls=calls)

    calls = Watched()
    signals.append(paths, [{"key": "verdict.ok", "run": "r", "entrypoint": "cli"}], calls=calls)
    assert events == []  # the append itself made no fsync of the log
    signals.run_counter(paths, write=write_model, calls=calls)
    assert events[:2] == ["log fsync", "write state.json"]


def test_new_run_id_is_short_and_unique() -> None:
    """Run ids are short lowercase hex strings that do not repeat."""
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) <= 16 and i.isalnum() and i == i.lower() for i in ids)


# ------------------------------------------------------------------------------------- counting


def test_missing_log_counts_nothing_and_creates_nothing(paths: Paths) -> None:
    """No log yet: zero counts, no error, no files written."""
    result = signals.run_counter(paths)
    assert (result.counts, result.invalid, result.applied, result.new_lines) == ({}, 0, 0, 0)
    assert list(paths.root.iterdir()) == []


def test_each_line_is_counted_once_across_runs(paths: Paths) -> None:
    """Lines are counted when first seen and never again; later lines add on top."""
    signals.append(paths, [{"key": "verdict.ok"}, {"key": "verdict.ok"}, {"key": "item.deferred"}])
    first = signals.run_counter(paths)
    _emit(paths, "verdict.ok", run="r", entrypoint="cli")
    second = signals.run_counter(paths)
    third = signals.run_counter(paths)
    assert first.counts == {"verdict.ok": 2, "item.deferred": 1} and first.new_lines == 3
    assert second.counts == {"verdict.ok": 3, "item.deferred": 1} and second.new_lines == 1
    assert third.new_lines == 0 and third.lines_read == 0
    assert third.applied == _cursor(paths) == paths.observations.stat().st_size


def test_failed_state_save_keeps_counts_at_zero_and_the_next_run_counts_both(paths: Paths) -> None:
    """Seed window (a): OSError on the first state save → counts 0; next run counts 2."""
    _write_raw(paths, _line("K") + _line("K"))
    full = FailReplaceInto(paths.signals_state)

    with pytest.raises(SaveFailed):
        signals.run_counter(paths, calls=full)
    assert full.failed == [str(paths.signals_state)]
    assert _counts(paths) == {}
    assert _cursor(paths) == 0  # the cursor did not move past lines that were never counted

    result = signals.run_counter(paths)
    assert result.counts == {"K": 2}


def test_failed_cursor_save_after_counting_replays_without_double_counting(paths: Paths) -> None:
    """Seed window (b): cursor save fails after counts saved as 2; +1 line → reads 3, count 3."""
    _write_raw(paths, _line("K") + _line("K"))
    with pytest.raises(SaveFailed):
        signals.run_counter(paths, calls=FailReplaceInto(paths.signals_cursor))
    assert _counts(paths) == {"K": 2}
    assert _cursor(paths) == 0

    _write_raw(paths, _line("K"))
    replay = signals.run_counter(paths)
    assert replay.lines_read == 3
    assert replay.new_lines == 1
    assert replay.counts == {"K": 3}

    idle = signals.run_counter(paths)
    assert idle.lines_read == 0 and idle.counts == {"K": 3}


def test_worked_example_forty_byte_lines_ending_at_40_80_120(paths: Paths) -> None:
    """Seed's worked example: A=80 after the crash; 40 and 80 are skipped, 120 makes N=3."""
    _write_raw(paths, _line("K") + _line("K"))
    with pytest.raises(SaveFailed):
        signals.run_counter(paths, calls=FailReplaceInto(paths.signals_cursor))
    state = signals.read_state(paths)
    assert state is not None
    assert (state.counts, state.applied, _cursor(paths)) == ({"K": 2}, 80, 0)

    _write_raw(paths, _line("K"))
    assert paths.observations.stat().st_size == 120
    result = signals.run_counter(paths)

    assert (result.counts, result.applied, _cursor(paths)) == ({"K": 3}, 120, 120)
    assert (result.lines_read, result.new_lines) == (3, 1)  # 2 + 0 + 0 + 1, not 2 + 3


def test_a_line_without_its_newline_waits_until_complete(paths: Paths) -> None:
    """A trailing partial line is neither counted nor skipped; it counts once finished."""
    whole = _line("K")
    _write_raw(paths, _line("J") + whole[:25])
    first = signals.run_counter(paths)
    assert first.counts == {"J": 1} and first.invalid == 0
    assert first.applied == _cursor(paths) == 40

    _write_raw(paths, whole[25:])
    second = signals.run_counter(paths)
    assert second.counts == {"J": 1, "K": 1} and second.invalid == 0
    assert second.applied == 80


def test_lines_that_are_not_keyed_json_objects_count_as_invalid(paths: Paths) -> None:
    """Binary, non-JSON, keyless, non-string or empty key, non-object lines → invalid."""
    bad = [
        b"\xff\xfe\x00\x81binary",
        b"not json at all",
        b'{"comment": "3bkf"}',
        b'{"key": 7}',
        b'{"key": ""}',
        b'["key", "verdict.ok"]',
        b'"verdict.ok"',
        b"",
        b"[" * 100_000,
    ]
    _write_raw(paths, b"\n".join(bad) + b"\n" + _line("verdict.ok"))
    result = signals.run_counter(paths)
    assert result.invalid == len(bad)
    assert result.counts == {"verdict.ok": 1}
    assert signals.run_counter(paths).invalid == len(bad)  # and never counted twice


def test_counter_reads_only_the_new_bytes_not_the_whole_log(paths: Paths) -> None:
    """After a large counted log, a run reads the new line plus a capped head, nothing else."""
    _write_raw(paths, _line("old", 200) * 2000)  # 400 KB already counted
    signals.run_counter(paths)
    _write_raw(paths, _line("new", 200))
    read: list[int] = []

    class Watched(OsCalls):
        def pread(self, fd: int, size: int, offset: int) -> bytes:
            data = super().pread(fd, size, offset)
            read.append(len(data))
            return data

    result = signals.run_counter(paths, calls=Watched())
    assert result.counts == {"old": 2000, "new": 1}
    assert sum(read) <= 200 + 2 * signals.HEAD_CAP


def test_a_backlog_is_counted_in_several_durable_passes(paths: Paths) -> None:
    """With small passes, the state is saved per pass and the totals are still exact."""
    saves: list[int] = []

    def write_model(path: Path, model: Any) -> None:
        if isinstance(model, SignalState):
            saves.append(model.applied)
        durable.write_model(path, model)

    _write_raw(paths, _line("K") * 10)
    result = signals.run_counter(paths, write=write_model, pass_bytes=100)
    assert result.counts == {"K": 10} and result.new_lines == 10
    assert saves == [120, 240, 360, 400]


def test_cursor_ahead_of_applied_recounts_the_uncovered_lines(paths: Paths) -> None:
    """A cursor past the watermark (state older than cursor) never hides uncounted lines."""
    _write_raw(paths, _line("K") * 2)
    signals.run_counter(paths)
    _write_raw(paths, _line("K") * 2)
    durable.write_model(paths.signals_cursor, SignalCursor(offset=160))
    result = signals.run_counter(paths)
    assert result.counts == {"K": 4}
    assert result.applied == _cursor(paths) == 160


def test_lost_state_file_recounts_the_whole_log_once(paths: Paths) -> None:
    """state.json gone but cursor at the end: the counter starts over from 0, exactly."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    paths.signals_state.unlink()
    result = signals.run_counter(paths)
    assert result.counts == {"K": 3}
    assert signals.run_counter(paths).counts == {"K": 3}


def test_state_lost_while_reading_is_recounted_from_the_watermark_under_the_lock(paths: Paths) -> None:
    """If the watermark moves back between the read and the lock, the gap is read too."""
    _write_raw(paths, _line("K") * 2)
    signals.run_counter(paths)
    _write_raw(paths, _line("K"))

    def lock_after_losing_state() -> AbstractContextManager[None]:
        paths.signals_state.unlink(missing_ok=True)  # as a concurrent --reset-then-crash would
        return signals_lock(paths)

    result = signals.run_counter(paths, lock=lock_after_losing_state)
    assert result.counts == {"K": 3}


def test_read_state_is_none_before_the_first_count_then_the_saved_counts(paths: Paths) -> None:
    """read_state (for `watcher status`) reads what the counter saved, without counting."""
    assert signals.read_state(paths) is None
    _emit(paths, "lock.busy", run="r", entrypoint="cli")
    assert signals.read_state(paths) is None
    signals.run_counter(paths)
    state = signals.read_state(paths)
    assert state is not None and state.counts == {"lock.busy": 1}


# ------------------------------------------------------------------------ identity and --reset


def _counted_log(paths: Paths, n: int = 3) -> None:
    _write_raw(paths, _line("K") * n)
    signals.run_counter(paths)


def test_a_log_replaced_by_another_file_stops_the_counter(paths: Paths) -> None:
    """A new inode at the log's path → LogReplaced (exit 5) naming --reset; nothing saved."""
    _counted_log(paths)
    other = paths.root / "other.jsonl"
    other.write_bytes(_line("Z") * 5)
    os.replace(other, paths.observations)
    with pytest.raises(LogReplaced) as caught:
        signals.run_counter(paths)
    assert exit_code_for(caught.value) == 5
    assert "replaced" in str(caught.value) and "watcher signals --reset" in str(caught.value)
    assert _counts(paths) == {"K": 3}


def test_a_log_rewritten_in_place_with_a_new_first_line_stops_the_counter(paths: Paths) -> None:
    """Same inode, different first line → replaced, even when it is longer than before."""
    _counted_log(paths)
    with open(paths.observations, "r+b") as fh:
        fh.write(_line("Z") * 4)
    with pytest.raises(LogReplaced, match="first line changed"):
        signals.run_counter(paths)


def test_a_truncated_log_stops_the_counter(paths: Paths) -> None:
    """A log shorter than what was counted → LogReplaced saying it was truncated."""
    _counted_log(paths)
    os.truncate(paths.observations, 80)
    with pytest.raises(LogReplaced, match="truncated") as caught:
        signals.run_counter(paths)
    assert "--reset" in str(caught.value)


def test_a_removed_log_after_counting_stops_the_counter(paths: Paths) -> None:
    """Counts exist but the log is gone → LogReplaced, not silently zero new lines."""
    _counted_log(paths)
    paths.observations.unlink()
    with pytest.raises(LogReplaced, match="removed"):
        signals.run_counter(paths)


def test_reset_recounts_a_replaced_log_from_zero(paths: Paths) -> None:
    """--reset discards old counts and counts the current log once; later runs are normal."""
    _counted_log(paths)
    other = paths.root / "other.jsonl"
    other.write_bytes(_line("Z") * 5)
    os.replace(other, paths.observations)

    result = signals.run_counter(paths, reset=True)
    assert result.counts == {"Z": 5} and result.applied == 200

    _write_raw(paths, _line("Z"))
    assert signals.run_counter(paths).counts == {"Z": 6}


def test_reset_on_an_unchanged_log_gives_the_same_counts(paths: Paths) -> None:
    """Resetting a healthy log recounts it to the same totals, not double."""
    _counted_log(paths, 4)
    assert signals.run_counter(paths, reset=True).counts == {"K": 4}


def test_reset_without_a_log_clears_counts_of_a_removed_log(paths: Paths) -> None:
    """After the log was removed, --reset accepts that and starts from nothing."""
    _counted_log(paths)
    paths.observations.unlink()
    result = signals.run_counter(paths, reset=True)
    assert (result.counts, result.applied, _cursor(paths)) == ({}, 0, 0)
    _emit(paths, "verdict.ok", run="r", entrypoint="cli")
    assert signals.run_counter(paths).counts == {"verdict.ok": 1}


def test_reset_interrupted_before_the_cursor_write_still_recounts_everything(paths: Paths) -> None:
    """Crash between the fresh state and cursor 0: the next run starts at min(cursor, 0)."""
    _counted_log(paths, 3)
    with pytest.raises(SaveFailed):
        signals.run_counter(paths, reset=True, calls=FailReplaceInto(paths.signals_cursor))
    assert _counts(paths) == {} and _cursor(paths) == 120
    assert signals.run_counter(paths).counts == {"K": 3}


def test_counter_state_validates_against_the_state_model(paths: Paths) -> None:
    """state.json holds counts, applied, invalid and the log identity of the counted file."""
    _counted_log(paths, 2)
    data = json.loads(paths.signals_state.read_text())
    st = paths.observations.stat()
    assert data["schema_version"] == 2 and data["applied"] == 80 and data["invalid"] == 0
    assert (data["log"]["dev"], data["log"]["inode"]) == (st.st_dev, st.st_ino)
    assert isinstance(data["log"]["head_sha256"], str) and len(data["log"]["head_sha256"]) == 64
    assert Counter(data["counts"]) == Counter({"K": 2})


def test_an_identical_copy_put_in_place_of_the_log_is_the_same_log(paths: Paths) -> None:
    """Same bytes, new inode (cp, a restore): the counts go on exactly; the new inode is recorded."""
    _counted_log(paths)
    copy = paths.root / "copy.jsonl"
    copy.write_bytes(paths.observations.read_bytes())
    os.replace(copy, paths.observations)
    _write_raw(paths, _line("K"))
    result = signals.run_counter(paths)
    assert (result.counts, result.new_lines) == ({"K": 4}, 1)
    state = signals.read_state(paths)
    assert state is not None and state.log is not None
    assert state.log.inode == paths.observations.stat().st_ino


# ------------------------------------------------------------------------- any crash sequence

_OPS = st.one_of(
    st.tuples(st.just("append"), st.sampled_from(["a", "b", "c"]), st.integers(1, 3)),
    st.tuples(st.just("half"), st.sampled_from(["a", "b", "c"])),
    st.just(("count",)),
    st.just(("fail_state",)),
    st.just(("fail_cursor",)),
)


@settings(max_examples=40, deadline=None)
@given(ops=st.lists(_OPS, max_size=12))
def test_counts_match_the_log_after_any_sequence_of_appends_and_failed_saves(
    ops: list[tuple[Any, ...]],
) -> None:
    """Whatever fails when, counts never exceed the complete lines and end equal to them."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = Paths(Path(tmp))
        expected: Counter[str] = Counter()
        half: bytes | None = None  # the rest of a line still being written
        before: Counter[str] = Counter()
        for op in ops:
            if op[0] in ("append", "half") and half is not None:
                _write_raw(paths, half)  # the slow writer finishes its line first
                half = None
            if op[0] == "append":
                signals.append(paths, [{"key": op[1]}] * op[2])
                expected[op[1]] += op[2]
            elif op[0] == "half":
                line = _line(op[1])
                _write_raw(paths, line[:20])
                half, expected[op[1]] = line[20:], expected[op[1]] + 1
            else:
                target = {"fail_state": paths.signals_state, "fail_cursor": paths.signals_cursor}.get(op[0])
                calls = FailReplaceInto(target) if target is not None else None
                with contextlib.suppress(SaveFailed):
                    signals.run_counter(paths, calls=calls)
            now = Counter(_counts(paths))
            assert now >= before  # counts never go down
            assert not now - expected  # ...and never run ahead of the complete lines
            before = now
        if half is not None:
            _write_raw(paths, half)
        result = signals.run_counter(paths)
        assert Counter(result.counts) == expected
        assert result.invalid == 0


def test_corrupt_state_is_quarantined_loudly_and_the_next_run_recounts(paths: Paths) -> None:
    """A state.json that does not parse → CorruptState (exit 5), moved aside; then a full recount."""
    _counted_log(paths, 3)
    paths.signals_state.write_text("{not json")
    with pytest.raises(CorruptState) as caught:
        signals.run_counter(paths)
    assert exit_code_for(caught.value) == 5
    assert not paths.signals_state.exists() and list(paths.quarantine.iterdir())
    assert signals.run_counter(paths).counts == {"K": 3}


def test_a_log_created_and_counted_elsewhere_since_the_counter_looked_is_counted_not_called_removed(
        paths: Paths) -> None:
    """Two processes on a new data dir: this counter finds no log; before it reads the saved state,
    another process appends the first lines and counts them. That is a new log, not a removed
    one: the lines are counted, no LogReplaced (the counter re-checks under the signals lock,
    where every log is created)."""
    looked: list[bool] = []

    class NoLogYet(OsCalls):
        def open(self, path: Path, flags: int, mode: int = 0o777) -> int:
            if path == paths.observations and not looked:
                looked.append(True)
                _emit(paths, "a.first", run="other", entrypoint="cli")  # meanwhile another appends…
                signals.run_counter(paths)  # …and counts it
                raise FileNotFoundError(2, "No such file or directory (when this counter looked)")
            return super().open(path, flags, mode)

    result = signals.run_counter(paths, calls=NoLogYet())
    assert looked == [True]
    assert result.counts == {"a.first": 1} and result.new_lines == 0
