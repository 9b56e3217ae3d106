"""SPEC §16.4 with §16.5: a reply draft is a provider call, so it counts against
WATCHER_MONTHLY_TOKENS like a verdict's attempt — its worst case (the draft prompt at 4 characters
a token plus the draft's 1024-token output cap) admitted under the lock before its reservation,
what the provider reported once it is over, and a lost tally is built again with the drafts.

The fake provider reports 100 input and 20 output tokens for each draft it writes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from _draft_data import drafts_of, seed
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import Answer, run_main

from watcher.config import Paths
from watcher.pipeline.budget import count_month, month_used
from watcher.state import drafts
from watcher.state.tokens import TokenTally, next_month
from watcher.store.files import FileStore

REACHED = "monthly token budget reached ({used} of {budget}) — raise WATCHER_MONTHLY_TOKENS or wait for {next}"


def _month() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


def _draft(data_dir: Path, fake: FakeProvider, budget: int | None = None) -> Answer:
    env = {**IN_PROCESS_ENV, **({"WATCHER_MONTHLY_TOKENS": str(budget)} if budget is not None else {})}
    return run_main("cli", "draft", "q1", "--json", data_dir=data_dir, env=env, hooks=in_process_hooks(fake))


def _fake() -> FakeProvider:
    fake = FakeProvider()
    fake.label_last = True  # the draft prompt quotes the parent first
    return fake


def test_a_draft_records_the_worst_case_it_was_admitted_with(data_dir: Path) -> None:
    """The draft's worst case is its prompt (system and user) at 4 characters a token, rounded
    up, plus 1024; the month counts the 120 tokens the provider reported for it."""
    seed(data_dir)
    fake = _fake()
    answer = _draft(data_dir, fake, budget=1_000_000)
    assert answer.returncode == 0, answer.stderr
    (body,) = fake.bodies
    chars = sum(len(str(m["content"])) for m in body["messages"])
    (made,) = drafts_of(data_dir)
    assert made["worst_tokens"] == -(-chars // 4) + 1024
    assert month_used(FileStore(Paths(data_dir)), _month()) == 120


def test_a_draft_that_does_not_fit_is_refused_before_its_reservation(data_dir: Path) -> None:
    """After a draft of 120 tokens, a budget one token short of 120 plus the next draft's worst
    case: exit 3 with the batch's message, no call, no draft reserved."""
    seed(data_dir)
    fake = _fake()
    assert _draft(data_dir, fake).returncode == 0
    worst = drafts_of(data_dir)[0]["worst_tokens"]
    assert isinstance(worst, int)
    budget = 120 + worst - 1
    before = _month()
    answer = _draft(data_dir, fake, budget=budget)
    assert answer.returncode == 3, answer.stderr
    doc = json.loads(answer.stdout)
    assert doc["error"]["kind"] == "token_budget"
    said = {REACHED.format(used=120, budget=budget, next=next_month(m)) for m in {before, _month()}}
    assert doc["error"]["message"] in said
    assert len(fake.calls) == 1 and len(drafts_of(data_dir)) == 1


def test_a_draft_that_fits_exactly_is_made(data_dir: Path) -> None:
    """A budget of exactly 120 plus the next draft's worst case: the draft is made."""
    seed(data_dir)
    fake = _fake()
    assert _draft(data_dir, fake).returncode == 0
    worst = drafts_of(data_dir)[0]["worst_tokens"]
    assert isinstance(worst, int)
    answer = _draft(data_dir, fake, budget=120 + worst)
    assert answer.returncode == 0, answer.stderr
    assert len(fake.calls) == 2


def test_an_open_draft_entry_is_settled_from_the_drafts_recorded_usage(data_dir: Path) -> None:
    """A tally left with a draft's entry open (its run died after writing the outcome) counts
    the usage the draft recorded, not its worst case."""
    store = seed(data_dir)
    record = store.load_record("q1")
    assert record is not None
    reserved = drafts.reserve_draft(record, entrypoint="cli", provider="openai", model="fake-model")
    done = drafts.finish_draft(reserved, text="Thanks!", error=None, input_tokens=40, output_tokens=10)
    store.save_record(done)
    store.save_token_tally(TokenTally(month=_month(), open={"draft:q1/1": 900}))
    assert month_used(store, _month()) == 50


def test_a_lost_tally_is_built_again_with_the_drafts(data_dir: Path) -> None:
    """tokens.json lost: the month counted from the inbox files holds a draft's reported usage
    and, at its worst case, a draft whose process died; an offline draft counts nothing."""
    store = seed(data_dir)
    assert _draft(data_dir, _fake(), 10**9).returncode == 0  # a budget: the tally is kept
    orphan = store.load_record("q1")
    assert orphan is not None
    orphan = drafts.reserve_draft(orphan, entrypoint="cli", provider="openai", model="fake-model")
    dead = orphan.drafts[-1].model_copy(update={"worst_tokens": 500})
    store.save_record(orphan.model_copy(update={"drafts": [*orphan.drafts[:-1], dead]}))
    other = store.load_record("p0")
    assert other is not None
    offline = drafts.reserve_draft(other, entrypoint="cli", provider="offline", model="heuristic-v2")
    store.save_record(drafts.finish_draft(offline, text="Hi", error=None))
    Paths(data_dir).tokens.unlink()
    month = _month()
    assert count_month(store, month).used == 120 + 500
