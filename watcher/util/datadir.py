"""Where the data dir is, before anything else is read (SPEC §3, §15.5): the one a person named, or
the user's data directory. Settings (:func:`watcher.config.data_paths`) call these; nothing here
touches the disk."""

from __future__ import annotations

import os
from pathlib import Path

from watcher.errors import ConfigError


def named_data_dir(value: str | os.PathLike[str], setting: str) -> Path:
    """The data dir a person named in ``setting``, absolute; raise :class:`ConfigError` (exit 2)
    for one that cannot be meant.

    ``WATCHER_DATA_DIR`` set to a relative path names a different directory in every working
    directory a run starts in (cron's ``$HOME``, a checkout, an agent's workspace): each would get a
    3-attempt budget of its own (SPEC §15.5 "One budget per user"), so it is refused, naming the
    absolute path it would have meant here. A path on the command line is the shell's to resolve and
    is taken as the person typed it. ``~`` with no home directory known is refused too."""
    try:
        path = Path(value).expanduser()
    except RuntimeError as exc:  # "~" and no HOME, no passwd entry
        raise ConfigError(
            f"{setting}={os.fspath(value)} starts with ~, and this user has no home directory "
            "(HOME is unset and there is no passwd entry): give the data dir as an absolute path"
        ) from exc
    if setting == "WATCHER_DATA_DIR" and not path.is_absolute():
        raise ConfigError(
            f"WATCHER_DATA_DIR={os.fspath(value)} is a relative path: every directory a run "
            f"starts in would get a data dir, and a budget, of its own. Give it as an absolute "
            f"path, e.g. WATCHER_DATA_DIR={path.absolute()}"
        )
    return path.absolute()


def home_data_dir(app_name: str) -> Path:
    """The user's data directory (``$XDG_DATA_HOME/APP``, else ``~/.local/share/APP`` on Linux; the
    platform's own elsewhere, platformdirs), absolute. A user with no home directory (``HOME``
    unset and no passwd entry, as under some container runtimes) has none: that is a config error
    (exit 2) naming the setting that gives one, not a crash."""
    from platformdirs import user_data_dir  # only when no data dir was named

    try:
        found = Path(user_data_dir(app_name, appauthor=False))
    except (RuntimeError, KeyError) as exc:
        raise ConfigError(
            "no data dir: this user has no home directory (HOME is unset and there is no passwd "
            "entry), so the default data dir cannot be found. Set WATCHER_DATA_DIR to an absolute "
            "path (or HOME, or XDG_DATA_HOME)"
        ) from exc
    if not found.is_absolute() or "~" in found.parts:
        raise ConfigError(
            f"no data dir: the default data dir resolved to {found}, not an absolute path (is HOME "
            "or XDG_DATA_HOME relative?). Set WATCHER_DATA_DIR to an absolute path"
        )
    return found
