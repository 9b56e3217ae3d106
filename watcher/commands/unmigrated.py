"""The refusal before any fetch or call while a data dir is not ready for a run (SPEC §16.3): its
state is still in ``./data`` (the default of releases before 0.2.0), or a ``watcher migrate`` into
it did not finish (:mod:`watcher.commands.migrate` marks it first and unmarks it last,
:mod:`watcher.store.places`).
Every command that opens the data dir through :class:`watcher.commands.core.Context` asks here."""

from __future__ import annotations

import shlex
from collections.abc import Callable

from watcher.config import OLD_DEFAULT_DIR, Paths, Settings
from watcher.errors import ConfigError
from watcher.pipeline import Hooks
from watcher.pipeline.batch import open_store
from watcher.store import Store
from watcher.store.places import unfinished_migration

# The note of a named data dir with no comments while the default one holds some: trouble that
# `watcher cron` says on stderr (watcher/commands/cron.py ``_is_problem``).
EMPTY_BESIDE_DEFAULT = "holds no comments, but the default data dir"


def refuse_unmigrated(
    settings: Settings,
    store: Store,
    hooks: Hooks,
    notice: Callable[[str], None] = lambda _msg: None,
) -> None:
    """Raise :class:`ConfigError` (exit 2) before any fetch or call when the data dir is not ready:
    a migration into it did not finish, or it is the default, holds no state, and ``./data`` (the
    default before 0.2.0) does — a run would start an empty store and buy every verdict again."""
    source = unfinished_migration(settings.data_dir)
    if source is not None:
        raise ConfigError(
            f"a migration into {settings.data_dir} did not finish: run `watcher migrate "
            f"{shlex.quote(source)}` again to complete it (it is safe to rerun)"
        )
    if not settings.data_dir_defaulted:
        _warn_if_named_is_empty(settings, store, notice)
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


def _warn_if_named_is_empty(
    settings: Settings, store: Store, notice: Callable[[str], None]
) -> None:
    """A named data dir with no state while the default one holds some: most likely a path meant
    for the default (an agent's ``WATCHER_DATA_DIR=/path/to/clone/data``), which would give the
    comments a second, empty budget. Said on stderr; the person may mean it."""
    if store.holds_state():
        return
    from watcher.config import default_data_dir
    from watcher.errors import ConfigError

    try:
        default = default_data_dir()
    except ConfigError:
        return  # no home directory: no default to compare with
    # The files themselves, not the hooks' store: a test's store stands for the data dir it opened.
    from watcher.store.files import FileStore

    if default == settings.data_dir or not FileStore(Paths(default)).holds_state():
        return
    notice(
        f"note: the data dir {settings.data_dir} {EMPTY_BESIDE_DEFAULT} {default} does — if "
        "you meant that one, unset WATCHER_DATA_DIR (or --data-dir), or set it to that path"
    )
