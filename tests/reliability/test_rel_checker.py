"""The invariant checker itself: quiet on a healthy data dir, and it sees each planted violation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import run_main
from _rel_harness import Baseline, recover_until_quiet, rig_hooks
from _rel_invariants import Expect, Snapshot, check_all, snapshot

from watcher.state import records
from watcher.config import Paths
from watcher.store.durable import write_model
from watcher.store.files import FileStore


def _edit(data: Path, cid: str, fn: Callable[[dict], None]) -> None:  # type: ignore[type-arg]
    path = data / "inbox" / f"{cid}.json"
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _fourth_call(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    fake.calls += ["bad"]  # bad has 3 attempts and 3 calls after recovery


def _claim_on_top_of_calls(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    # bad's second attempt becomes an agent's claim: its 3 calls now have only 2 attempts of their own.
    _edit(data, "bad", lambda doc: doc["attempts"][1].update(provider="agent", command="claim",
                                                              lease_until=doc["attempts"][1]["reserved_at"]))


def _claim_without_lease(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "bad", lambda doc: doc["attempts"][1].update(provider="agent", command="claim"))


def _call_without_file(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    fake.calls.append("ghost")


def _verdict_requested(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    fake.calls.append("done")


def _attempt_dropped(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "flaky", lambda doc: doc.update(attempts=[], verdict=None))


def _same_pid_twice(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "bad", lambda doc: doc["attempts"][1].update(pid=doc["attempts"][0]["pid"]))


def _raw_dropped(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "bad", lambda doc: doc["attempts"][0].update(raw=None))


def _mark_lost(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    paths = Paths(data)
    index = json.loads(paths.seen.read_text())
    index["comments"]["done"]["triage"] = "open"
    paths.seen.write_text(json.dumps(index))


def _uncounted_line(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    with open(data / "observations.jsonl", "a") as log:
        log.write('{"key": "verdict.ok"}\n')


def _index_behind(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    paths = Paths(data)
    index = json.loads(paths.seen.read_text())
    index["comments"]["flaky"]["attempts"] += 1
    paths.seen.write_text(json.dumps(index))


def _finished_attempt_rewritten(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "bad", lambda doc: doc["attempts"][0].update(pid=4_999_999))


def _invalid_line_not_counted(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    with open(data / "observations.jsonl", "a") as log:
        log.write("not json\n")


def _quarantined(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    (data / "quarantine").mkdir(exist_ok=True)
    (data / "quarantine" / "seen.json").write_text("{}")


def _reservation_left(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    record = FileStore(Paths(data)).load_record("newb")
    assert record is not None
    record = record.model_copy(update={"verdict": None, "attempts": record.attempts[:-1]})
    write_model(Paths(data).inbox_file("newb"), records.reserve(record, command="scan", entrypoint="cli",
                                                              provider="openai", model="m", pid=1))


def _went_on_after_setup_stop(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    pid: list[int] = []

    def unreachable(doc: dict) -> None:  # type: ignore[type-arg]
        doc["attempts"][0]["error"]["kind"] = "unreachable"
        pid.append(doc["attempts"][0]["pid"])

    _edit(data, "bad", unreachable)  # the baseline scan's first attempt for "bad"...
    _edit(data, "flaky", lambda doc: doc["attempts"][-1].update(pid=pid[0]))  # ...and that run went on


def _transient_across_runs(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    # The baseline scan's first answer (orph: 529) becomes another run's; its next (flaky) a 529 too:
    # the second in a row, and that scan went on to bad and done.
    _edit(data, "orph", lambda doc: doc["attempts"][0].update(pid=4_999_998))
    _edit(data, "flaky", lambda doc: doc["attempts"][0]["error"].update(kind="overloaded"))


def _attempt_inside_a_429_cooldown(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    # bad's first answer becomes a 429 without a usable Retry-After; recovery tried it again seconds later.
    _edit(data, "bad", lambda doc: doc["attempts"][0]["error"].update(kind="rate_limited", retry_after_s=None))


def _attempt_after_a_poisoned_breaker(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    # bad's first answer becomes a real call's model_not_found, and bad (and others) were tried within the hour.
    _edit(data, "bad", lambda doc: doc["attempts"][0]["error"].update(kind="model_not_found"))
    _edit(data, "bad", lambda doc: doc["attempts"][0].update(pid=4_999_997))  # alone in its run


def _attempt_after_gone(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    # bad was seen deleted when its first attempt was reserved; its later attempts came after that.
    _edit(data, "bad", lambda doc: doc.update(gone={"kind": "deleted", "seen_at": doc["attempts"][0]["reserved_at"],
                                                   "why": "missing from its thread"}))


def _attempt_on_a_text_never_had(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    _edit(data, "bad", lambda doc: doc["attempts"][0].update(text_sha256="0" * 64))


def _edit_resetting_the_budget(data: Path, fake: FakeProvider, before: Snapshot) -> None:
    edit = {"seen_at": "2026-12-01T00:00:00Z", "text": "before", "text_sha256": records.text_sha256("before"),
            "attempts": 9, "judged": True}
    _edit(data, "bad", lambda doc: doc.update(edits=[edit]))


PLANTS = {
    "more than 3 calls": (_fourth_call, "model calls + 0 claims (cap 3)"),
    "calls and claims over the cap": (_claim_on_top_of_calls, "3 model calls + 1 claims (cap 3)"),
    "a claim without its lease": (_claim_without_lease, "a claim is exactly an agent's attempt with a lease"),
    "a call with no attempt on disk": (_call_without_file, "no inbox file records an attempt"),
    "a saved verdict requested again": (_verdict_requested, "verdict was on disk, then requested"),
    "attempts went down": (_attempt_dropped, "attempts went down"),
    "two attempts in one run": (_same_pid_twice, "attempts by one run"),
    "raw body not kept": (_raw_dropped, "kept no raw body"),
    "triage mark lost": (_mark_lost, "marked 'replied'"),
    "a log line not counted": (_uncounted_line, "signal counts differ from the log"),
    "a reservation left open": (_reservation_left, "still reserved after recovery"),
    "index out of step with the inbox": (_index_behind, "seen.json says"),
    "a finished attempt rewritten": (_finished_attempt_rewritten, "was rewritten as"),
    "an invalid log line not counted": (_invalid_line_not_counted, "invalid log line(s), counter says"),
    "a file quarantined for nothing": (_quarantined, "quarantined although nothing was corrupted"),
    "a run going on after a setup failure": (_went_on_after_setup_stop, "should have stopped it"),
    "a run going on after the second transient failure across runs": (_transient_across_runs,
                                                                       "the second transient failure in a row"),
    "an attempt inside a 429's cooldown": (_attempt_inside_a_429_cooldown, "attempted inside that cooldown"),
    "an attempt within the hour of a model_not_found": (_attempt_after_a_poisoned_breaker, "within the hour"),
    "an attempt after its comment was seen deleted": (_attempt_after_gone, "were reserved after"),
    "an attempt on a text the comment never had": (_attempt_on_a_text_never_had, "a text the comment never had"),
    "an edit past the attempts made": (_edit_resetting_the_budget, "edits at attempt counts"),
}


@pytest.fixture
def recovered(baseline: Baseline, tmp_path: Path):  # type: ignore[no-untyped-def]
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "rig", fake)
        before = snapshot(data, fake.calls)
        recovery = recover_until_quiet(data, fake.env(), baseline.full_export)
        assert recovery.problems == []
        yield data, fake, before, baseline


def test_checker_finds_nothing_wrong_after_a_clean_recovery(recovered) -> None:  # type: ignore[no-untyped-def]
    """Baseline, then recovery until quiet, no fault: the checker reports nothing."""
    data, fake, before, baseline = recovered
    assert check_all(data, fake.calls, before=before, expect=Expect(marks=baseline.marks)) == []


@pytest.mark.parametrize("plant", list(PLANTS))
def test_checker_reports_a_planted_violation(plant: str, recovered) -> None:  # type: ignore[no-untyped-def]
    """Each broken promise, planted by hand into a healthy data dir, is reported by name."""
    data, fake, before, baseline = recovered
    assert run_main("cli", "status", data_dir=data, env=fake.env(), hooks=rig_hooks()).returncode == 0
    do, expected = PLANTS[plant]
    do(data, fake, before)
    found = check_all(data, fake.calls, before=before, expect=Expect(marks=baseline.marks))
    assert any(expected in v for v in found), found


def test_recovery_runs_after_a_cooldown_instead_of_sleeping_it_out(baseline: Baseline, tmp_path: Path) -> None:
    """A 429 with Retry-After 30 s (exit 3): the next recovery round runs past it and judges the comment."""
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "case", fake)
        fake.script("flaky", "429:30", "verdict")
        recovery = recover_until_quiet(data, fake.env(), baseline.full_export, fake=fake)
        assert recovery.problems == []
        assert 3 in [run.returncode for run in recovery.runs]  # the cooldown was met
        record = FileStore(Paths(data)).load_record("flaky")
        assert record is not None and record.verdict is not None
