"""Races that need a lock bypass (SPEC §13.5, §15.1): a lock file deleted mid-call, and two data
dirs sharing one inbox/ through a symlink (which the second refuses, SPEC §15.5). Real processes,
scripted so each interleaving happens for sure; afterwards every promise is checked from disk and
the call log. The runs count as soak operations in the rig's closing line."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _proc import envelope, run, start, write_export
from _rel_harness import TALLY
from _rel_invariants import Expect, check_all

pytestmark = pytest.mark.slow


def _recheck_until_quiet(dirs: list[Path], env: dict[str, str]) -> int:
    runs = 0
    for _ in range(4):
        for data in dirs:
            done = run("cli", "recheck", "--json", data_dir=data, env=env)
            runs += 1
            assert done.returncode in (0, 3), done.stderr
    return runs


def test_a_deleted_pipeline_lock_mid_call_changes_nothing(tmp_path: Path) -> None:
    """A slow recheck's call is out (the pipeline lock is not held across it, SPEC §15.1); the user
    deletes locks/pipeline.lock; rechecks meanwhile see the comment's call lock held and defer it.
    The slow run saves its outcome; 3 calls in all, never more."""
    data = tmp_path / "rig"
    export = write_export(tmp_path / "export.json", ["race"])
    with running_fake() as fake:
        fake.script("race", "malformed", "hold-malformed", "malformed")
        env = fake.env()
        assert run("cli", "scan", "--source", str(export), data_dir=data, env=env).returncode == 0
        slow = start("bridge", "recheck", data_dir=data, env=env)
        fake.wait_in_flight()
        (data / "locks" / "pipeline.lock").unlink()
        during = run("cli", "recheck", "--json", data_dir=data, env=env)
        assert [(i["id"], i["outcome"]) for i in envelope(during)["result"]["items"]] == [("race", "deferred")]
        assert "in flight" in envelope(during)["result"]["items"][0]["message"]
        runs = 3 + _recheck_until_quiet([data], env)
        fake.release()
        out = slow.communicate(timeout=30)
        assert slow.returncode == 0 and envelope(out)["result"]["items"][0]["outcome"] == "error", out
        runs += _recheck_until_quiet([data], env)
        found = check_all(data, fake.calls, expect=Expect())
        calls = list(fake.calls)
    TALLY.add("soak_ops", runs, [f"pipeline lock deleted mid-call: {v}" for v in found])
    assert calls == ["race"] * 3 and found == []


def test_a_deleted_call_lock_mid_call_never_buys_a_fourth_call(tmp_path: Path) -> None:
    """The user deletes the comment's call lock (and the pipeline lock) while its call is out:
    rechecks meanwhile find a lock that is not the one the attempt was reserved under, its process
    running, and defer the comment (SPEC §15.1); the slow run saves its outcome; 3 calls in all,
    never two at once."""
    data = tmp_path / "rig"
    export = write_export(tmp_path / "export.json", ["race"])
    with running_fake() as fake:
        fake.script("race", "malformed", "hold-malformed", "malformed")
        env = fake.env()
        assert run("cli", "scan", "--source", str(export), data_dir=data, env=env).returncode == 0
        slow = start("bridge", "recheck", data_dir=data, env=env)
        fake.wait_in_flight()
        (data / "locks" / "calls" / "race.lock").unlink()
        (data / "locks" / "pipeline.lock").unlink()
        runs = 2 + _recheck_until_quiet([data], env)
        fake.release()
        out = slow.communicate(timeout=30)
        assert slow.returncode == 0, out
        runs += _recheck_until_quiet([data], env)
        found = check_all(data, fake.calls, expect=Expect())
        calls = list(fake.calls)
    TALLY.add("soak_ops", runs, [f"call lock deleted mid-call: {v}" for v in found])
    assert calls == ["race"] * 3 and fake.max_active == 1 and found == []


def test_two_data_dirs_sharing_one_inbox_never_buy_a_fourth_call(tmp_path: Path) -> None:
    """B/inbox is a symlink to A/inbox (two configs, one folder): their pipeline locks do not
    exclude each other, so B refuses the link (exit 5 naming it, SPEC §15.5) instead of closing
    A's call in flight as an orphan; A's held call saves its outcome, 3 calls in all — never more."""
    a, b = tmp_path / "a", tmp_path / "b"
    export = write_export(tmp_path / "export.json", ["shared"])
    with running_fake() as fake:
        fake.script("shared", "malformed", "hold-malformed", "malformed")
        env = fake.env()
        assert run("cli", "scan", "--source", str(export), data_dir=a, env=env).returncode == 0
        b.mkdir()
        (b / "inbox").symlink_to(a / "inbox")
        held = start("cli", "recheck", "--json", data_dir=a, env=env)
        fake.wait_in_flight()
        refused = run("cli", "recheck", "--json", data_dir=b, env=env)
        assert refused.returncode == 5 and str(b / "inbox") in envelope(refused)["error"]["message"], refused.stdout
        fake.release()
        out = held.communicate(timeout=30)
        assert held.returncode == 0, out
        runs = 2 + _recheck_until_quiet([a], env)
        found = check_all(a, fake.calls, expect=Expect())
        calls = list(fake.calls)
    TALLY.add("soak_ops", runs, [f"shared inbox: {v}" for v in found])
    assert calls == ["shared"] * 3 and found == []
