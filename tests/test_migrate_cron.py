"""`watcher cron` on a named data dir that holds no comments while the default one does (SPEC
§15.3, §16.3): the note is trouble cron must say — a cron line pointed at the wrong, empty store
would judge every comment again on a budget of its own."""

from __future__ import annotations

import os
from pathlib import Path

from _fakes import records as rec
from _proc import run_main

from watcher.config import Paths
from watcher.store.files import FileStore


def test_cron_says_once_that_the_named_data_dir_is_empty_while_the_default_one_is_not(
    data_dir: Path,
) -> None:
    """First round: one stderr line naming the default data dir; the next round (within the day)
    says nothing more about it."""
    default = Path(os.environ["XDG_DATA_HOME"]) / "devto-watcher"
    default.mkdir(parents=True)
    FileStore(Paths(default)).save_record(rec.record("k1"))
    env = {"WATCHER_PROVIDER": "offline"}
    first = run_main("cli", "cron", data_dir=data_dir, env=env)
    said = [line for line in first.stderr.splitlines() if str(default) in line]
    assert len(said) == 1 and "holds no comments" in said[0], first.stderr
    again = run_main("cli", "cron", data_dir=data_dir, env=env)
    assert str(default) not in again.stderr, again.stderr
