"""`watcher forget ID… | --demo`: out of every view, attempts kept, no call bought (SPEC §16.3)."""

from __future__ import annotations

import json
from pathlib import Path

from _fakes import records as rec
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.commands.forget import sample_articles, sample_ids
from watcher.config import Paths
from watcher.store.files import FileStore

SAMPLE_ARTICLE = min(sample_articles())  # an article of the bundled sample


def _seen(data_dir: Path) -> dict[str, dict[str, object]]:
    return json.loads((data_dir / "seen.json").read_text())["comments"]  # type: ignore[no-any-return]


def test_a_forgotten_comment_leaves_every_view_and_dev_to_sending_it_again_buys_no_call(
    data_dir: Path, tmp_path: Path
) -> None:
    """A failed comment forgotten: inbox --all and recheck skip it, a scan bringing it back calls
    nothing, and it keeps its attempt."""
    fake = FakeProvider()
    fake.script("f1", "malformed")
    hooks = in_process_hooks(fake)
    export = write_export(tmp_path / "export.json", ["f1", "k1"])
    first = run_main(
        "cli", "scan", "--source", str(export), data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks
    )
    assert first.returncode == 0, first.stderr
    assert sorted(fake.calls) == ["f1", "k1"]
    done = run_main("cli", "forget", "f1", "--json", data_dir=data_dir, env=IN_PROCESS_ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.envelope is not None and done.envelope["result"]["forgotten"] == ["f1"]
    assert _seen(data_dir)["f1"]["status"] == "forgotten" and _seen(data_dir)["f1"]["attempts"] == 1
    listed = run_main("cli", "inbox", "--all", "--json", data_dir=data_dir, env=IN_PROCESS_ENV)
    assert [c["id"] for c in listed.envelope["result"]["comments"]] == ["k1"]  # type: ignore[index]
    for again in (("recheck",), ("scan", "--source", str(export))):
        assert (
            run_main("cli", *again, data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks).returncode
            == 0
        )
    assert sorted(fake.calls) == ["f1", "k1"]
    assert _seen(data_dir)["f1"]["status"] == "forgotten" and _seen(data_dir)["f1"]["attempts"] == 1
    assert (data_dir / "inbox" / "f1.json").is_file()


def test_forget_demo_forgets_only_the_bundled_samples_comments(data_dir: Path) -> None:
    """--demo: the sample's ids this store holds are forgotten; a real comment beside them is not."""
    store = FileStore(Paths(data_dir))
    sample = sample_ids()[:2]
    for cid in (*sample, "real1"):
        store.save_record(rec.record(cid, article_id=SAMPLE_ARTICLE if cid in sample else 1201))
    done = run_main("cli", "forget", "--demo", "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(done.envelope["result"]["forgotten"]) == sorted(sample)  # type: ignore[index]
    seen = _seen(data_dir)
    assert [seen[cid]["status"] for cid in sample] == ["forgotten", "forgotten"]
    assert seen.get("real1", {}).get("status") != "forgotten"


def test_one_unknown_id_forgets_nothing(data_dir: Path) -> None:
    """forget k1 nosuch: exit 2, k1 untouched."""
    FileStore(Paths(data_dir)).save_record(rec.record("k1"))
    done = run_main("cli", "forget", "k1", "nosuch", data_dir=data_dir)
    assert done.returncode == 2 and "nosuch" in done.stderr
    assert (
        not (data_dir / "seen.json").exists()
        or _seen(data_dir).get("k1", {}).get("status") != "forgotten"
    )


def test_forget_demo_leaves_a_real_comment_that_has_a_sample_id(data_dir: Path) -> None:
    """An id is a short code a real comment may share with the sample: --demo forgets a comment
    only when its article is the sample's too; 0.1.0's sample ids are the sample's."""
    store = FileStore(Paths(data_dir))
    store.save_record(rec.record("4cdz", article_id=SAMPLE_ARTICLE))  # the first release's sample
    store.save_record(rec.record("3bkf", article_id=1201))  # a real comment, the sample's id
    done = run_main("cli", "forget", "--demo", "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.envelope["result"]["forgotten"] == ["4cdz"]  # type: ignore[index]
    assert _seen(data_dir)["3bkf"]["status"] != "forgotten"
