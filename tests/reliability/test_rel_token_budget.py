"""SPEC §16.4 under concurrency and kills: WATCHER_MONTHLY_TOKENS holds with several real processes
calling at once against a tight budget, some killed after their reservation or after the answer
(no usage recorded), then recovery runs. Checked from disk afterwards: the month's recorded tokens
never exceed the budget by more than one call's output cap per run in flight
(:func:`_rel_invariants.tokens_within_budget`), and the call budget of SPEC §1 holds as ever.

The provider here reports usage that grows with the request: the prompt at 2 characters a token
(the budget estimates 4, so the estimate undercounts, as it can for code or CJK text) and 1800
output tokens (a reply draft, which asks for at most 1024, that many), so each call costs about its
worst case and a budget of a few calls binds. Reply drafts (SPEC §16.5) run beside the scans: they
spend from the same month.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import FakeProvider, Trickle, _asks_for_a_draft, running_fake
from _fakes.records import record
from _proc import run_main, start, write_export
from _rel_invariants import call_budget, one_call_per_run, records, tokens_within_budget

from watcher.models import Attempt, Usage
from watcher.state.drafts_model import Draft
from watcher.state.tokens import OUTPUT_CAP, worst_case

pytestmark = pytest.mark.slow

OUT = 1800
AGENT = {"WATCHER_PROVIDER": "agent"}  # a scan that records the comments and calls nothing
RUNS = 4  # processes calling at once


class Metered(FakeProvider):
    """The loopback fake, reporting the usage described in the module's doc."""

    def handle(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        status, extra, payload = super().handle(body, headers)
        if status != 200 or isinstance(payload, Trickle):
            return status, extra, payload
        doc = json.loads(payload)
        chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        out = min(OUT, int(body.get("max_completion_tokens") or body.get("max_tokens") or OUT))
        doc["usage"] = {"prompt_tokens": -(-chars // 2), "completion_tokens": out,
                        "total_tokens": -(-chars // 2) + out}
        return status, extra, json.dumps(doc).encode()


def test_concurrent_runs_and_kills_never_spend_past_the_budget(tmp_path: Path) -> None:
    """Three scans and a reply draft at once (one scan killed after its reservation, one after its
    answer) on twelve comments with room for about eight calls, then recovery and more drafts: the
    budget stops them (exit 3), and the month's recorded tokens, drafts' included, stay within it
    plus one output cap per run in flight."""
    data = tmp_path / "rig"
    labels = [f"t{i}" for i in range(12)]
    export = write_export(tmp_path / "export.json", labels)
    assert run_main("cli", "scan", "--source", str(export), data_dir=data, env=AGENT).returncode == 0
    worst = max(worst_case(r.prompt) for r in records(data).values())
    budget = 8 * worst + worst // 2
    with running_fake(Metered()) as fake:
        fake.script("t3", "500")  # no usage reported: its worst case counts
        fake.script("t5", "malformed")  # an answer that does not parse still reports usage
        env = {**fake.env(), "WATCHER_MONTHLY_TOKENS": str(budget)}
        scan = ("scan", "--source", str(export), "--limit", "20")
        procs = [start("cli", *scan, "--json", data_dir=data, env=env),
                 start("bridge", *scan, data_dir=data, env=env, fault="kill_at=after_reserve_write"),
                 start("cli", *scan, "--json", data_dir=data, env=env, fault="kill_at=after_answer"),
                 start("cli", "draft", "t11", "--json", data_dir=data, env=env)]
        outs = [proc.communicate(timeout=120) for proc in procs]
        # The draft: made (0), refused by the budget (3), or its comment's call in flight (4).
        assert all(proc.returncode in (0, 3, 4, -9) for proc in procs), outs
        refused = [out for proc, out in zip(procs, outs, strict=True) if proc.returncode == 3]
        for command in ("recheck", "scan", "recheck", "scan"):
            args = (command, "--source", str(export)) if command == "scan" else (command,)
            done = run_main("cli", *args, "--limit", "20", "--json", data_dir=data, env=env)
            assert done.returncode in (0, 3), done.stderr
            if done.returncode == 3:
                refused.append((done.stdout, done.stderr))
        # Drafts once the batches met the budget: unchecked, these would spend well past it.
        for label in ("t0", "t1", "t2", "t4", "t6", "t7", "t8", "t9"):
            answer = run_main("cli", "draft", label, "--json", data_dir=data, env=env)
            assert answer.returncode in (0, 3), answer.stderr
            if answer.returncode == 3:  # refused before its reservation: no result, the error
                assert json.loads(answer.stdout)["error"]["kind"] == "token_budget", answer.stdout
        # The verdicts' calls: a draft's is not one of the comment's 3 attempts (SPEC §16.5).
        calls = [fake.label_of(body) for body in fake.bodies if not _asks_for_a_draft(body)]
        drafted = len(fake.bodies) - len(calls)
    recs = records(data)
    assert tokens_within_budget(recs, budget, RUNS) == []
    assert call_budget(recs, calls) + one_call_per_run(recs) == []
    assert refused and all("monthly token budget reached" in out for out, _ in refused), refused
    assert 0 < len(calls) < len(labels)  # the budget bound: most comments were never called
    assert drafted == sum(len(r.drafts) for r in recs.values())  # each draft call on disk
    for out, _ in refused:
        doc = json.loads(out)
        assert doc["error"]["kind"] == "token_budget" and doc["result"]["stopped"] == "token_budget"


def test_the_invariant_catches_a_month_over_the_budget() -> None:
    """The check sees a month whose recorded usage is over the budget by more than a cap per run,
    and lets one within that slack pass (so the rig above cannot pass by seeing nothing)."""
    spent = record("over1")
    month = "2026-05-14T09:00:00.000000Z"
    attempts = [Attempt(n=i + 1, reserved_at=month, command="scan", entrypoint="cli", pid=1, provider="openai",
                        model="m", outcome="ok", usage=Usage(input_tokens=1000, output_tokens=1000))
                for i in range(3)]
    spent = spent.model_copy(update={"attempts": attempts})
    assert tokens_within_budget({"over1": spent}, 6000 - OUTPUT_CAP, 1) == []
    found = tokens_within_budget({"over1": spent}, 6000 - OUTPUT_CAP - 1, 1)
    assert len(found) == 1 and found[0].startswith("2026-05: 6000 tokens recorded")


def test_the_invariant_counts_the_reply_drafts_too() -> None:
    """A month within the budget by its attempts and over it with its drafts' recorded usage is
    caught."""
    spent = record("over2")
    month = "2026-05-14T09:00:00.000000Z"
    attempt = Attempt(n=1, reserved_at=month, command="scan", entrypoint="cli", pid=1, provider="openai",
                      model="m", outcome="ok", usage=Usage(input_tokens=1000, output_tokens=1000))
    made = Draft(n=1, reserved_at=month, entrypoint="cli", pid=1, provider="openai", model="m",
                 outcome="ok", text="Thanks!", input_tokens=1000, output_tokens=1000)
    spent = spent.model_copy(update={"attempts": [attempt], "drafts": [made]})
    found = tokens_within_budget({"over2": spent}, 4000 - OUTPUT_CAP - 1, 1)
    assert len(found) == 1 and found[0].startswith("2026-05: 4000 tokens recorded")
