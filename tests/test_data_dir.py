"""SPEC §3, §15.5: one budget per user — the default data dir is the user's data directory.

A default relative to the working directory would give each one (cron's ``$HOME``, a checkout, an
agent's workspace) a data dir and a 3-attempt budget of its own, so the default is the platform's user
data directory (``$XDG_DATA_HOME/devto-watcher``, else ``~/.local/share/devto-watcher`` on Linux);
a relative ``WATCHER_DATA_DIR`` is refused (it would name another directory in every one). A run
that finds state in ``./data`` but none in the default exits 2 naming ``watcher migrate ./data``. The
demo keeps ``./data/demo``. The autouse fixture points ``XDG_DATA_HOME`` at a temp dir, so nothing
here (or anywhere in the suite) can reach the real one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from _proc import run_main, write_export

from watcher.config import load_settings
from watcher.errors import ConfigError

OFFLINE = {"WATCHER_PROVIDER": "offline"}


@pytest.fixture
def default_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """No WATCHER_DATA_DIR: the data dir is the default, under the test's own XDG_DATA_HOME."""
    monkeypatch.delenv("WATCHER_DATA_DIR")
    return Path(os.environ["XDG_DATA_HOME"]) / "devto-watcher"


def _main(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``watcher *args`` (in this process) from ``cwd``, with no WATCHER_DATA_DIR."""
    old = Path.cwd()
    os.chdir(cwd)
    try:
        done = run_main("cli", *args, data_dir=None, env=OFFLINE)
    finally:
        os.chdir(old)
    return done


def test_the_default_data_dir_is_the_users_data_directory(default_dir: Path) -> None:
    """$XDG_DATA_HOME/devto-watcher, absolute, whatever the working directory."""
    assert load_settings(env={}).data_dir == default_dir
    assert load_settings(env={"XDG_DATA_HOME": "/ignored"}).data_dir == default_dir  # platformdirs reads os.environ


def test_a_relative_data_dir_option_is_resolved_once(tmp_path: Path) -> None:
    """--data-dir state is the absolute <cwd>/state; WATCHER_DATA_DIR=state is refused (SPEC §16.3,
    tests/test_first_contact_mistakes.py)."""
    assert load_settings(data_dir="state", env={}).data_dir == Path.cwd() / "state"
    with pytest.raises(ConfigError, match="relative path"):
        load_settings(env={"WATCHER_DATA_DIR": "state"})


def test_runs_from_two_working_directories_share_one_budget(default_dir: Path, tmp_path: Path) -> None:
    """scan from one directory, then from another: the second finds the first's verdicts and
    calls nothing; both name the same data dir."""
    export = write_export(tmp_path / "export.json", ["a1", "a2"])
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    first = _main("scan", "--source", str(export), "--json", cwd=one)
    assert first.returncode == 0, first.stderr
    second = _main("scan", "--source", str(export), "--json", cwd=two)
    assert second.returncode == 0, second.stderr
    assert '"calls": 0' in second.stdout
    assert (default_dir / "inbox" / "a1.json").is_file()
    assert not (one / "data").exists() and not (two / "data").exists()


def _old_state(cwd: Path, export: Path) -> Path:
    """State where the default used to be: ./data of ``cwd``, made by a scan with WATCHER_DATA_DIR=./data."""
    old = cwd / "data"
    done = run_main("cli", "scan", "--source", str(export), data_dir=old, env=OFFLINE)
    assert done.returncode == 0, done.stderr
    (old / "sample").mkdir()  # a checkout's bundled sample lives there too: it must stay
    return old


def test_state_left_in_dot_data_stops_every_run_until_migrate_brings_it_over(default_dir: Path,
                                                                              tmp_path: Path) -> None:
    """status and scan exit 2 naming `watcher migrate ./data`, before anything is written; after the
    migration the next scan finds the verdicts (nothing called again); ./data stays in place."""
    export = write_export(tmp_path / "export.json", ["a1"])
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    old = _old_state(cwd, export)
    for args in (("status",), ("scan", "--source", str(export))):
        refused = _main(*args, cwd=cwd)
        assert refused.returncode == 2, refused.stderr
        assert "watcher migrate ./data" in refused.stderr and str(old) in refused.stderr
    assert not default_dir.exists()
    moved = _main("migrate", "./data", cwd=cwd)
    assert moved.returncode == 0, moved.stderr
    again = _main("scan", "--source", str(export), "--json", cwd=cwd)
    assert again.returncode == 0 and '"calls": 0' in again.stdout, again.stdout + again.stderr
    assert (old / "sample").is_dir() and (old / "inbox" / "a1.json").is_file()
    assert (default_dir / "inbox" / "a1.json").is_file()


def test_no_note_once_the_default_holds_state_or_a_data_dir_is_named(default_dir: Path, tmp_path: Path) -> None:
    """The default already in use, or WATCHER_DATA_DIR set: ./data is someone's choice, not left over."""
    export = write_export(tmp_path / "export.json", ["a1"])
    cwd = tmp_path / "checkout"
    cwd.mkdir()
    _old_state(cwd, export)
    named = run_main("cli", "status", data_dir=cwd / "data", env=OFFLINE)
    assert named.returncode == 0 and "move it" not in named.stderr
    assert _main("scan", "--source", str(export), cwd=tmp_path).returncode == 0  # the default gets state
    assert "move it" not in _main("status", cwd=cwd).stderr


def test_the_demo_keeps_dot_data_demo(default_dir: Path, tmp_path: Path) -> None:
    """`watcher demo` with no data dir named: ./data/demo, never the user's data directory."""
    done = _main("demo", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "data" / "demo" / "inbox").is_dir()
    assert not default_dir.exists()
    assert "move it" not in done.stderr


def test_a_link_at_the_defaults_own_directory_is_refused(default_dir: Path, tmp_path: Path) -> None:
    """$XDG_DATA_HOME is the user's (a link there is theirs); devto-watcher/ under it is watcher's:
    a link there is exit 5 naming it, and nothing is written at its target."""
    export = write_export(tmp_path / "export.json", ["a1"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    default_dir.parent.mkdir(parents=True)
    default_dir.symlink_to(elsewhere, target_is_directory=True)
    done = _main("scan", "--source", str(export), cwd=tmp_path)
    assert done.returncode == 5 and str(default_dir) in done.stderr and "WATCHER_DATA_DIR" in done.stderr, done.stderr
    assert list(elsewhere.iterdir()) == []
