"""Cases the rig found, kept as plain regression tests (one behaviour each)."""

from __future__ import annotations

from pathlib import Path

from _fake_provider import running_fake
from _rel_harness import Baseline, inproc

from watcher import inbox
from watcher.config import Paths


def _quarantine_inbox(data: Path, env: dict[str, str], cid: str) -> None:
    (data / "inbox" / f"{cid}.json").write_bytes(b"{not json")
    assert inproc(data, env, "cli", "status").exit_code == 5  # quarantined, loudly


def test_comment_whose_inbox_file_was_quarantined_is_not_given_a_fresh_budget(
        baseline: Baseline, tmp_path: Path) -> None:
    """A failed comment's corrupt inbox file is quarantined; rescans never call the model for it again."""
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "rig", fake)
        env = fake.env()
        _quarantine_inbox(data, env, "flaky")
        calls = len(fake.calls)
        for entry in ("cli", "bridge"):
            scan = inproc(data, env, entry, "scan", source=baseline.full_export)
            assert scan.exit_code == 0, scan.error
            items = {i["id"]: i for i in scan.result["items"]}
            assert items["flaky"]["outcome"] == "skipped"
            assert inproc(data, env, entry, "recheck").exit_code == 0
        assert "flaky" not in fake.calls[calls:]
        assert inbox.load(Paths(data), "flaky") is None


def test_saved_verdict_whose_inbox_file_was_quarantined_is_never_requested_again(
        baseline: Baseline, tmp_path: Path) -> None:
    """The verdict's inbox file is quarantined; a rescan does not re-request the lost verdict."""
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "rig", fake)
        env = fake.env()
        _quarantine_inbox(data, env, "done")
        calls = len(fake.calls)
        assert inproc(data, env, "bridge", "scan", source=baseline.full_export).exit_code == 0
        assert "done" not in fake.calls[calls:]
