"""watcher's own directories under a data dir are real directories, never links (SPEC §13.5, §15.5).

A link planted at ``signals/`` or ``inbox/`` would make every write land at its target, outside the
data dir. The guarded reads and durable writes (:mod:`watcher.store.guarded`,
:mod:`watcher.store.durable`), the locks, listings and the signal log check the directories
under the part of the data dir the user chose first
(:attr:`watcher.config.Paths.user_part`): links above it are the user's to make.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path

from watcher.errors import UnsafePath
from watcher.store.oscalls import OS, OsCalls


def real_directories(directory: Path, *, below: Path) -> None:
    """Raise :class:`UnsafePath` unless every directory from ``below`` (excluded) down to
    ``directory`` (included) is a real directory or does not exist yet (it is made as a real one).

    ``below`` is the user's; what lies under it is watcher's own. One ``lstat`` per level: a state
    file sits one or two levels under it. A directory swapped for a link between this check and the
    write is not caught — the locks are cooperative (SPEC §11) — but a planted link never is missed.
    """
    # Strings as the cache's key: a str keeps its hash, a Path works it out again on every lookup.
    for level in _levels(os.fspath(directory), os.fspath(below)):
        try:
            st = os.lstat(level)
        except FileNotFoundError:
            return  # made later by mkdir, which makes a real directory
        except OSError as exc:
            raise UnsafePath(
                Path(level),
                f"a directory that cannot be checked ({exc.strerror or exc})",
                fix="make it a plain directory again",
            ) from exc
        if stat.S_ISLNK(st.st_mode):
            raise UnsafePath(
                Path(level),
                f"a symbolic link (to {link_target(Path(level))!r}) where watcher's own "
                "directory belongs",
                fix=_link_fix(Path(level)),
            )
        if not stat.S_ISDIR(st.st_mode):
            raise UnsafePath(
                Path(level),
                f"{kind_of(st) if not stat.S_ISREG(st.st_mode) else 'a file'} where a "
                "directory belongs",
                fix="move it out of the data dir",
            )


@lru_cache(maxsize=256)
def _levels(here: str, below: str) -> tuple[str, ...]:
    """The directories from ``below`` (excluded) down to ``here``, as strings: the names to lstat.

    Worked out once per pair: a run checks the same few directories (inbox/, locks/calls/) about
    eleven times per model call, and splitting and joining the path each time cost more than
    the lstats themselves."""
    top = below.rstrip(os.sep)
    if not here.startswith(top + os.sep):
        return ()  # the chosen part itself, or not under it: nothing of ours to judge
    levels, level = [], top
    for part in here[len(top) + 1 :].split(os.sep):
        if part:
            level = f"{level}{os.sep}{part}"
            levels.append(level)
    return tuple(levels)


# The directories of SPEC §4 under a data dir; any other level is the data dir's own path.
_STATE_DIRS = frozenset({"inbox", "signals", "locks", "calls", "quarantine"})


def _link_fix(level: Path) -> str:
    if level.name in _STATE_DIRS:
        return "put the directory itself there (e.g. `rm LINK && mv TARGET LINK`)"
    return (
        "put the directory itself there, or set WATCHER_DATA_DIR to the path you mean "
        "(a data dir you name may be reached through links)"
    )


def kind_of(st: os.stat_result) -> str:
    mode = st.st_mode
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "a special file"


def link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def make_dirs(directory: Path, calls: OsCalls = OS) -> None:
    """Create ``directory`` and its missing parents, each synced in its parent before the next.

    A new directory's entry is not on disk until its parent is fsynced, and a file in a directory
    a power cut undoes is lost with it: so every level made is synced in its parent, the data
    dir's own parent included, or a power cut after a first scan could take the data dir with
    every reservation in it (tests/reliability/test_rel_power_loss.py). Raises ``OSError``.
    """
    missing: list[Path] = []
    while not os.path.isdir(directory) and directory != directory.parent:
        missing.append(directory)
        directory = directory.parent
    for level in reversed(missing):
        try:
            os.mkdir(level)
        except FileExistsError:
            if not os.path.isdir(level):
                raise
        # Also when another process made it first: it may not have synced it yet.
        calls.sync_dir(level.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a replaced file is not durable until its dir is)."""
    OS.sync_dir(directory)


def overlapping(one: Path, other: Path) -> str | None:
    """How ``one`` and ``other`` share files: ``"is"``, ``"contains"`` (``other`` lies inside
    ``one``), ``"lies inside"`` (``one`` lies inside ``other``), or ``None``. Both are resolved
    first (links, ``..``), so a path reached another way is caught too."""
    a, b = one.resolve(), other.resolve()
    if a == b:
        return "is"
    if a in b.parents:
        return "contains"
    if b in a.parents:
        return "lies inside"
    return None
