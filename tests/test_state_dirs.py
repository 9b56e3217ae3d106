"""SPEC §13.5, §15.5: a state *directory* that is a symbolic link is refused like a symlinked file.

``inbox/``, ``signals/``, ``locks/``, ``locks/calls/`` and ``quarantine/`` are watcher's own: a link
planted at one of them would make every write land at the link's target, outside the data dir, with
exit 0. Any command that meets one exits 5 naming it and writes nothing through it. The
data dir itself is the user's: they may point ``WATCHER_DATA_DIR`` through a link on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from _proc import run_main, write_export

from watcher.config import Paths
from watcher.errors import UnsafePath
from watcher.models import SeenFile
from watcher.store.files import FileStore

OFFLINE = {"WATCHER_PROVIDER": "offline"}
STATE_DIRS = ["inbox", "signals", "locks", "locks/calls", "quarantine"]


def _everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _link_state_dir(data_dir: Path, name: str, outside: Path) -> Path:
    """``data_dir/name`` made a link to the empty directory ``outside``."""
    link = data_dir / name
    link.parent.mkdir(parents=True, exist_ok=True)
    outside.mkdir(parents=True)
    link.symlink_to(outside, target_is_directory=True)
    return link


@pytest.mark.parametrize("name", STATE_DIRS)
def test_scan_refuses_a_symlinked_state_directory_and_writes_nothing_through_it(
        name: str, data_dir: Path, tmp_path: Path) -> None:
    """exit 5, the link named as a symbolic link; the link's target stays empty."""
    export = write_export(tmp_path / "export.json", ["a1", "a2"])
    outside = tmp_path / "elsewhere" / name.replace("/", "-")
    link = _link_state_dir(data_dir, name, outside)
    done = run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=OFFLINE)
    assert done.returncode == 5, done.stdout + done.stderr
    assert str(link) in done.stderr and "symbolic link" in done.stderr, done.stderr
    assert _everything(outside) == []
    assert link.is_symlink()


@pytest.mark.parametrize(("name", "commands"), [("inbox", ("status", "inbox")), ("signals", ("status", "signals"))])
def test_read_commands_refuse_a_symlinked_state_directory_too(name: str, commands: tuple[str, ...], data_dir: Path,
                                                              tmp_path: Path) -> None:
    """The commands that read through the directory exit 5 the same way: nothing is read from the target."""
    export = write_export(tmp_path / "export.json", ["a1"])
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=OFFLINE).returncode == 0
    moved = tmp_path / "moved"
    os.rename(data_dir / name, moved)
    (data_dir / name).symlink_to(moved, target_is_directory=True)
    for command in commands:
        done = run_main("cli", command, data_dir=data_dir, env=OFFLINE)
        assert done.returncode == 5, (command, done.stdout + done.stderr)
        assert str(data_dir / name) in done.stderr


def test_the_store_refuses_to_write_a_record_into_a_symlinked_inbox(paths: Paths, tmp_path: Path) -> None:
    """The durable write itself checks the directories under the data dir (UnsafePath, exit 5)."""
    from _fakes.records import record

    _link_state_dir(paths.root, "inbox", tmp_path / "outside")
    with pytest.raises(UnsafePath) as info:
        FileStore(paths).save_record(record("abc1"))
    assert info.value.path == paths.inbox
    assert _everything(tmp_path / "outside") == []


def test_a_data_dir_reached_through_the_users_own_link_works(tmp_path: Path) -> None:
    """WATCHER_DATA_DIR is a link, and a link sits above it: both are the user's, so scan runs."""
    real = tmp_path / "disk" / "watcher-data"
    real.mkdir(parents=True)
    (tmp_path / "via").symlink_to(tmp_path / "disk", target_is_directory=True)
    (tmp_path / "data-link").symlink_to(real, target_is_directory=True)
    export = write_export(tmp_path / "export.json", ["a1"])
    for data_dir in (tmp_path / "data-link", tmp_path / "via" / "watcher-data"):
        done = run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=OFFLINE)
        assert done.returncode == 0, done.stdout + done.stderr
    assert (real / "inbox" / "a1.json").is_file() and (real / "signals" / "state.json").is_file()
    assert FileStore(Paths(real)).load_index() != SeenFile()
