"""The one durable write of JSON state (SPEC §4), and the guarded read beside it.

Every state file goes through :func:`write_json` (temp file in the same directory, flush,
fsync, ``os.replace``, fsync the directory) and is read back through :func:`read_model`
(:mod:`watcher.store.guarded`), which moves a file that does not parse or validate to
``quarantine/`` instead of letting a later write paper over it. Writes need nothing extra for
special files (SPEC §13.5): ``os.replace`` replaces a symlink at the name, never its target, and
refuses a directory.

Directories too (SPEC §15.5). A link at ``signals/`` or ``inbox/`` would make every write land at
its target, outside the data dir, with exit 0: so every write that is given ``within`` (the part
of the path the user chose, :attr:`watcher.config.Paths.user_part`) first checks that each
directory below it is a real one (:func:`watcher.store.dirs.real_directories`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from watcher.errors import SaveFailed
from watcher.store.dirs import fsync_dir, make_dirs, real_directories
from watcher.store.guarded import M, quarantine, quarantined_names, read_model
from watcher.store.oscalls import OS, OsCalls

# The guarded read lives beside the write (watcher.store.guarded); callers of both keep one name.
__all__ = [
    "STALE_TEMP_S",
    "M",
    "fsync_dir",
    "make_dirs",
    "quarantine",
    "quarantined_names",
    "read_model",
    "remove_file",
    "sweep_stale_temps",
    "write_bytes",
    "write_json",
    "write_model",
]


def write_json(
    path: Path,
    data: Any,
    *,
    within: Path | None = None,
    sync: bool = True,
    calls: OsCalls | None = None,
) -> None:
    """Replace ``path`` with ``data`` as JSON, durably; raise :class:`SaveFailed` on any OS error.

    Readers see the old file or the new one, never a mix; after return the new one survives a
    power cut. On failure the old file is intact and the temp file is gone. ``calls``: the OS
    calls to make it with (:mod:`watcher.store.oscalls`; the real ones by default).
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
    _write_bytes_as(path, payload, within=within, sync=sync, calls=calls)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_model(
    path: Path,
    model: BaseModel,
    *,
    within: Path | None = None,
    sync: bool = True,
    calls: OsCalls | None = None,
) -> bool:
    """:func:`write_json` of a model, serialised by pydantic's Rust encoder (this runs twice per
    model call: the Python encoder with indentation was a measurable share of bookkeeping).

    Returns whether the file holds the model as it is: ``False`` when a text had to be mended to be
    written (a lone surrogate stored as U+FFFD, see :func:`write_json`), so that reading the file
    back gives another model."""
    try:
        payload = (model.model_dump_json(indent=1) + "\n").encode("utf-8")
    except PydanticSerializationError:
        # Lone surrogates: see write_json.
        write_json(path, model.model_dump(mode="json"), within=within, sync=sync, calls=calls)
        return False
    _write_bytes_as(path, payload, within=within, sync=sync, calls=calls)
    return True


def _write_bytes_as(
    path: Path, payload: bytes, *, within: Path | None, sync: bool, calls: OsCalls | None
) -> None:
    # A durable write with the real calls goes through the module's write_bytes, looked up at
    # call time: the power-loss rig plants a broken one there (tests/reliability/
    # test_rel_power_loss.py).
    if sync and calls is None:
        write_bytes(path, payload, within=within)
    else:
        _write(path, payload, within=within, sync=sync, calls=calls or OS)


def write_bytes(
    path: Path, payload: bytes, *, within: Path | None = None, calls: OsCalls = OS
) -> None:
    """``within``: the data dir's chosen part; every directory under it must be real
    (:func:`real_directories`)."""
    _write(path, payload, within=within, sync=True, calls=calls)


def _write(path: Path, payload: bytes, *, within: Path | None, sync: bool, calls: OsCalls) -> None:
    """``sync=False`` (a scratch data dir, :mod:`watcher.store.scratch`, removed when its command
    ends): the same temp file and rename, so readers still see the old file or the new one,
    without the fsyncs that only a power loss needs."""
    parent = path.parent  # a new Path each time it is asked for: once per write, not four times
    if within is not None:
        real_directories(parent, below=within)
    tmp: str | None = None
    try:
        if not parent.is_dir():
            if sync:
                make_dirs(parent, calls)
            else:  # a scratch data dir: nothing in it has to survive a power cut
                parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
        with calls.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            if sync:
                calls.fsync(fh.fileno())
        calls.replace(tmp, path)
        tmp = None  # the name now belongs to the data file; nothing left to clean up
        if sync:
            calls.sync_dir(parent)
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
        # run, while temp files are almost never there: a DirEntry each was a measurable share of
        # an idle scan of a large inbox.
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


def remove_file(path: Path, *, within: Path | None = None, calls: OsCalls = OS) -> None:
    """Remove a state file that is done with (a delivered outbox message, SPEC §16.1), durably;
    one already gone is fine. Raises :class:`SaveFailed` on any other OS error."""
    if within is not None:
        real_directories(path.parent, below=within)  # never delete anything through a link
    try:
        os.unlink(path)
        calls.sync_dir(path.parent)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SaveFailed(path, exc) from exc


def _unlink_quietly(name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name)
