"""`watcher migrate SRC`: another store brought into the data dir, no mark and no attempt lost, safe
to rerun after a kill at any point (SPEC §16.3)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
from _fakes import records as rec
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run, run_main, write_export

from watcher.commands.forget import sample_articles, sample_ids
from watcher.config import Paths
from watcher.store.files import FileStore

SAMPLE_ARTICLE = min(sample_articles())  # an article of the bundled sample


def _seen(root: Path) -> dict[str, dict[str, Any]]:
    return json.loads((root / "seen.json").read_text())["comments"]  # type: ignore[no-any-return]


def _store(
    root: Path,
    tmp_path: Path,
    ids: list[str],
    *,
    failing: tuple[str, ...] = (),
    marks: tuple[tuple[str, str], ...] = (),
) -> None:
    """A store made as a user makes one: a scan (``failing`` ones get a malformed answer, then a
    recheck), then the marks."""
    root.mkdir(exist_ok=True)
    fake = FakeProvider()
    for cid in failing:
        fake.script(cid, "malformed")
    hooks = in_process_hooks(fake)
    export = write_export(tmp_path / f"{root.name}.json", ids)
    assert (
        run_main(
            "cli", "scan", "--source", str(export), data_dir=root, env=IN_PROCESS_ENV, hooks=hooks
        ).returncode
        == 0
    )
    if failing:
        assert (
            run_main("cli", "recheck", data_dir=root, env=IN_PROCESS_ENV, hooks=hooks).returncode
            == 0
        )
    for cid, triage in marks:
        assert (
            run_main("cli", "mark", cid, triage, data_dir=root, env=IN_PROCESS_ENV).returncode == 0
        )


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """An old store: two failed comments (2 attempts each), two marked, one of the bundled sample."""
    root = tmp_path / "old"
    _store(
        root,
        tmp_path,
        ["m1", "m2", "m3", "m4"],
        failing=("m1", "m4"),
        marks=(("m2", "replied"), ("m3", "ignored")),
    )
    FileStore(Paths(root)).save_record(rec.record(sample_ids()[0], article_id=SAMPLE_ARTICLE))
    return root


def _nothing_lost(src: Path, dst: Path) -> None:
    old, new = _seen(src), _seen(dst)
    for cid in ("m1", "m2", "m3", "m4"):
        assert new[cid]["attempts"] >= old[cid]["attempts"], cid
        assert new[cid]["triage"] == old[cid]["triage"], cid
    assert sample_ids()[0] not in new


def test_a_store_is_merged_into_a_data_dir_that_holds_state(
    src: Path, data_dir: Path, tmp_path: Path
) -> None:
    """Comments only SRC has are copied, shared ones take the larger attempts and the later mark, the
    data dir's own stay, the sample is left out and counted, SRC is untouched."""
    _store(data_dir, tmp_path, ["m2", "d1"], marks=(("m2", "ignored"), ("d1", "replied")))
    before = {p: p.read_bytes() for p in sorted(src.rglob("*.json"))}
    done = run_main("cli", "migrate", str(src), "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    result = done.envelope["result"]  # type: ignore[index]
    assert (result["copied"], result["merged"], result["sample_left_out"]) == (3, 1, 1)
    new = _seen(data_dir)
    assert new["m1"]["attempts"] == 2 and new["m4"]["attempts"] == 2
    assert new["m3"]["triage"] == "ignored" and new["d1"]["triage"] == "replied"
    assert new["m2"]["triage"] == "ignored"  # the data dir's mark was made after SRC's: latest wins
    assert {p: p.read_bytes() for p in sorted(src.rglob("*.json"))} == before
    said = run_main("cli", "migrate", str(src), data_dir=data_dir).stdout
    assert "may be removed" in " ".join(said.split())  # wrapped at the width (SPEC §16.4)


def test_migrating_twice_changes_nothing_more(src: Path, data_dir: Path) -> None:
    """A second run finds every comment there and writes the same index."""
    assert run_main("cli", "migrate", str(src), data_dir=data_dir).returncode == 0
    first = _seen(data_dir)
    assert run_main("cli", "migrate", str(src), data_dir=data_dir).returncode == 0
    again = _seen(data_dir)
    keys = ("attempts", "triage", "status")
    assert {c: [e[k] for k in keys] for c, e in again.items()} == {
        c: [e[k] for k in keys] for c, e in first.items()
    }
    _nothing_lost(src, data_dir)


@pytest.mark.parametrize(
    "fault",
    ["kill_at=after_outcome_write:1", "kill_at=after_outcome_write:3", "kill_before_seen_save"],
)
def test_a_migration_killed_midway_is_refused_until_rerun_and_loses_nothing(
    src: Path, data_dir: Path, fault: str
) -> None:
    """SIGKILLed while copying or before its index save: every command on the data dir exits 2
    naming the migration; rerun, no mark and no attempt is lost."""
    killed = run("cli", "migrate", str(src), data_dir=data_dir, fault=fault)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    status = run("cli", "status", data_dir=data_dir)
    assert status.returncode == 2 and f"watcher migrate {src}" in status.stderr, status.stderr
    done = run("cli", "migrate", str(src), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert run("cli", "status", data_dir=data_dir).returncode == 0
    _nothing_lost(src, data_dir)


def test_a_source_that_is_the_data_dir_or_holds_nothing_is_refused(
    data_dir: Path, tmp_path: Path
) -> None:
    """SRC = the data dir, or a directory with no seen.json or inbox/: exit 2, nothing written."""
    (tmp_path / "empty").mkdir()
    for source in (data_dir, tmp_path / "empty"):
        done = run_main("cli", "migrate", str(source), data_dir=data_dir)
        assert done.returncode == 2, done.stderr
    assert list(data_dir.iterdir()) == []


def _attempted(cid: str, outcomes: list[str]) -> Any:
    """A record with one finished attempt per outcome: "ok" (a verdict) or "error"."""
    from watcher.state import records

    record = rec.record(cid)
    for outcome in outcomes:
        record = records.reserve(
            record, command="scan", entrypoint="cli", provider="openai", model="m"
        )
        if outcome == "ok":
            record = records.finish(record, verdict=rec.verdict(), error=None)
        else:
            record = records.finish(record, verdict=None, error=rec.error())
    return record


def test_a_verdict_in_the_data_dir_is_kept_against_a_source_with_more_attempts(
    tmp_path: Path, data_dir: Path
) -> None:
    """The data dir judged the comment at its first attempt, the source spent two failing: the
    verdict stays, and the comment counts the source's two attempts."""
    (tmp_path / "old").mkdir()
    FileStore(Paths(tmp_path / "old")).save_record(_attempted("v1", ["error", "error"]))
    FileStore(Paths(data_dir)).save_record(_attempted("v1", ["ok"]))
    assert run_main("cli", "migrate", str(tmp_path / "old"), data_dir=data_dir).returncode == 0
    kept = FileStore(Paths(data_dir)).load_record("v1")
    assert kept is not None and kept.verdict is not None
    assert _seen(data_dir)["v1"]["attempts"] == 2


def test_the_first_releases_sample_ids_are_left_out_and_a_real_comment_with_one_is_not(
    tmp_path: Path, data_dir: Path
) -> None:
    """0.1.0's sample called a comment 4cdz (today's sample names it otherwise): left out; a
    comment of a real article that happens to have a sample's id is brought in."""
    old = tmp_path / "old"
    old.mkdir()
    store = FileStore(Paths(old))
    store.save_record(rec.record("4cdz", article_id=SAMPLE_ARTICLE))
    store.save_record(rec.record("3bkf", article_id=1201))
    done = run_main("cli", "migrate", str(old), "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.envelope["result"]["sample_left_out"] == 1  # type: ignore[index]
    assert sorted(_seen(data_dir)) == ["3bkf"]


def test_a_comment_the_sources_inbox_new_listed_is_not_listed_again(
    tmp_path: Path, data_dir: Path
) -> None:
    """listed_at comes over with the comment, also onto a data dir that knew it unlisted: cron's
    listing (SPEC §15.3) does not mail it a second time."""
    old = tmp_path / "old"
    old.mkdir()
    for root in (old, data_dir):
        FileStore(Paths(root)).save_record(_attempted("n1", ["ok"]))
        assert run_main("cli", "status", data_dir=root).returncode == 0  # the index is made
    listed = run_main("cli", "inbox", "--new", "--json", data_dir=old)
    assert [c["id"] for c in listed.envelope["result"]["comments"]] == ["n1"]  # type: ignore[index]
    assert run_main("cli", "migrate", str(old), data_dir=data_dir).returncode == 0
    again = run_main("cli", "inbox", "--new", "--json", data_dir=data_dir)
    assert again.envelope["result"]["comments"] == []  # type: ignore[index]


def test_the_sources_config_is_copied_into_a_data_dir_without_one_and_never_over_its_own(
    tmp_path: Path, data_dir: Path
) -> None:
    """A store configured in its config.toml keeps its settings on the way in; a data dir's own
    config.toml is left as it is, and the summary says the two differ."""
    old = tmp_path / "old"
    old.mkdir()
    FileStore(Paths(old)).save_record(rec.record("c1"))
    (old / "config.toml").write_text('provider = "offline"\ndevto_username = "maya"\n')
    done = run_main("cli", "migrate", str(old), "--json", data_dir=data_dir)
    assert done.envelope["result"]["config"] == "copied"  # type: ignore[index]
    assert (data_dir / "config.toml").read_text() == (old / "config.toml").read_text()
    (data_dir / "config.toml").write_text('provider = "offline"\ndevto_username = "other"\n')
    again = run_main("cli", "migrate", str(old), data_dir=data_dir)
    assert "config.toml differs" in " ".join(again.stdout.split())
    assert "other" in (data_dir / "config.toml").read_text()


def test_the_summary_names_what_of_a_clones_data_dir_is_state_and_what_is_not(
    tmp_path: Path, data_dir: Path
) -> None:
    """A clone's ./data also holds the bundled sample and the labelled set: the summary names the
    state that may be removed and says the rest is not state (``rm -rf data`` would delete them)."""
    old = tmp_path / "clone" / "data"
    old.mkdir(parents=True)
    FileStore(Paths(old)).save_record(rec.record("c1"))
    (old / "sample").mkdir()
    (old / "eval").mkdir()
    done = run_main("cli", "migrate", str(old), "--json", data_dir=data_dir)
    result = done.envelope["result"]  # type: ignore[index]
    assert "inbox/" in result["removable"] and result["not_state"] == ["eval/", "sample/"]
    said = " ".join(run_main("cli", "migrate", str(old), data_dir=data_dir).stdout.split())
    assert "not the rest of it (eval/ sample/)" in said, said


def test_the_months_token_tally_counts_the_attempts_a_migration_brought(
    src: Path, data_dir: Path, tmp_path: Path
) -> None:
    """The data dir's tokens.json is counted again from every attempt once the source's are in:
    a budget would otherwise let the month spend the migrated calls' tokens twice (SPEC §16.4)."""
    from watcher.pipeline.budget import count_month
    from watcher.util.timeutil import utcnow

    _store(data_dir, tmp_path, ["d1"])
    store = FileStore(Paths(data_dir))
    month = utcnow().strftime("%Y-%m")
    store.save_token_tally(count_month(store, month))  # kept, as by a run with a budget
    own = count_month(store, month).used
    done = run_main("cli", "migrate", str(src), data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    after = store.load_token_tally()
    assert after is not None and after.open == {}
    assert after.used == count_month(store, month).used > own


def _drafted(record: Any, *times: str) -> Any:
    """``record`` with one offline draft reserved at each time, each with a text."""
    from watcher.state import drafts

    for at in times:
        record = drafts.reserve_draft(
            record, entrypoint="cli", provider="offline", model="m", at=f"2026-11-{at}:00Z"
        )
        record = drafts.finish_draft(record, text=f"draft of {at}", error=None, at=f"2026-11-{at}:01Z")
    return record


def _both_drafted(tmp_path: Path, data_dir: Path) -> Path:
    """``v1`` in both stores: the source's record, kept for its two attempts, has 1 draft; the data
    dir's has 2 others."""
    old = tmp_path / "old"
    old.mkdir()
    FileStore(Paths(old)).save_record(_drafted(_attempted("v1", ["error", "error"]), "20T10:00"))
    FileStore(Paths(data_dir)).save_record(_drafted(_attempted("v1", ["error"]), "21T10:00", "22T10:00"))
    return old


def test_a_comment_both_stores_drafted_keeps_every_draft_and_its_budget(
    tmp_path: Path, data_dir: Path
) -> None:
    """The record kept for its attempts takes the other store's drafts too, oldest first: 3
    drafts, so a 4th is refused (SPEC §16.5: the budget is not reset by a migration)."""
    old = _both_drafted(tmp_path, data_dir)
    assert run_main("cli", "migrate", str(old), data_dir=data_dir).returncode == 0
    kept = FileStore(Paths(data_dir)).load_record("v1")
    assert kept is not None and len(kept.attempts) == 2
    assert [(d.n, d.text) for d in kept.drafts] == [
        (1, "draft of 20T10:00"), (2, "draft of 21T10:00"), (3, "draft of 22T10:00")]
    fourth = run_main("cli", "draft", "v1", data_dir=data_dir, env={"WATCHER_PROVIDER": "offline"})
    assert fourth.returncode == 2 and "all its 3 drafts" in fourth.stderr


def test_migrating_again_keeps_each_draft_once(tmp_path: Path, data_dir: Path) -> None:
    """Rerun, the drafts both stores hold are not brought twice and the file is not rewritten."""
    old = _both_drafted(tmp_path, data_dir)
    assert run_main("cli", "migrate", str(old), data_dir=data_dir).returncode == 0
    first = Paths(data_dir).inbox_file("v1").read_bytes()
    assert run_main("cli", "migrate", str(old), data_dir=data_dir).returncode == 0
    assert Paths(data_dir).inbox_file("v1").read_bytes() == first
