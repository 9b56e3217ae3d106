"""SPEC §15.6: `watcher eval` judges stored verdicts by what the author did — replied (on dev.to or
`mark replied`) means the comment needed a reply, `mark ignored` that it did not — per provider,
model and prompt version; it makes no call and writes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
from _fakes import records as rec
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _proc import run_main
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from test_mcp_server import doc, memory_session

from watcher.state import records
from watcher.config import Paths
from watcher.commands.evaluate import Sample, figures, ratio
from watcher.models import InboxRecord, Prompt, Verdict
from watcher.store.files import FileStore

PROMPT_A, PROMPT_B = "a" * 64, "b" * 64


def _judged(cid: str, *, said: bool, provider: str = "openai", model: str = "gpt-x", prompt: str = PROMPT_A,
            created_at: str = "2026-11-10T09:00:00Z") -> InboxRecord:
    """A record whose verdict (needs_reply ``said``) came from ``provider``/``model`` on prompt ``prompt``."""
    base = rec.record(cid)
    base = base.model_copy(update={
        "prompt": Prompt(template="verdict", template_sha256=prompt, system="s", user="u"),
        "comment": base.comment.model_copy(update={"created_at": created_at})})
    verdict = Verdict(needs_reply=said, category="question" if said else "praise", priority="normal",
                      summary=f"summary of {cid}", reply_hint="")
    reserved = records.reserve(base, command="scan", entrypoint="cli", provider=provider, model=model, pid=1)
    return records.finish(reserved, verdict=verdict, error=None)


def _failed(cid: str) -> InboxRecord:
    reserved = records.reserve(rec.record(cid), command="scan", entrypoint="cli", provider="openai", model="gpt-x",
                               pid=1)
    return records.finish(reserved, verdict=None, error=rec.error())


def _seed(data_dir: Path) -> None:
    """Known verdicts and marks: openai gpt-x on prompt A (8 comments), on prompt B (2), offline (2)."""
    store = FileStore(Paths(data_dir))
    marks: dict[str, tuple[str, str | None]] = {
        # openai gpt-x, prompt A: tp 2 (one replied on dev.to), fp 1, fn 1, tn 1, unlabelled 2
        "tp1": ("replied", "devto"), "tp2": ("replied", "person"), "fp1": ("ignored", "person"),
        "fn1": ("replied", "devto"), "tn1": ("ignored", "person"), "un1": ("open", None),
        "un2": ("open", "person"),  # replied on dev.to, then reopened by the person: the latest action wins
        # openai gpt-x, prompt B: both agree
        "pb1": ("replied", "person"), "pb2": ("ignored", "person"),
        # offline: one labelled, one not
        "of1": ("ignored", "person"), "of2": ("open", None),
        # no verdict: a failed comment the author marked anyway
        "nv1": ("replied", "person"),
    }
    said = {"tp1": True, "tp2": True, "fp1": True, "fn1": False, "tn1": False, "un1": True, "un2": False,
            "pb1": True, "pb2": False}
    for cid, yes in said.items():
        store.save_record(_judged(cid, said=yes, prompt=PROMPT_B if cid.startswith("pb") else PROMPT_A,
                                  created_at="2026-10-01T00:00:00Z" if cid == "tp1" else "2026-11-10T09:00:00Z"))
    store.save_record(_judged("of1", said=True, provider="offline", model="heuristic-v2"))
    store.save_record(_judged("of2", said=False, provider="offline", model="heuristic-v2"))
    store.save_record(_failed("nv1"))
    base = store.load_index()
    mine, _ = store.reconcile_index(base)
    comments = dict(mine.comments)
    for cid, (triage, by) in marks.items():
        comments[cid] = comments[cid].model_copy(update={"triage": triage, "triage_by": by})
    store.save_index(base, mine.model_copy(update={"comments": comments}))


def _group(result: dict[str, Any], provider: str, prompt: str) -> dict[str, Any]:
    return next(g for g in result["groups"] if g["provider"] == provider and g["prompt"] == prompt[:12])


def test_figures_per_provider_model_and_prompt_are_exact(data_dir: Path) -> None:
    """Judged, unlabelled, agreement, precision, recall, confusion and disagreements, per group."""
    _seed(data_dir)
    answer = run_main("cli", "eval", "--json", data_dir=data_dir)
    assert answer.returncode == 0, answer.stderr
    result = answer.envelope["result"]  # type: ignore[index]
    assert (result["comments"], result["judged"], result["unlabelled"], result["without_verdict"]) == (12, 8, 3, 1)
    a = _group(result, "openai", PROMPT_A)
    assert (a["model"], a["judged"], a["unlabelled"]) == ("gpt-x", 5, 2)
    assert a["confusion"] == {"true_positive": 2, "false_positive": 1, "false_negative": 1, "true_negative": 1}
    assert (a["agreement"], a["precision"], a["recall"]) == (0.6, 0.667, 0.667)
    assert [(d["id"], d["said_needs_reply"], d["author"], d["by"], d["summary"]) for d in a["disagreements"]] == [
        ("fn1", False, "replied", "devto", "summary of fn1"), ("fp1", True, "ignored", "person", "summary of fp1")]
    b = _group(result, "openai", PROMPT_B)
    assert (b["judged"], b["agreement"], b["precision"], b["recall"], b["disagreements"]) == (2, 1.0, 1.0, 1.0, [])
    off = _group(result, "offline", PROMPT_A)
    # One judged comment, said yes, ignored: no comment needed a reply, so recall has no figure (null, not 0).
    assert (off["model"], off["judged"], off["unlabelled"], off["precision"], off["recall"]) == (
        "heuristic-v2", 1, 1, 0.0, None)
    assert [g["judged"] for g in result["groups"]] == [5, 2, 1]  # most judged first


def test_since_keeps_only_comments_created_then_or_later(data_dir: Path) -> None:
    """--since DATE leaves out older comments (tp1, created in October, and nv1, in May)."""
    _seed(data_dir)
    result = run_main("cli", "eval", "--since", "2026-11-01", "--json", data_dir=data_dir).envelope["result"]  # type: ignore[index]
    assert (result["since"], result["comments"], result["judged"]) == ("2026-11-01T00:00:00.000000Z", 10, 7)
    assert _group(result, "openai", PROMPT_A)["confusion"]["true_positive"] == 1
    bad = run_main("cli", "eval", "--since", "last week", data_dir=data_dir)
    assert bad.returncode == 2 and "--since takes a date" in bad.stderr


def _stamps(root: Path) -> dict[str, tuple[int, int, int]]:
    found = {}
    for directory, names, files in os.walk(root):
        for name in [*names, *files]:
            st = os.lstat(os.path.join(directory, name))
            found[os.path.relpath(os.path.join(directory, name), root)] = (st.st_ino, st.st_mtime_ns, st.st_size)
    return found


def test_eval_makes_no_call_and_writes_nothing(data_dir: Path) -> None:
    """CLI, bridge and MCP tool: the provider's call log stays empty and no file or directory of the
    data dir changes — not even the index, which lags an inbox file here (a read view would repair it)."""
    _seed(data_dir)
    FileStore(Paths(data_dir)).save_record(_judged("lag1", said=True))  # in inbox/, not yet in seen.json
    before = _stamps(data_dir)
    fake = FakeProvider()
    for entry, args in (("cli", ("eval", "--json")), ("cli", ("eval",)), ("bridge", ("eval",))):
        answer = run_main(entry, *args, data_dir=data_dir, env=IN_PROCESS_ENV, hooks=in_process_hooks(fake))
        assert answer.returncode == 0, answer.stderr
    assert answer.envelope["result"]["unlabelled"] == 4  # type: ignore[index]

    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["eval"].annotations is not None and tools["eval"].annotations.read_only_hint is True
        result = doc(await session.call_tool("eval", {"since": "2026-11-01"}))
        assert (result["ok"], result["result"]["judged"]) == (True, 7)

    async def main() -> None:
        async with memory_session(data_dir, IN_PROCESS_ENV) as session:
            await scenario(session)

    anyio.run(main)
    assert fake.calls == [] and fake.probes == []
    assert _stamps(data_dir) == before


def test_human_output_names_the_figures_and_the_disagreements(data_dir: Path) -> None:
    """A person reads each group's figures and every comment where verdict and author differ."""
    _seed(data_dir)
    wide = {"COLUMNS": "200"}  # each figure line whole (output wraps at the width, SPEC §16.4)
    out = run_main("cli", "eval", data_dir=data_dir, env=wide).stdout
    assert "openai gpt-x · prompt aaaaaaaaaaaa: 5 judged, 2 unlabelled · agreement 0.600 · precision 0.667 · " \
           "recall 0.667" in out
    assert "fp1  said needs a reply, you ignored it · question: summary of fp1" in out
    assert "fn1  said no reply, you replied · praise: summary of fn1" in out
    empty = run_main("cli", "eval", data_dir=data_dir / "none")
    assert empty.returncode == 0 and "nothing to judge yet" in empty.stdout and "does not exist" in empty.stderr


def test_options_of_the_labelled_set_need_set(data_dir: Path) -> None:
    """--provider, --provider-calls and --eval-dir without --set: exit 2, nothing done."""
    for args in (("--provider", "openai"), ("--provider-calls", "5"), ("--eval-dir", "x")):
        answer = run_main("cli", "eval", *args, "--json", data_dir=data_dir)
        assert answer.returncode == 2 and "only go with --set" in answer.envelope["error"]["message"]  # type: ignore[index]


def _tiny_set(root: Path, labels: dict[str, bool]) -> Path:
    """A labelled set of its own: one comment per label (its text carries TAG:<id> for the fake)."""
    root.mkdir()
    comments = [{"type_of": "comment", "id_code": cid, "created_at": f"2026-11-14T09:{i:02d}:00Z",
                 "body_html": f"<p>TAG:{cid} Does this work on Windows?</p>",
                 "user": {"name": f"Reader {i}", "username": f"reader{i}"}, "children": []}
                for i, cid in enumerate(labels)]
    (root / "export.json").write_text(json.dumps({"username": "maya", "articles": [{
        "id": 7, "title": "T", "url": "https://dev.to/maya/t", "comments_count": len(labels), "comments": comments}]}))
    (root / "labels.json").write_text(json.dumps({"schema_version": 1, "author": "maya", "comments": {
        cid: {"needs_reply": yes, "kind": "question" if yes else "thanks"} for cid, yes in labels.items()}}))
    return root


def test_a_paid_provider_needs_a_budget_and_a_data_dir_of_its_own(tmp_path: Path, data_dir: Path) -> None:
    """--provider openai without --provider-calls or --eval-dir, with the user's data dir as its
    data dir, or through the bridge: exit 2, and no call, no write anywhere."""
    lset = _tiny_set(tmp_path / "set", {"q1": True, "t1": False})
    (tmp_path / "other").mkdir()
    FileStore(Paths(tmp_path / "other")).save_record(rec.record("zz9"))  # someone's comments
    fake = FakeProvider()
    hooks = in_process_hooks(fake)
    refused = {
        ("--provider", "openai"): "give --provider-calls N",
        ("--provider", "openai", "--provider-calls", "5"): "give --eval-dir DIR",
        ("--provider", "openai", "--eval-dir", str(tmp_path / "e")): "give --provider-calls N",
        ("--provider", "openai", "--provider-calls", "5", "--eval-dir", str(data_dir)): "is your data dir",
        ("--provider", "openai", "--provider-calls", "5", "--eval-dir", str(tmp_path / "other")): "not in the labelled set",
        ("--provider", "agent", "--provider-calls", "5", "--eval-dir", str(tmp_path / "e")): "--provider takes offline",
        ("--provider-calls", "0"): "at least 1",
    }
    for args, said in refused.items():
        answer = run_main("cli", "eval", "--set", str(lset), *args, "--json", data_dir=data_dir, env=IN_PROCESS_ENV,
                          hooks=hooks)
        assert answer.returncode == 2 and said in answer.envelope["error"]["message"], (args, answer.stdout)  # type: ignore[index]
    bridge = run_main("bridge", "eval", "--set", str(lset), "--provider", "openai", "--provider-calls", "5",
                      "--eval-dir", str(tmp_path / "e"), data_dir=data_dir, env=IN_PROCESS_ENV, hooks=hooks)
    assert bridge.returncode == 2 and "the person's decision" in bridge.envelope["error"]["message"]  # type: ignore[index]
    assert fake.calls == [] and list(data_dir.iterdir()) == [] and not (tmp_path / "e").exists()


def test_a_paid_provider_spends_at_most_its_budget_in_its_own_data_dir(tmp_path: Path, data_dir: Path) -> None:
    """--provider-calls 2 on a 3-comment set: exactly 2 calls, in --eval-dir; the user's data dir is
    untouched; a second run with budget left judges the third and calls nothing twice."""
    lset = _tiny_set(tmp_path / "set", {"q1": True, "q2": True, "t1": False})
    fake = FakeProvider()
    own = tmp_path / "eval"
    args = ("eval", "--set", str(lset), "--provider", "openai", "--eval-dir", str(own), "--json")
    first = run_main("cli", *args, "--provider-calls", "2", data_dir=data_dir, env=IN_PROCESS_ENV,
                     hooks=in_process_hooks(fake))
    assert first.returncode == 0, first.stdout
    result = first.envelope["result"]  # type: ignore[index]
    assert len(fake.calls) == 2 and result["labelled_set"]["calls"] == 2
    assert (result["labelled_set"]["call_budget"], result["labelled_set"]["data_dir"]) == (2, str(own))
    assert (result["judged"], result["without_verdict"]) == (2, 1)
    assert list(data_dir.iterdir()) == []  # the user's budgets and marks: never touched
    second = run_main("cli", *args, "--provider-calls", "5", data_dir=data_dir, env=IN_PROCESS_ENV,
                      hooks=in_process_hooks(fake))
    assert len(fake.calls) == 3 and second.envelope["result"]["judged"] == 3  # type: ignore[index]
    seen = FileStore(Paths(own)).load_index().comments
    assert {cid: e.triage for cid, e in seen.items()} == {"q1": "replied", "q2": "replied", "t1": "ignored"}


def test_an_unusable_set_is_a_usage_error(tmp_path: Path, data_dir: Path) -> None:
    """A directory without labels.json, or with a broken one: exit 2 naming the file, nothing run."""
    (tmp_path / "empty").mkdir()
    assert "has no labels.json" in run_main("cli", "eval", "--set", str(tmp_path / "empty"), data_dir=data_dir).stderr
    broken = _tiny_set(tmp_path / "broken", {"q1": True})
    (broken / "labels.json").write_text('{"schema_version": 1, "author": "maya", "comments": {"Q!": {}}}')
    answer = run_main("cli", "eval", "--set", str(broken), data_dir=data_dir)
    assert answer.returncode == 2 and "not a valid labels file" in answer.stderr



@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["openai", "offline"]), st.booleans(), st.sampled_from([True, False, None])),
                max_size=30))
def test_every_figure_follows_from_the_counts(rows: list[tuple[str, bool, bool | None]]) -> None:
    """Whatever the verdicts and labels: the confusion counts add up to judged, the figures are
    their ratios (null where nothing divides), and unlabelled comments never count as judged."""
    samples = [Sample(id=f"c{i}", provider=provider, model="m", prompt="p", said=said, needed=needed, by=None,
                      category="other", summary="s") for i, (provider, said, needed) in enumerate(rows)]
    result = figures(samples, considered=len(samples), without_verdict=0)
    assert result.judged + result.unlabelled == len(samples)
    for group in result.groups:
        c = group.confusion
        assert c.true_positive + c.false_positive + c.false_negative + c.true_negative == group.judged
        assert group.agreement == ratio(c.true_positive + c.true_negative, group.judged)
        assert group.precision == ratio(c.true_positive, c.true_positive + c.false_positive)
        assert group.recall == ratio(c.true_positive, c.true_positive + c.false_negative)
        assert len(group.disagreements) == c.false_positive + c.false_negative


def _edited(data_dir: Path) -> None:
    """Four edited comments (SPEC §15.2): re-judged after the edit, awaiting the new text's attempt,
    labelled only before the new verdict, and edited after the person's mark (not called again)."""
    store = FileStore(Paths(data_dir))
    new_prompt = Prompt(template="verdict", template_sha256=PROMPT_A, system="s", user="u2")

    def rejudged(cid: str, said: bool) -> InboxRecord:
        first = records.apply_edit(_judged(cid, said=not said), "edited text", new_prompt, judged=True)
        verdict = Verdict(needs_reply=said, category="question" if said else "praise", priority="normal",
                          summary=f"new summary of {cid}", reply_hint="")
        again = records.reserve(first, command="scan", entrypoint="cli", provider="openai", model="gpt-x", pid=1)
        return records.finish(again, verdict=verdict, error=None)

    store.save_record(rejudged("ed1", said=False))  # said yes, edited, now says no; ignored after: agreed
    store.save_record(records.apply_edit(_judged("ed2", said=True), "edited text", new_prompt, judged=True))
    store.save_record(rejudged("ed3", said=True))  # marked before the new verdict: about the old text
    store.save_record(records.apply_edit(_judged("ed4", said=False), "edited text", new_prompt, judged=False))
    base = store.load_index()
    mine, _ = store.reconcile_index(base)
    marks = {"ed1": ("ignored", "2099-01-01T00:00:00Z"), "ed2": ("replied", "2099-01-01T00:00:00Z"),
             "ed3": ("ignored", "2000-01-01T00:00:00Z"), "ed4": ("ignored", "2099-01-01T00:00:00Z")}
    comments = {cid: mine.comments[cid].model_copy(update={"triage": triage, "triage_by": "person", "triage_at": at})
                for cid, (triage, at) in marks.items()}
    store.save_index(base, mine.model_copy(update={"comments": comments}))


def test_an_edited_comment_is_judged_by_its_latest_verdict_against_a_label_given_after_it(data_dir: Path) -> None:
    """ed1 by its new verdict (agreed, though its first said the opposite); ed2 has no verdict for
    its new text (not judged by the old one); ed3's mark predates its new verdict (unlabelled); ed4,
    edited after the mark and never called again, by the verdict the person acted on."""
    _edited(data_dir)
    result = run_main("cli", "eval", "--json", data_dir=data_dir).envelope["result"]  # type: ignore[index]
    assert (result["comments"], result["judged"], result["unlabelled"], result["without_verdict"]) == (4, 2, 1, 1)
    [group] = result["groups"]
    assert group["confusion"] == {"true_positive": 0, "false_positive": 0, "false_negative": 0, "true_negative": 2}
    assert group["disagreements"] == []
