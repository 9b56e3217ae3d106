"""The one durable write and the one guarded read of JSON state.

Every state file goes through :func:`write_json` (temp file in the same directory, flush,
fsync, ``os.replace``, fsync the directory) and is read back through :func:`read_model`,
which moves a file that does not parse or validate to ``quarantine/`` instead of letting a
later write paper over it.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from watcher.errors import CorruptState, NewerSchema, SaveFailed

SCHEMA_VERSION = 1
M = TypeVar("M", bound=BaseModel)


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON, durably; raise :class:`SaveFailed` on any OS error.

    Readers see the old file or the new one, never a mix; after return the new one survives a
    power cut. On failure the old file is intact and the temp file is gone.
    """
    payload = (json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n").encode("utf-8")
    write_bytes(path, payload)


def write_model(path: Path, model: BaseModel) -> None:
    write_json(path, model.model_dump(mode="json"))


def write_bytes(path: Path, payload: bytes) -> None:
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None  # the name now belongs to the data file; nothing left to clean up
        fsync_dir(path.parent)
    except OSError as exc:
        raise SaveFailed(path, exc) from exc
    finally:
        if tmp is not None:
            _unlink_quietly(tmp)


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


def read_model(path: Path, model: type[M], *, quarantine_dir: Path) -> M | None:
    """Load ``path`` as ``model``; ``None`` if it does not exist.

    Raises :class:`NewerSchema` (file untouched) when written by a newer watcher, and
    :class:`CorruptState` after moving a file that does not parse or validate into
    ``quarantine_dir``.
    """
    try:
        before = os.stat(path)
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CorruptState(path, None, f"cannot be read ({exc})") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _quarantined(path, before, quarantine_dir, f"not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise _quarantined(path, before, quarantine_dir, f"expected a JSON object, found {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise NewerSchema(path, version, SCHEMA_VERSION)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        reason = f"invalid at {where}: {first['msg']} ({exc.error_count()} problem(s))"
        raise _quarantined(path, before, quarantine_dir, reason) from exc


def _quarantined(path: Path, seen: os.stat_result, quarantine_dir: Path, reason: str) -> CorruptState:
    return CorruptState(path, quarantine(path, quarantine_dir, expected=seen), reason)


def quarantine(path: Path, quarantine_dir: Path, *, expected: os.stat_result | None = None) -> Path | None:
    """Move ``path`` aside under a name that never collides; return where it went.

    ``expected`` guards a race: a concurrent durable write may have replaced the corrupt file
    with a good one since we read it (every write is a new inode). Then nothing is moved and
    ``None`` is returned, so a healthy file is never quarantined.
    """
    quarantine_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    label = f"{path.parent.name}-{path.name}" if path.parent.name == "inbox" else path.name
    for n in range(1000):
        target = quarantine_dir / f"{label}.{stamp}.{os.getpid()}.{n}"
        if not target.exists():
            break
    try:
        if expected is not None:
            now = os.stat(path)
            if (now.st_ino, now.st_dev, now.st_mtime_ns) != (expected.st_ino, expected.st_dev, expected.st_mtime_ns):
                return None
        # link + unlink, not rename: link fails instead of overwriting an existing quarantine file.
        os.link(path, target)
        os.unlink(path)
        fsync_dir(quarantine_dir)
        fsync_dir(path.parent)
    except FileNotFoundError:
        return None
    return target


def quarantined_names(quarantine_dir: Path, label: str) -> list[Path]:
    """Quarantined copies of a file whose label (see :func:`quarantine`) is ``label``."""
    if not quarantine_dir.is_dir():
        return []
    return sorted(quarantine_dir.glob(f"{label}.*"))
