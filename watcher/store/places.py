"""Data dirs as places (SPEC §16.3): whether two share files, and the marker of a migration into
one that has not finished. The commands above the store ask here instead of touching paths.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from watcher.store import durable
from watcher.store.dirs import fsync_dir, overlapping

# In the data dir while `watcher migrate` is bringing a store in: written before the first
# comment, removed once everything is brought (watcher/commands/migrate.py).
MARKER = "migrating.json"


def begin_migration(root: Path, *, source: Path, comments: int, within: Path) -> None:
    """Say durably, before anything is moved, that ``root`` is being filled from ``source``."""
    durable.write_json(root / MARKER, {"source": str(source), "comments": comments}, within=within)


def finish_migration(root: Path) -> None:
    """Everything of the migration is in: ``root`` is whole again."""
    (root / MARKER).unlink(missing_ok=True)
    fsync_dir(root)


def unfinished_migration(root: Path) -> str | None:
    """The source of a migration into ``root`` that did not finish (``"SRC"`` when its marker is
    unreadable), or ``None``: one ``lstat`` when there is none."""
    marker = root / MARKER
    if not os.path.lexists(marker):
        return None
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
        return str(doc["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return "SRC"


__all__ = ["MARKER", "begin_migration", "finish_migration", "overlapping", "unfinished_migration"]
