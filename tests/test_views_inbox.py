"""SPEC §16.4: the inbox a person filters and skims — ``--article``, ``--priority``, ``--oneline``
— the offline classifier's label said once per view, and ``show`` naming the verdict's model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _proc import run_main

LABEL = "heuristic guess (labelled set"


@pytest.fixture
def demo_dir(tmp_path: Path, data_dir: Path) -> Path:
    """A data dir holding the demo's eleven comments that need a reply (3 articles, 2 high)."""
    demo = tmp_path / "demo"
    assert run_main("cli", "--data-dir", str(demo), "demo", data_dir=data_dir).returncode == 0
    return demo


def _ids(demo: Path, *args: str) -> list[str]:
    answer = run_main("cli", "--data-dir", str(demo), "inbox", *args, "--json", data_dir=demo)
    assert answer.returncode == 0, answer.stderr
    return [row["id"] for row in json.loads(answer.stdout)["result"]["comments"]]


def test_priority_keeps_only_that_priority(demo_dir: Path) -> None:
    """--priority high lists the two bug reports; low lists none of the eleven."""
    assert _ids(demo_dir, "--priority", "high") == ["2ac3d", "3c02"]
    assert _ids(demo_dir, "--priority", "low") == []
    assert len(_ids(demo_dir)) == 11


def test_article_keeps_only_that_articles_comments(demo_dir: Path) -> None:
    """--article ID lists the comments on that article only (the token-bucket article's five)."""
    assert _ids(demo_dir, "--article", "1921388") == ["4cdp", "4cf3", "4chk", "4ckb", "4cnb"]
    assert _ids(demo_dir, "--article", "1") == []


def test_a_priority_that_does_not_exist_is_a_usage_error(demo_dir: Path) -> None:
    """--priority urgent is exit 2 naming the three priorities."""
    answer = run_main("cli", "--data-dir", str(demo_dir), "inbox", "--priority", "urgent",
                      data_dir=demo_dir)
    assert answer.returncode == 2 and "high, normal, low" in answer.stderr


def test_oneline_prints_one_line_per_comment(demo_dir: Path) -> None:
    """--oneline: the label once, then each comment on one line beginning with its id."""
    answer = run_main("cli", "--data-dir", str(demo_dir), "inbox", "--oneline", data_dir=demo_dir)
    ids = _ids(demo_dir)
    lines = answer.stdout.splitlines()
    assert [line.split()[0] for line in lines if line.split()[0] in ids] == ids
    assert sum(1 for line in lines if line.split()[0] in ids) == len(ids)


def test_the_offline_label_and_category_are_said_once(demo_dir: Path) -> None:
    """inbox says the offline label once for eleven comments, and no summary repeats the
    category the entry's first line gives."""
    out = run_main("cli", "--data-dir", str(demo_dir), "inbox", data_dir=demo_dir).stdout
    flat = " ".join(out.split())
    assert flat.count(LABEL) == 1
    assert "bug_report: “" not in flat and "[offline]" not in flat


def test_show_names_the_provider_and_model_of_the_verdict(demo_dir: Path) -> None:
    """show: "verdict by offline heuristic-v2"."""
    out = run_main("cli", "--data-dir", str(demo_dir), "show", "2ac3d", data_dir=demo_dir).stdout
    assert "verdict by offline heuristic-v2" in " ".join(out.split())
