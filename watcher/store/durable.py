"""The one durable write and the one guarded read of JSON state.

Every state file goes through :func:`write_json` (temp file in the same directory, flush,
fsync, ``os.replace``, fsync the directory) and is read back through :func:`read_model`,
which moves a file that does not parse or validate to ``quarantine/`` instead of letting a
later write paper over it.

Special files (SPEC §13.5). A state path is never followed and never opened blocking: the read
opens with ``O_NOFOLLOW | O_NONBLOCK`` and judges what it got with ``fstat``. A symlink (a loop
included), a FIFO, a socket or a device node is quarantined *itself* — renamed, never read
through, so its target is untouched. An empty directory is quarantined the same way (nothing in
it can be lost). A directory with entries is left in place with :class:`UnsafePath` (exit 5):
moving a folder of someone's files is not the kind of repair a state reader should make, and a
write can never replace it either (``os.replace`` refuses), so it would fail every run anyway.
Writes need nothing extra: ``os.replace`` replaces a symlink at the name, never its target.

Directories too (SPEC §15.5). A link at ``signals/`` or ``inbox/`` would make every write land at
its target, outside the data dir, with exit 0: so every read and write that is given ``within`` (the
part of the path the user chose, :attr:`watcher.config.Paths.user_part`) first checks that each
directory below it is a real one (:func:`watcher.store.dirs.real_directories`), and refuses a link there with
:class:`UnsafePath` naming it, like a link at a state file's own name.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from watcher.errors import CorruptState, NewerSchema, SaveFailed, UnsafePath
from watcher.store.dirs import kind_of, link_target, real_directories

M = TypeVar("M", bound=BaseModel)


def write_json(path: Path, data: Any, *, within: Path | None = None, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` as JSON, durably; raise :class:`SaveFailed` on any OS error.

    Readers see the old file or the new one, never a mix; after return the new one survives a
    power cut. On failure the old file is intact and the temp file is gone.
    """
    text = json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n"
    try:
        payload = text.encode("utf-8")
    except UnicodeEncodeError:
        # JSON from outside (a Forem payload, a model server's error) may escape a lone
        # surrogate ("\ud800"): valid JSON, no valid Unicode. Strict encoding then raised here —
        # not SaveFailed — so a scan died with exit 1 and a received answer was never saved.
        # Such a code point carries no text; U+FFFD stands in for it, everything else is kept.
        payload = _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")
    _write_bytes_as(path, payload, within=within, sync=sync)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_model(
    path: Path, model: BaseModel, *, within: Path | None = None, sync: bool = True
) -> bool:
    """:func:`write_json` of a model, serialised by pydantic's Rust encoder (this runs twice per
    model call: the Python encoder with indentation was a measurable share of bookkeeping).

    Returns whether the file holds the model as it is: ``False`` when a text had to be mended to be
    written (a lone surrogate stored as U+FFFD, see :func:`write_json`), so that reading the file
    back gives another model."""
    try:
        payload = (model.model_dump_json(indent=1) + "\n").encode("utf-8")
    except PydanticSerializationError:
        write_json(
            path, model.model_dump(mode="json"), within=within, sync=sync
        )  # lone surrogates: see write_json
        return False
    _write_bytes_as(path, payload, within=within, sync=sync)
    return True


def _write_bytes_as(path: Path, payload: bytes, *, within: Path | None, sync: bool) -> None:
    # A durable write goes through the module's write_bytes, looked up at call time: the fault and
    # power-loss rigs replace it there (tests/reliability/test_rel_power_loss.py plants a broken one).
    if sync:
        write_bytes(path, payload, within=within)
    else:
        _write(path, payload, within=within, sync=False)


def write_bytes(path: Path, payload: bytes, *, within: Path | None = None) -> None:
    """``within``: the data dir's chosen part; every directory under it must be real (:func:`real_directories`)."""
    _write(path, payload, within=within, sync=True)


def _write(path: Path, payload: bytes, *, within: Path | None, sync: bool) -> None:
    """``sync=False`` (a scratch data dir, :mod:`watcher.store.scratch`, removed when its command ends):
    the same temp file and rename, so readers still see the old file or the new one, without the
    fsyncs that only a power loss needs."""
    parent = (
        path.parent
    )  # builds a new Path each time it is asked for: once per write, not four times
    if within is not None:
        real_directories(parent, below=within)
    tmp: str | None = None
    try:
        if not parent.is_dir():
            if sync:
                make_dirs(parent)
            else:  # a scratch data dir: nothing in it has to survive a power cut
                parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None  # the name now belongs to the data file; nothing left to clean up
        if sync:
            fsync_dir(parent)
    except OSError as exc:
        raise SaveFailed(path, exc) from exc
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


# A temp file this old cannot belong to a write still in progress (a write takes milliseconds).
STALE_TEMP_S = 3600.0


def sweep_stale_temps(
    directory: Path, *, older_than_s: float = STALE_TEMP_S, within: Path | None = None
) -> int:
    """Delete temp files that writers killed mid-write left in ``directory``; return how many.

    Only our own ``.<name>.<random>.tmp`` names, and only old ones: a younger temp file may be
    a concurrent writer's, and removing it would make that writer's ``os.replace`` fail.
    """
    if within is not None:
        real_directories(directory, below=within)  # never delete anything through a link
    removed = 0
    cutoff = time.time() - older_than_s
    try:
        # Names, not DirEntry objects: inbox/ holds one file per comment and is swept by every
        # run, while temp files are almost never there (bench/run.py figure 3).
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    for name in [n for n in names if n[:1] == "." and n.endswith(".tmp")]:
        path = os.path.join(directory, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                os.unlink(path)
                removed += 1
        except OSError:
            # Gone already, or a read-only data dir: a leftover temp file harms nobody, and
            # the write that follows reports the read-only dir as "cannot write" (exit 5).
            continue
    return removed


def remove_file(path: Path, *, within: Path | None = None) -> None:
    """Remove a state file that is done with (a delivered outbox message, SPEC §16.1), durably;
    one already gone is fine. Raises :class:`SaveFailed` on any other OS error."""
    if within is not None:
        real_directories(path.parent, below=within)  # never delete anything through a link
    try:
        os.unlink(path)
        fsync_dir(path.parent)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SaveFailed(path, exc) from exc


def make_dirs(directory: Path) -> None:
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
        fsync_dir(level.parent)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (a replaced file is not durable until its dir is)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def read_model(
    path: Path,
    model: type[M],
    *,
    quarantine_dir: Path,
    check: Callable[[M], str | None] | None = None,
    one_pass: bool = False,
    within: Path | None = None,
    on_read: Callable[[os.stat_result], None] | None = None,
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

    ``within``: the data dir's chosen part; a link in the directories under it is :class:`UnsafePath`.

    ``on_read``: given the ``fstat`` of the file a model was loaded from (the very inode read).
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
            moved = quarantine(path, quarantine_dir, expected=found.stat, within=within)
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
# instead of waiting for a writer forever (it would hang every command: tests/test_special_paths.py); on a regular file
# it changes nothing.
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
            break  # a short read of a regular file past its size is its end: no read of b"" to learn it
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
    make_dirs(quarantine_dir)
    if not stat.S_ISDIR(os.lstat(quarantine_dir).st_mode):
        # A planted link here would move state files out of the data dir.
        raise UnsafePath(quarantine_dir, "not a real directory (a symbolic link or a file)")
    target = _free_name(path, quarantine_dir)
    try:
        # rename grabs whatever is at ``path`` atomically. A stat-then-move (or link+unlink)
        # leaves a window in which a writer's os.replace lands and the *healthy* new file is
        # the one unlinked — lost. Here the worst case is grabbing the new file, which we see
        # by its identity and put back below.
        os.rename(path, target)
    except FileNotFoundError:
        return None
    # lstat: what we moved may be a symlink, and it is the link we compare, never its target.
    if expected is not None and not _same_version(os.lstat(target), expected):
        _put_back(target, path)
        return None
    fsync_dir(quarantine_dir)
    fsync_dir(path.parent)
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


def _put_back(grabbed: Path, path: Path) -> None:
    """Return a healthy file we grabbed by mistake; link never overwrites a newer write."""
    try:
        os.link(grabbed, path, follow_symlinks=False)
    except FileExistsError:
        pass  # an even newer version is in place; the grabbed one was superseded anyway
    os.unlink(grabbed)
    fsync_dir(path.parent)


def quarantined_names(
    quarantine_dir: Path, label: str, *, within: Path | None = None
) -> list[Path]:
    """Quarantined copies of a file whose label (see :func:`quarantine`) is ``label``."""
    if within is not None:
        real_directories(quarantine_dir, below=within)
    if not quarantine_dir.is_dir():
        return []
    return sorted(quarantine_dir.glob(f"{label}.*"))
