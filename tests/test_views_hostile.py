"""SPEC §16.4 and §15.5 with hostile text in every view: very long words, a long URL, CJK and
emoji (two cells a character), bidi controls and escape sequences in a comment, its author and its
article's title. At 80 columns (a pipe) and at 40, no line is wider than the width but a URL or
a path that cannot be broken, and nothing a terminal acts on reaches it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _proc import run_main
from _terminal import HOSTILE, unsafe
from rich.cells import cell_len

LONG_WORD = "Supercalifragilistic" * 12
LONG_URL = "https://example.com/" + "a-very-long-path-segment/" * 8 + "end"
CJK = "漢字のテキストは一文字が二つの桁を使います" * 4
EMOJI = "👩‍💻🎉🚀" * 12
BIDI = "\u202eevil\u202c \u2067right-to-left\u2069"
TEXT = f"Why does {LONG_WORD} fail? See {LONG_URL} — {CJK} {EMOJI} {BIDI} {HOSTILE}"
OFFLINE = {"WATCHER_PROVIDER": "offline"}


def _export(path: Path) -> Path:
    """One article whose title, commenter and comment are all hostile; a reply beneath it."""
    child = {"type_of": "comment", "id_code": "h2", "created_at": "2026-05-14T09:01:00Z",
             "body_html": f"<p>{TEXT}</p>", "children": [],
             "user": {"name": "Eve", "username": f"eve{EMOJI}{CJK}{BIDI}"}}
    parent = {"type_of": "comment", "id_code": "h1", "created_at": "2026-05-14T09:00:00Z",
              "body_html": f"<p>Is this right? {TEXT}</p>", "children": [child],
              "user": {"name": "P", "username": f"pat{LONG_WORD}"}}
    article = {"id": 7, "title": f"{CJK} {LONG_WORD} {BIDI}", "url": LONG_URL,
               "comments_count": 2, "comments": [parent]}
    path.write_text(json.dumps({"username": "maya", "articles": [article]}))
    return path


def _too_wide(text: str, width: int) -> list[str]:
    """The lines wider than ``width`` that are not one unbreakable URL or path, or the one
    command to copy that ends in a path (the demo's ``rm -rf DIR``, printed whole)."""
    return [line for line in text.splitlines() if cell_len(line) > width
            and not re.fullmatch(r"\s*(\S{0,2}|rm -rf )(https?://|/)\S+", line)]


VIEWS = (("inbox",), ("inbox", "--all"), ("inbox", "--oneline"), ("show", "h1"), ("show", "h2"),
         ("status",), ("articles",), ("eval",))


@pytest.mark.parametrize("columns", [80, 40])
def test_no_view_is_wider_than_the_width_or_lets_an_escape_through(
        tmp_path: Path, data_dir: Path, columns: int) -> None:
    """scan's table, inbox (all, one line), show, status, articles and eval at the width."""
    source = str(_export(tmp_path / "export.json"))
    env = {**OFFLINE, "COLUMNS": str(columns)}
    answers = [run_main("cli", "scan", "--source", source, data_dir=data_dir, env=env)]
    answers += [run_main("cli", *args, data_dir=data_dir, env=env) for args in VIEWS]
    for args, answer in zip([("scan",), *VIEWS], answers, strict=True):
        assert answer.returncode == 0, (args, answer.stderr)
        assert _too_wide(answer.stdout, columns) == [], args
        assert unsafe(answer.stdout + answer.stderr) == [], args
    assert LONG_URL in answers[4].stdout  # the URL in show's text, whole


def test_a_demo_at_40_columns_fits(tmp_path: Path, data_dir: Path) -> None:
    """The demo's own output (its paths are in the temp dir) at a narrow width."""
    answer = run_main("cli", "--data-dir", str(tmp_path / "d"), "demo", data_dir=data_dir,
                      env={"COLUMNS": "40"})
    assert answer.returncode == 0 and _too_wide(answer.stdout, 40) == []
