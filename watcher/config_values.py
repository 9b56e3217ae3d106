"""Checks of single configuration values that :mod:`watcher.config` builds on (SPEC §3, §15.3):
a ``${NAME}`` a client never expanded, and ``api_key_env``, the variable that holds the key.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from watcher.errors import ConfigError

# `${NAME}` or `${NAME:-default}`, as the clients' config files write a variable to expand.
_UNEXPANDED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")
# A name a POSIX shell can export (what `env` passes on): letters, digits, "_", no digit first.
_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def refuse_unexpanded(setting: str, value: Any) -> None:
    """Raise :class:`ConfigError` (exit 2) when ``value`` holds a ``${NAME}`` nobody expanded.

    Claude Code passes an MCP server's ``"env": {"X": "${X}"}`` through literally when X is not
    set where it runs (seen with 2.1.197): the server would watch the dev.to user
    "${DEVTO_USERNAME}" or send "${OPENAI_API_KEY}" as a key. Only the ``${…}`` is quoted, never
    the rest of the value (it may be part of a key)."""
    if not isinstance(value, str) or (match := _UNEXPANDED.search(value)) is None:
        return
    name = match.group(1)
    raise ConfigError(
        f"{setting} is the unexpanded text {match.group(0)}: the client that started watcher "
        f"passed it on literally, as {name} is not set where that client runs — set {name} there "
        "(or write the value itself in the client's config)"
    )


def named_key(
    name: Any, origin: str, env: Mapping[str, str], settings: Collection[str]
) -> tuple[str | None, str]:
    """The key in the variable ``api_key_env`` names (``None``: unset or empty), and where status
    and check say it came from — the variable and who named it, never the key.

    Naming a variable is the person's choice to spend what it holds, so the MCP server, which
    leaves a provider's own variable inherited from its client unspent (SPEC §15.3), spends it.
    ``settings``: watcher's own variables (``origin`` names where ``api_key_env`` was set); a
    name among them other than WATCHER_API_KEY (the dev.to key, the notification URLs) would
    send that secret to the model provider, and is refused like a name no shell could export."""
    if not isinstance(name, str) or not _VAR_NAME.fullmatch(name):
        raise ConfigError(
            f"{origin}: api_key_env must be the name of an environment variable (letters, "
            f"digits and _, e.g. OPENAI_API_KEY), got {name!r}"
        )
    if name != "WATCHER_API_KEY" and name in settings:
        raise ConfigError(
            f"{origin}: api_key_env names {name}, a watcher setting that is not the model's key"
        )
    where = origin.removesuffix(" (api_key_env)")
    by = "WATCHER_API_KEY_ENV" if where == "WATCHER_API_KEY_ENV" else f"api_key_env in {where}"
    value = env.get(name) or None
    refuse_unexpanded(name, value)
    return value, f"{name} (named by {by})"
