"""SPEC §15.1: the pipeline lock guards decisions, not calls; up to ``--parallel`` calls in flight.

Real processes against the recording loopback provider: two runs at once split the work, a kill
during a parallel batch leaves every call lock free for the next run to close the orphans, a stop
starts no further call while the calls already out finish and are saved, and one call's deadline
never cuts a sibling's socket.
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import envelope, run, start, write_export

from watcher.state import records
from watcher.config import Paths
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


# The first comment of a batch: its call goes out alone and its verdict lets the rest go out in
# parallel (slow start, SPEC §16.6). Sorted first: it is the oldest in write_export.
WARM = "w0"


def _labels(n: int, prefix: str = "p") -> list[str]:
    return [f"{prefix}{i:02d}" for i in range(n)]


def _called(doc: dict[str, object]) -> list[str]:
    items = doc["result"]["items"]  # type: ignore[index]
    return [i["id"] for i in items if i["outcome"] in ("verdict", "error")]  # type: ignore[index]


def test_two_runs_started_together_split_the_work_and_call_no_comment_twice(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """A CLI scan and a bridge scan of the same 10 comments, started together with --parallel 4: each
    comment is called exactly once in all, by one of them; neither waits out the lock nor exits 4."""
    labels = _labels(10)
    export = write_export(tmp_path / "e.json", labels)
    fake.default, fake.slow_s = "slow", 0.3
    args = ("scan", "--source", str(export), "--limit", "10", "--parallel", "4", "--json")
    cli = start("cli", *args, data_dir=data_dir, env=fake.env())
    bridge = start("bridge", *args[:-1], data_dir=data_dir, env=fake.env())
    out_cli, out_bridge = cli.communicate(timeout=60), bridge.communicate(timeout=60)
    assert (cli.returncode, bridge.returncode) == (0, 0), (out_cli, out_bridge)
    by_cli, by_bridge = _called(envelope(out_cli)), _called(envelope(out_bridge))
    assert len(by_cli) == len(set(by_cli)) and len(by_bridge) == len(set(by_bridge))
    assert sorted(by_cli + by_bridge) == sorted(labels)  # split between them, none twice
    assert Counter(fake.calls) == Counter(labels)
    store = FileStore(Paths(data_dir))
    assert all(len(rec.attempts) == 1 and rec.verdict is not None
               for rec in (store.load_record(cid) for cid in labels) if rec is not None)


def test_a_sigkill_during_a_parallel_batch_leaves_free_call_locks_and_the_next_run_calls_nothing(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """Four calls held open, then SIGKILL: every in-flight comment is left reserved with its call lock
    free (the kernel released it), and the next recheck closes them as interrupted without a call."""
    labels = _labels(4, "k")
    export = write_export(tmp_path / "e.json", [WARM, *labels])
    for label in labels:
        fake.script(label, "hold", "verdict")
    proc = start("cli", "scan", "--source", str(export), "--parallel", "4", "--json", data_dir=data_dir,
                 env=fake.env())
    fake.wait_in_flight(count=4)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    fake.release()
    store = FileStore(Paths(data_dir))
    for label in labels:
        record = store.load_record(label)
        assert record is not None and records.state_of(record) == "reserved"
        assert not store.call_in_flight(label)
    calls_before = list(fake.calls)
    after = run("bridge", "recheck", data_dir=data_dir, env=fake.env())
    assert after.returncode == 0, after.stdout
    assert sorted((i["id"], i["outcome"]) for i in envelope(after)["result"]["items"]) == [
        (label, "interrupted") for label in labels]
    assert fake.calls == calls_before and sorted(fake.calls) == labels + [WARM]  # none after the kill


def test_a_signal_during_a_parallel_batch_closes_every_call_in_flight_as_interrupted(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """Ctrl-C with three calls out: all three are recorded interrupted at once (still counted), the
    rest are not_started, and the run exits 130 with its summary."""
    labels = _labels(5, "s")
    export = write_export(tmp_path / "e.json", [WARM, *labels])
    for label in labels:
        fake.script(label, "hold")
    proc = start("cli", "scan", "--source", str(export), "--parallel", "3", "--json", data_dir=data_dir,
                 env=fake.env())
    fake.wait_in_flight(count=3)
    proc.send_signal(signal.SIGINT)
    out = proc.communicate(timeout=30)
    fake.release()
    assert proc.returncode == 130, out
    items = {i["id"]: i["outcome"] for i in envelope(out)["result"]["items"]}
    assert sorted(items.values()) == ["interrupted"] * 3 + ["not_started"] * 2 + ["verdict"]
    store = FileStore(Paths(data_dir))
    for cid, outcome in items.items():
        record = store.load_record(cid)
        assert record is not None
        kinds = [a.error.kind for a in record.attempts if a.error]
        assert kinds == (["interrupted"] if outcome == "interrupted" else [])
    assert len(fake.calls) == 4


def test_a_stop_starts_no_further_call_and_the_calls_already_out_are_saved(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """--parallel 2: one call gets a 429 while the other is still out. No third call is started; the
    one out finishes and its verdict is saved; the summary says one call was already out."""
    export = write_export(tmp_path / "e.json", [WARM, "a1", "b1", "c1", "d1"])
    fake.slow_s = 1.0
    fake.script("a1", "429:600")
    fake.script("b1", "slow")
    proc = run("cli", "scan", "--source", str(export), "--parallel", "2", "--json", data_dir=data_dir,
               env=fake.env())
    doc = envelope(proc)
    assert proc.returncode == 3, proc.stdout
    items = {i["id"]: i["outcome"] for i in doc["result"]["items"]}
    assert items == {WARM: "verdict", "a1": "error", "b1": "verdict", "c1": "not_started",
                     "d1": "not_started"}
    assert doc["result"]["stopped"] == "rate_limited" and doc["result"]["already_out"] == 1
    assert sorted(fake.calls) == ["a1", "b1", WARM]
    record = FileStore(Paths(data_dir)).load_record("b1")
    assert record is not None and record.verdict is not None


def test_after_a_failure_no_call_goes_out_until_the_calls_out_have_answered(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """--parallel 2, both calls after the first fail with 500: the first failure sends nothing more
    until the other call has answered (slow start, SPEC §16.6); that is the second failure in a
    row, which stops the batch (§13.1): t3 and t4 are never sent."""
    export = write_export(tmp_path / "e.json", [WARM, "t1", "t2", "t3", "t4"])
    fake.script("t1", "500")
    fake.script("t2", "500")
    proc = run("cli", "scan", "--source", str(export), "--parallel", "2", "--json", data_dir=data_dir,
               env=fake.env())
    doc = envelope(proc)
    assert proc.returncode == 3, proc.stdout
    items = {i["id"]: i["outcome"] for i in doc["result"]["items"]}
    assert items == {WARM: "verdict", "t1": "error", "t2": "error", "t3": "not_started",
                     "t4": "not_started"}
    assert doc["result"]["stopped"] == "server_error"
    assert sorted(fake.calls) == ["t1", "t2", WARM]


def test_one_calls_deadline_never_cuts_a_sibling_call(data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """Two calls out at once, a 2 s deadline: one trickles past it and ends as a timeout; the other,
    answering in 1.5 s on its own connection, keeps its socket and its verdict."""
    export = write_export(tmp_path / "e.json", [WARM, "late", "fine"])
    fake.trickle_s, fake.slow_s = 0.5, 1.5
    fake.script("late", "trickle")
    fake.script("fine", "slow")
    env = {**fake.env(), "WATCHER_TIMEOUT": "2"}
    began = time.monotonic()
    proc = run("cli", "scan", "--source", str(export), "--parallel", "2", "--json", data_dir=data_dir, env=env)
    elapsed = time.monotonic() - began
    items = {i["id"]: (i["outcome"], i.get("kind")) for i in envelope(proc)["result"]["items"]}
    assert items == {WARM: ("verdict", None), "late": ("error", "timeout"), "fine": ("verdict", None)}
    started = {label: start for label, start, _ in fake.spans}
    # Both were sent together: one after the other, "fine" could only have started at "late"'s deadline.
    assert abs(started["fine"] - started["late"]) < 1.0 and elapsed < 10


def test_a_half_open_attempt_goes_out_alone(data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """A breaker opened by a bad request allows one real attempt an hour (SPEC §13.1), the first an
    hour after it opened (the second run's clock is that much later): with --parallel 4 that attempt
    is the only request in flight until it has answered; once it has, the breaker closes and the
    rest go out together."""
    labels = _labels(5, "h")
    export = write_export(tmp_path / "e.json", labels)
    fake.script("h00", "400")
    first = run("cli", "scan", "--source", str(export), "--limit", "1", "--json", data_dir=data_dir, env=fake.env())
    assert first.returncode == 2, first.stdout
    fake.calls.clear()
    fake.spans.clear()
    fake.default, fake.slow_s = "slow", 0.5
    second = run("cli", "scan", "--source", str(export), "--parallel", "4", "--json", data_dir=data_dir,
                 env=fake.env(), clock_shift=timedelta(seconds=3660))
    assert second.returncode == 0, second.stdout
    assert sorted(fake.calls) == labels[1:]
    spans = sorted(fake.spans, key=lambda span: span[1])
    probe_end = spans[0][2]
    assert all(start >= probe_end for _, start, _ in spans[1:])  # the half-open call went out alone
    assert max(start for _, start, _ in spans[1:]) < min(end for _, _, end in spans[1:])  # the rest together
    assert FileStore(Paths(data_dir)).load_provider_state().breaker is None
