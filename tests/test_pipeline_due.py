"""SPEC §16.3, budget fairness: the 10-minute rule after a provider-side failure, and not_sent.

In-process runs (``run_main``) with the recording fake injected as the provider factory and the
clock injected through ``Hooks.clock`` (tests/_fakes/clock.py): no sleeps.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.clock import later
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.util.timeutil import parse_iso


def _run(data_dir: Path, fake: FakeProvider, *args: str, by: timedelta = timedelta(0)) -> Any:
    done = run_main("cli", *args, "--json", data_dir=data_dir, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake, clock=later(by)))
    assert done.envelope is not None, done.stderr
    return done.envelope


@pytest.fixture
def export(tmp_path: Path) -> Path:
    return write_export(tmp_path / "export.json", ["d1", "d2"])


@pytest.mark.parametrize("behaviour", ["500", "529"])
def test_a_batch_leaves_a_comment_10_minutes_after_a_provider_side_failure(
        data_dir: Path, export: Path, behaviour: str) -> None:
    """A 500 (or 529) on scan: the recheck seconds later does not call it again, nor one 9 minutes
    later; one 11 minutes later does."""
    fake = FakeProvider()
    fake.script("d1", behaviour, "verdict")
    _run(data_dir, fake, "scan", "--source", str(export))
    assert fake.calls == ["d1", "d2"]
    soon = _run(data_dir, fake, "recheck")
    assert [(i["id"], i["outcome"]) for i in soon["result"]["items"]] == [("d1", "deferred")]
    assert "next due at" in soon["result"]["items"][0]["message"]
    _run(data_dir, fake, "recheck", by=timedelta(minutes=9))
    assert fake.calls == ["d1", "d2"]
    _run(data_dir, fake, "recheck", by=timedelta(minutes=11))
    assert fake.calls == ["d1", "d2", "d1"]


def test_recheck_naming_the_comment_calls_it_at_once(data_dir: Path, export: Path) -> None:
    """`recheck ID` is the person's choice: it calls the comment whatever the 10-minute rule."""
    fake = FakeProvider()
    fake.script("d1", "500", "verdict")
    _run(data_dir, fake, "scan", "--source", str(export))
    named = _run(data_dir, fake, "recheck", "d1")
    assert [(i["id"], i["outcome"]) for i in named["result"]["items"]] == [("d1", "verdict")]
    assert fake.calls == ["d1", "d2", "d1"]


def test_a_malformed_answer_may_be_rechecked_at_once(data_dir: Path, export: Path) -> None:
    """The model's answer failed, not the provider: the recheck seconds later calls it again."""
    fake = FakeProvider()
    fake.script("d1", "malformed", "verdict")
    _run(data_dir, fake, "scan", "--source", str(export))
    _run(data_dir, fake, "recheck")
    assert fake.calls == ["d1", "d2", "d1"]


def test_show_and_inbox_all_say_when_a_failed_comment_is_next_due(
        data_dir: Path, export: Path) -> None:
    """After a 500, `show ID --json` and `inbox --all --json` give next_due: 10 minutes after the
    attempt finished; a comment with a verdict has none."""
    fake = FakeProvider()
    fake.script("d1", "500")
    _run(data_dir, fake, "scan", "--source", str(export))
    shown = _run(data_dir, fake, "show", "d1")["result"]
    finished = parse_iso(shown["attempts"][-1]["finished_at"])
    assert parse_iso(shown["next_due"]) == finished + timedelta(minutes=10)
    listed = {c["id"]: c.get("next_due") for c in _run(data_dir, fake, "inbox", "--all")["result"]["comments"]}
    assert listed == {"d1": shown["next_due"], "d2": None}
    assert "next_due" not in _run(data_dir, fake, "show", "d2")["result"]
