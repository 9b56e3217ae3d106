"""SPEC §16.4: the views as a person reads them, at 80 and at 120 columns — inbox (and its one-line
form), show, status, articles and the demo — pinned in ``tests/golden/views.txt``.

The scenario is the demo's data dir (long comments, the offline label) and a small account of
recent comments (its ``articles`` line holds no age that grows from day to day). The transcript
machinery, and the temp dir of fixed path length a golden file needs once lines are wrapped, are
tests/test_results_golden.py's (``RESULTS_GOLDEN_WRITE=1`` rewrites the file).
"""

from __future__ import annotations

from pathlib import Path

from test_results_golden import ACCOUNT, Transcript, export, tmp_path  # noqa: F401 (a fixture)

from watcher.pipeline import Hooks
from watcher.source import Source, resolve_source

WIDTHS = ("80", "120")


def test_the_read_views_and_the_demo_print_what_they_printed_at_80_and_120_columns(
        tmp_path: Path) -> None:  # noqa: F811 (the fixed-length temp dir)
    """demo, inbox, inbox --oneline, --priority, show (a long comment), status and articles,
    each at 80 then at 120 columns; usage of a month without calls."""
    from test_results_golden import Account

    export(tmp_path / "export.json", ["q1", "p1", "s1", "q2"])

    def source(name: str) -> Source:
        return Account(tmp_path / "export.json") if name == ACCOUNT else resolve_source(name)

    demo = tmp_path / "d"
    t = Transcript("views", tmp_path, tmp_path / "unused", {}, hooks=Hooks(make_source=source))
    for columns in WIDTHS:
        wide = {"COLUMNS": columns}
        t.run("cli", "--data-dir", str(demo), "demo", env=wide)
        for args in (("inbox",), ("inbox", "--oneline"), ("inbox", "--priority", "high"),
                     ("show", "2ahm5"), ("status",)):
            t.run("cli", "--data-dir", str(demo), *args, env=wide)
    account = tmp_path / "account"
    t.run("cli", "--data-dir", str(account), "scan", "--source", ACCOUNT,
          env={"WATCHER_PROVIDER": "offline"})
    for columns in WIDTHS:
        t.run("cli", "--data-dir", str(account), "articles", env={"COLUMNS": columns})
    # A month long past: its (empty) envelope and view do not change as the months go by.
    t.run("cli", "--data-dir", str(account), "usage", "--month", "2000-01", "--json")
    t.run("cli", "--data-dir", str(account), "usage", "--month", "2000-01")
    t.check()
