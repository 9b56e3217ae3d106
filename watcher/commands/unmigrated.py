"""The refusal before any fetch or call while a data dir is not ready for a run (SPEC §16.3): its
state is still in ``./data`` (the default of releases before 0.2.0), or a ``watcher migrate`` into
it did not finish (:mod:`watcher.commands.migrate` writes :data:`MARKER` first and removes it last).
Every command that opens the data dir through :class:`watcher.commands.core.Context` asks here."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from watcher.config import OLD_DEFAULT_DIR, Paths, Settings
from watcher.errors import ConfigError
from watcher.pipeline import Hooks
from watcher.pipeline.batch import open_store
from watcher.store import Store

MARKER = "migrating.json"


def refuse_unmigrated(settings: Settings, store: Store, hooks: Hooks) -> None:
    """Raise :class:`ConfigError` (exit 2) before any fetch or call when the data dir is not ready:
    a migration into it did not finish, or it is the default, holds no state, and ``./data`` (the
    default before 0.2.0) does — a run would start an empty store and buy every verdict again."""
    marker = settings.data_dir / MARKER
    if os.path.lexists(marker):
        source = _marker_source(marker)
        raise ConfigError(
            f"a migration into {settings.data_dir} did not finish: run `watcher migrate "
            f"{shlex.quote(source)}` again to complete it (it is safe to rerun)"
        )
    if not settings.data_dir_defaulted:
        return
    old = open_store(Paths(OLD_DEFAULT_DIR.absolute()), hooks)
    if old.paths.root == settings.data_dir or not old.holds_state() or store.holds_state():
        return
    raise ConfigError(
        f"{old.paths.root} holds watcher state (the data dir of releases before 0.2.0) and the "
        f"data dir {settings.data_dir} none: run `watcher migrate ./data` to bring its comments, "
        f"marks and attempts over — or keep using it with "
        f"WATCHER_DATA_DIR={shlex.quote(str(old.paths.root))}"
    )


def _marker_source(marker: Path) -> str:
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
        return str(doc["source"])
    except (OSError, ValueError, KeyError, TypeError):
        return "SRC"
