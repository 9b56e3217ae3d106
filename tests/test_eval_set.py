"""SPEC §15.6: the labelled set in data/eval — its schema, its balance, and the offline classifier's
figures on it, which every offline verdict and `status` quote (watcher.providers.offline.MEASURED)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _proc import run_main

from watcher.commands import labelled
from watcher.config import Settings
from watcher.models import LabelFile
from watcher.providers.offline import MEASURED
from watcher.source import read_export
from watcher.store.scratch import scratch_parent

SET = Path(__file__).resolve().parent.parent / "data" / "eval"
# The kinds of comment dev.to authors get that the set must hold (SPEC §15.6).
KINDS = {"question", "bug_report", "correction", "praise", "thanks", "spam", "self_promotion", "reply_to_author",
         "off_topic", "non_english", "code_only"}


def _labels() -> LabelFile:
    return LabelFile.model_validate_json((SET / "labels.json").read_bytes())


def test_the_set_is_a_forem_export_with_one_label_per_comment(tmp_path: Path) -> None:
    """labels.json validates; its ids are exactly the export's comments (the author's own skipped),
    at least 150, of every kind; none was answered by the author in the export (it would never be judged)."""
    labels = _labels()
    fetched = read_export(SET / "export.json", Settings(data_dir=tmp_path, provider="offline"))
    assert fetched.rejected == [] and fetched.author_replies == {}
    assert sorted(c.id for c in fetched.comments) == sorted(labels.comments)
    assert len(labels.comments) >= 150
    assert KINDS <= {label.kind for label in labels.comments.values()}
    assert json.loads((SET / "export.json").read_text())["username"] == labels.author


def test_the_set_is_balanced_so_fixed_answers_score_badly() -> None:
    """Always-yes and always-no both agree with the author on about half the comments, and the held-out
    part holds comments of both labels."""
    labels = _labels().comments.values()
    share = sum(label.needs_reply for label in labels) / len(labels)
    assert 0.4 <= share <= 0.6
    held = [label for label in labels if label.held_out]
    assert len(held) >= 30 and {label.needs_reply for label in held} == {True, False}


def _stamps(root: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.iterdir()}


def _human(result: dict[str, object]) -> str:
    """The person's view of the same result (render.human, as `watcher eval --set` prints it)."""
    import contextlib
    import io

    from watcher.cli import render
    from watcher.commands.results import EvalResult

    with contextlib.redirect_stdout(io.StringIO()) as out:
        render.human("eval", EvalResult.model_validate(result))
    return out.getvalue()


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str, bool, bool]:
    """One `watcher eval --set bundled --json` for the module (~1 s of CPU: 192 comments through the
    pipeline): its result, its human output, whether the set and the user's data dir stayed untouched."""
    home = tmp_path_factory.mktemp("user")
    before = _stamps(SET)
    scratch = set(os.listdir(scratch_parent()))
    answer = run_main("cli", "eval", "--set", labelled.BUNDLED, "--json", data_dir=home)
    assert answer.returncode == 0, answer.stdout
    untouched = _stamps(SET) == before and list(home.iterdir()) == []
    left = {n for n in set(os.listdir(scratch_parent())) - scratch if n.startswith("watcher-eval-")}
    result = answer.envelope["result"]  # type: ignore[index]
    return result, _human(result), untouched, not left


def test_offline_figures_on_the_set_are_the_ones_it_quotes(offline_run: tuple[dict[str, object], str, bool, bool],
                                                           ) -> None:
    """`eval --set bundled` judges every comment offline and gets exactly MEASURED's figures."""
    result, _, _, _ = offline_run
    run = result["labelled_set"]
    assert isinstance(run, dict) and isinstance(result["groups"], list)
    assert (run["provider"], run["model"], run["calls"], run["call_budget"], run["data_dir"]) == (
        "offline", "heuristic-v2", MEASURED.comments, None, None)
    [group] = result["groups"]
    assert (group["judged"], group["unlabelled"], group["precision"], group["recall"]) == (
        MEASURED.comments, 0, MEASURED.precision, MEASURED.recall)
    assert (run["held_out"]["judged"], run["held_out"]["precision"], run["held_out"]["recall"]) == (
        MEASURED.held_out, MEASURED.held_out_precision, MEASURED.held_out_recall)
    assert run["always_yes"]["recall"] == 1.0 and run["always_no"]["recall"] == 0.0
    assert all(d["summary"].startswith(f"[offline] heuristic guess ({MEASURED.said()})")
               for d in group["disagreements"])


def test_the_set_run_touches_neither_the_set_nor_the_users_data(
        offline_run: tuple[dict[str, object], str, bool, bool]) -> None:
    """The set is only read, the user's data dir gets nothing, and the scratch data dir is gone after."""
    _, human, untouched, cleaned = offline_run
    assert untouched and cleaned
    assert "for comparison, always yes: agreement 0.484" in human and "held-out comments" in human


def test_status_quotes_the_offline_figures(data_dir: Path) -> None:
    """With the offline provider, status says how good its verdicts are on the set; with another, nothing."""
    offline = run_main("cli", "status", "--json", data_dir=data_dir, env={"WATCHER_PROVIDER": "offline"})
    assert MEASURED.said() in offline.envelope["result"]["offline_quality"]  # type: ignore[index]
    wide = {"WATCHER_PROVIDER": "offline", "COLUMNS": "200"}  # the line whole (SPEC §16.4 wraps)
    assert f"quality:   {MEASURED.said()}" in run_main("cli", "status", data_dir=data_dir,
                                                          env=wide).stdout
    other = run_main("cli", "status", "--json", data_dir=data_dir, env={"WATCHER_PROVIDER": "openai"})
    assert "offline_quality" not in other.envelope["result"]  # type: ignore[index]


def test_the_bundled_set_is_the_source_trees_and_ships_in_the_wheel() -> None:
    """`--set bundled` finds data/eval from a checkout, and the wheel maps data/eval to where
    an installed watcher looks (watcher/_bundled/eval)."""
    import tomllib

    assert labelled.locate(labelled.BUNDLED) == SET
    project = tomllib.loads((SET.parent.parent / "pyproject.toml").read_text())
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]["data/eval"] == \
        "watcher/_bundled/eval"
