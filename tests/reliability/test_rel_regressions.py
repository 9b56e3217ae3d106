"""Cases the rig found, kept as plain regression tests (one behaviour each)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _proc import envelope, run, run_main, write_export
from _rel_harness import ENVELOPE, Baseline, error_of, rig_hooks

from watcher.config import Paths
from watcher.store.files import FileStore


def _quarantine_inbox(data: Path, env: dict[str, str], cid: str) -> None:
    (data / "inbox" / f"{cid}.json").write_bytes(b"{not json")
    assert run_main("cli", "status", data_dir=data, env=env, hooks=rig_hooks()).returncode == 5  # quarantined, loudly


def test_comment_whose_inbox_file_was_quarantined_is_not_given_a_fresh_budget(
        baseline: Baseline, tmp_path: Path) -> None:
    """A failed comment's corrupt inbox file is quarantined; rescans never call the model for it again."""
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "rig", fake)
        env = fake.env()
        _quarantine_inbox(data, env, "flaky")
        calls = len(fake.calls)
        for entry in ("cli", "bridge"):
            scan = run_main(entry, "scan", "--source", str(baseline.full_export), "--limit", "20", *ENVELOPE[entry],
                            data_dir=data, env=env, hooks=rig_hooks())
            assert scan.returncode == 0 and scan.envelope is not None, error_of(scan) or scan.stderr
            items = {i["id"]: i for i in scan.envelope["result"]["items"]}
            assert items["flaky"]["outcome"] == "skipped"
            assert run_main(entry, "recheck", "--limit", "20", data_dir=data, env=env, hooks=rig_hooks()).returncode == 0
        assert "flaky" not in fake.calls[calls:]
        assert FileStore(Paths(data)).load_record("flaky") is None


def test_saved_verdict_whose_inbox_file_was_quarantined_is_never_requested_again(
        baseline: Baseline, tmp_path: Path) -> None:
    """The verdict's inbox file is quarantined; a rescan does not re-request the lost verdict."""
    with running_fake() as fake:
        data = baseline.clone(tmp_path / "rig", fake)
        env = fake.env()
        _quarantine_inbox(data, env, "done")
        calls = len(fake.calls)
        assert run_main("bridge", "scan", "--source", str(baseline.full_export), "--limit", "20", data_dir=data,
                        env=env, hooks=rig_hooks()).returncode == 0
        assert "done" not in fake.calls[calls:]


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["cli", "bridge"])
def test_provider_error_text_with_a_lone_surrogate_is_saved_and_printed(entry: str, tmp_path: Path) -> None:
    """A 400 whose JSON message escapes a lone surrogate: outcome and raw saved, JSON printed; the
    400 stops the batch as a setup failure (exit 2, SPEC §13.1), not a crash (exit 1)."""
    data = tmp_path / "rig"
    export = write_export(tmp_path / "export.json", ["sur"])
    with running_fake() as fake:
        fake.script("sur", "surrogate-400")
        proc = run(entry, "scan", "--source", str(export), "--json", data_dir=data, env=fake.env())
    assert proc.returncode == 2, proc.stderr
    item = envelope(proc)["result"]["items"][0]
    assert (item["outcome"], item["kind"]) == ("error", "bad_request")
    record = FileStore(Paths(data)).load_record("sur")
    assert record is not None and record.attempts[0].outcome == "error" and record.attempts[0].raw


def test_forem_text_with_a_lone_surrogate_is_stored_not_fatal(tmp_path: Path) -> None:
    """An export whose title, author and body escape lone surrogates scans fine (offline provider)."""
    data = tmp_path / "rig"
    doc = json.loads(write_export(tmp_path / "export.json", ["sur"]).read_text())
    doc["articles"][0]["title"] = "T \ud800"
    doc["articles"][0]["comments"][0]["body_html"] = "<p>hello \udc00 there</p>"
    doc["articles"][0]["comments"][0]["user"]["name"] = "R \ud83d"
    source = tmp_path / "surrogates.json"
    source.write_text(json.dumps(doc))  # ensure_ascii: the file holds "\ud800" escapes
    scan = run_main("cli", "scan", "--source", str(source), "--limit", "20", "--json", data_dir=data,
                    env={"WATCHER_PROVIDER": "offline"}, hooks=rig_hooks())
    assert scan.returncode == 0, error_of(scan) or scan.stderr
    record = FileStore(Paths(data)).load_record("sur")
    assert record is not None and record.verdict is not None


def test_forem_username_with_a_lone_surrogate_does_not_sink_the_payload(tmp_path: Path) -> None:
    """A commenter's username escapes a lone surrogate: read_export still returns every comment."""
    from watcher.config import load_settings
    from watcher.source import read_export

    doc = json.loads(write_export(tmp_path / "export.json", ["odd", "good"]).read_text())
    doc["articles"][0]["comments"][0]["user"]["username"] = "\ud800"
    source = tmp_path / "surrogate-user.json"
    source.write_text(json.dumps(doc))
    fetched = read_export(source, load_settings(data_dir=tmp_path / "rig", env={}))
    assert [c.id for c in fetched.comments] == ["odd", "good"]
