"""The one guarded read of JSON state, and the quarantine of what cannot be read (SPEC §4, §13.5).

:func:`read_model` moves a file that does not parse or validate to ``quarantine/`` instead of
letting a later write paper over it.

Special files (SPEC §13.5). A state path is never followed and never opened blocking: the read
opens with ``O_NOFOLLOW | O_NONBLOCK`` and judges what it got with ``fstat``. A symlink (a loop
included), a FIFO, a socket or a device node is quarantined *itself* — renamed, never read
through, so its target is untouched. An empty directory is quarantined the same way (nothing in
it can be lost). A directory with entries is left in place with :class:`UnsafePath` (exit 5):
moving a folder of someone's files is not the kind of repair a state reader should make, and a
write can never replace it either (``os.replace`` refuses), so it would fail every run anyway.

Directories too (SPEC §15.5): a read given ``within`` first checks that each directory below it
is a real one (:func:`watcher.store.dirs.real_directories`), and refuses a link there with
:class:`UnsafePath` naming it, like a link at a state file's own name.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from watcher.errors import CorruptState, NewerSchema, UnsafePath
from watcher.store.dirs import kind_of, link_target, make_dirs, real_directories
from watcher.store.oscalls import OS, OsCalls

M = TypeVar("M", bound=BaseModel)


def read_model(
    path: Path,
    model: type[M],
    *,
    quarantine_dir: Path,
    check: Callable[[M], str | None] | None = None,
    one_pass: bool = False,
    within: Path | None = None,
    on_read: Callable[[os.stat_result], None] | None = None,
    calls: OsCalls = OS,
) -> M | None:
    """Load ``path`` as ``model``; ``None`` if it does not exist.

    Raises :class:`NewerSchema` (file untouched) when written by a newer watcher, and
    :class:`CorruptState` after moving a file that does not parse or validate — or that
    ``check`` rejects (it returns the reason) — into ``quarantine_dir``; a symlink, FIFO or other
    special file at ``path`` is moved the same way, itself. Raises :class:`UnsafePath` for a
    directory with entries or a path whose directories loop (left in place). If a concurrent
    durable write replaces the corrupt file while we move it, nothing healthy is moved: we read
    again and judge what is there now.

    ``one_pass``: parse and validate in one pass with pydantic's JSON parser, about half the
    cost of ``json.loads`` then validation (an inbox file: 87 k instead of 190 k instructions;
    it is read up to three times per model call). Whatever that pass rejects — invalid JSON,
    a lone surrogate escape, a newer ``schema_version``, a bad field — is judged again by the
    two-pass path, so the result, every error and every quarantine are the same. For models
    that forbid unknown fields and pin ``schema_version`` (every state model), so that a newer
    file can never pass the one pass.

    ``within``: the data dir's chosen part; a link in the directories under it is
    :class:`UnsafePath`.

    ``on_read``: given the ``fstat`` of the file a model was loaded from (the very inode read).
    ``calls``: the OS calls its quarantine makes (:mod:`watcher.store.oscalls`).
    """
    if within is not None:
        real_directories(path.parent, below=within)
    reason = ""
    for _ in range(_READ_TRIES):
        found = _read_once(path, model, check, one_pass, on_read)
        if not isinstance(found, _Corrupt):
            return found
        reason = found.reason
        try:
            moved = quarantine(
                path, quarantine_dir, expected=found.stat, within=within, calls=calls
            )
        except OSError as exc:
            raise CorruptState(
                path, None, f"{reason}; could not move it to quarantine ({exc})"
            ) from exc
        if moved is not None:
            raise CorruptState(path, moved, reason)
    raise CorruptState(path, None, f"{reason}; it kept changing while being moved aside")


_READ_TRIES = 3


class _Corrupt:
    def __init__(self, reason: str, stat: os.stat_result) -> None:
        self.reason = reason
        self.stat = stat


# O_NOFOLLOW: a symlink at the name fails with ELOOP instead of being read through (a loop used
# to escape as exit 1 from every command, status included). O_NONBLOCK: a FIFO opens at once
# instead of waiting for a writer forever (it would hang every command:
# tests/test_special_paths.py); on a regular file it changes nothing.
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def _read_once(
    path: Path,
    model: type[M],
    check: Callable[[M], str | None] | None,
    one_pass: bool = False,
    on_read: Callable[[os.stat_result], None] | None = None,
) -> M | None | _Corrupt:
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return _not_openable(path, exc)
    # One open file: the bytes we judge and the identity we later compare belong to the
    # same inode, even if a writer replaces the name in between.
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return _not_regular(path, before)
        raw = _read_all(fd, before.st_size)
    except OSError as exc:
        raise CorruptState(path, None, f"cannot be read ({exc})") from exc
    finally:
        os.close(fd)
    if one_pass:
        try:
            loaded = model.model_validate_json(raw)
        except ValidationError:
            pass  # judged below, where every reason and message is made
        else:
            problem = check(loaded) if check is not None else None
            return (
                _loaded(loaded, before, on_read) if problem is None else _Corrupt(problem, before)
            )
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _Corrupt(f"not valid JSON ({exc})", before)
    if not isinstance(data, dict):
        return _Corrupt(f"expected a JSON object, found {type(data).__name__}", before)
    # Before validation: a newer release's file holds what this one's models do not know, and
    # judging it corrupt would quarantine it and drop the user's marks (SPEC §15.5). Versions this
    # release knows (1 up to the model's SCHEMA_VERSION) are validated; anything else is corrupt.
    version, known = data.get("schema_version"), _known_version(model)
    if isinstance(version, int) and not isinstance(version, bool) and version > known:
        raise NewerSchema(path, version, known)
    try:
        loaded = model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        return _Corrupt(
            f"invalid at {where}: {first['msg']} ({exc.error_count()} problem(s))", before
        )
    problem = check(loaded) if check is not None else None
    return _loaded(loaded, before, on_read) if problem is None else _Corrupt(problem, before)


def _loaded(loaded: M, st: os.stat_result, on_read: Callable[[os.stat_result], None] | None) -> M:
    if on_read is not None:
        on_read(st)
    return loaded


def _known_version(model: type[BaseModel]) -> int:
    """The newest format of ``model``'s file this release reads (and writes)."""
    known = getattr(model, "SCHEMA_VERSION", 1)
    return known if isinstance(known, int) else 1


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    got = 0
    ask = max(size + 1, 65536)  # +1: the usual file ends in one read
    while chunk := os.read(fd, ask):
        chunks.append(chunk)
        got += len(chunk)
        if len(chunk) < ask and got >= size:
            # A short read of a regular file past its size is its end: no read of b"" to learn it.
            break
    return b"".join(chunks)


def _not_openable(path: Path, exc: OSError) -> _Corrupt:
    """``open`` refused: a symlink under O_NOFOLLOW (ELOOP), a socket (ENXIO), no permission…"""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise CorruptState(path, None, f"cannot be read ({exc})") from exc
    except OSError as lexc:
        if lexc.errno == errno.ELOOP:  # a loop in the directories above the name, not the name
            raise UnsafePath(
                path,
                "unreachable: the directories above it form a symbolic link loop",
                fix="fix the links above it",
            ) from exc
        raise CorruptState(path, None, f"cannot be read ({exc})") from exc
    if stat.S_ISLNK(st.st_mode):
        return _Corrupt(
            f"a symbolic link (to {link_target(path)!r}), not a regular file; it was not "
            "followed, and its target was not touched",
            st,
        )
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        raise CorruptState(path, None, f"cannot be read ({exc})") from exc
    return _not_regular(path, st)


def _not_regular(path: Path, st: os.stat_result) -> _Corrupt:
    if not stat.S_ISDIR(st.st_mode):
        return _Corrupt(f"{kind_of(st)}, not a regular file; it was not read", st)
    try:
        entries = len(os.listdir(path))
    except OSError:
        entries = -1
    if entries != 0:
        held = (
            "entries that could not be listed"
            if entries < 0
            else f"{entries} entr{'y' if entries == 1 else 'ies'}"
        )
        raise UnsafePath(path, f"a directory holding {held}, where a state file belongs")
    return _Corrupt("an empty directory, not a regular file", st)


def quarantine(
    path: Path,
    quarantine_dir: Path,
    *,
    expected: os.stat_result | None = None,
    within: Path | None = None,
    calls: OsCalls = OS,
) -> Path | None:
    """Move ``path`` aside under a name that never collides; return where it went.

    ``expected`` guards a race: a concurrent durable write may have replaced the corrupt file
    with a good one since we read it (every write is a new inode). Then nothing is moved and
    ``None`` is returned, so a healthy file is never quarantined. ``None`` also means the file
    is already gone (another reader moved it first).
    """
    if within is not None:
        real_directories(quarantine_dir, below=within)
    # Synced in its parent: a file renamed into a quarantine/ that a power cut undoes is lost.
    make_dirs(quarantine_dir, calls)
    if not stat.S_ISDIR(os.lstat(quarantine_dir).st_mode):
        # A planted link here would move state files out of the data dir.
        raise UnsafePath(quarantine_dir, "not a real directory (a symbolic link or a file)")
    target = _free_name(path, quarantine_dir)
    try:
        # rename grabs whatever is at ``path`` atomically. A stat-then-move (or link+unlink)
        # leaves a window in which a writer's os.replace lands and the *healthy* new file is
        # the one unlinked — lost. Here the worst case is grabbing the new file, which we see
        # by its identity and put back below.
        calls.rename(path, target)
    except FileNotFoundError:
        return None
    # lstat: what we moved may be a symlink, and it is the link we compare, never its target.
    if expected is not None and not _same_version(os.lstat(target), expected):
        _put_back(target, path, calls)
        return None
    calls.sync_dir(quarantine_dir)
    calls.sync_dir(path.parent)
    return target


def _free_name(path: Path, quarantine_dir: Path) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    label = f"{path.parent.name}-{path.name}" if path.parent.name == "inbox" else path.name
    # rename would overwrite an existing name, so the name must be unique, not just unused now:
    # pid keeps processes apart, the random token keeps threads (and same-second repeats) apart.
    # lexists: a quarantined dangling symlink is a name in use too.
    while os.path.lexists(
        target := quarantine_dir / f"{label}.{stamp}.{os.getpid()}.{secrets.token_hex(4)}"
    ):
        pass
    return target


def _same_version(now: os.stat_result, expected: os.stat_result) -> bool:
    # Inode numbers are reused once freed; mtime and size make a false match implausible.
    # A directory's mtime moves whenever an entry comes and goes; its inode is enough there.
    fields: tuple[str, ...] = ("st_ino", "st_dev", "st_mode")
    if not stat.S_ISDIR(expected.st_mode):
        fields += ("st_mtime_ns", "st_size")
    return all(getattr(now, f) == getattr(expected, f) for f in fields)


def _put_back(grabbed: Path, path: Path, calls: OsCalls) -> None:
    """Return a healthy file we grabbed by mistake; link never overwrites a newer write."""
    # FileExistsError: an even newer version is in place; the grabbed one was superseded anyway.
    with contextlib.suppress(FileExistsError):
        os.link(grabbed, path, follow_symlinks=False)
    os.unlink(grabbed)
    calls.sync_dir(path.parent)


def quarantined_names(
    quarantine_dir: Path, label: str, *, within: Path | None = None
) -> list[Path]:
    """Quarantined copies of a file whose label (see :func:`quarantine`) is ``label``."""
    if within is not None:
        real_directories(quarantine_dir, below=within)
    if not quarantine_dir.is_dir():
        return []
    return sorted(quarantine_dir.glob(f"{label}.*"))
