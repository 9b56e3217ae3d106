"""``WATCHER_NOTIFY``: the Apprise URLs a round's news goes to (SPEC §16.1), and their secrets.

    parse_targets(text) -> tuple[Target, ...]   the URLs, split on spaces or commas; ConfigError
                                                for one that is no ``scheme://…``
    Target.shown                                ``ntfy://[redacted]`` — all any output shows of it
    Target.id                                   a stable name for it in ``outbox/`` files

An Apprise URL is a secret as a whole: the ntfy topic is the only thing between a stranger and
the messages, a Discord or Slack webhook's path is its token, a mail URL carries the password and
the address. Which part is secret differs per service, so output shows the scheme alone (with the
target's position when there are several), the outbox names a target by a hash of its URL, and
text that may quote a URL (an error from Apprise or a server) is redacted of every part of it
(:mod:`watcher.notify.redact`).

Nothing here imports Apprise (~150 ms, SPEC §16.1): ``status``, ``--help`` and the MCP server's
start read the setting without it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from pydantic import SecretStr

from watcher.errors import ConfigError
from watcher.util.urls import REDACTED

# Apprise's own separators: spaces, and a comma where the next URL begins. A comma inside one URL
# (``mailtos://…?to=a@x.com,b@x.com``, two recipients) stays in it.
_SPLIT = re.compile(r"\s+|,(?=\s*[A-Za-z][A-Za-z0-9+.-]*://)")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://\S")


@dataclass(frozen=True)
class Target:
    """One Apprise URL, kept secret: ``str()`` and ``repr()`` show only :attr:`shown`."""

    url: SecretStr
    position: int  # 1-based, in the order WATCHER_NOTIFY gives them
    count: int  # how many targets the setting holds (the position is shown when more than one)

    @property
    def scheme(self) -> str:
        return self.url.get_secret_value().partition("://")[0].lower()

    @property
    def shown(self) -> str:
        name = f"{self.scheme}://{REDACTED}"
        return f"{name} (#{self.position})" if self.count > 1 else name

    @property
    def id(self) -> str:
        """16 hex digits of the URL's SHA-256: the same target in every round, no secret on disk."""
        return hashlib.sha256(self.url.get_secret_value().encode("utf-8")).hexdigest()[:16]

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"Target({self.shown})"


def split_urls(text: str) -> list[str]:
    """The URLs of a ``WATCHER_NOTIFY`` value, in order, empty parts dropped."""
    return [part.strip(" ,") for part in _SPLIT.split(text.strip()) if part.strip(" ,")]


def parse_targets(value: object, setting: str = "WATCHER_NOTIFY") -> tuple[Target, ...]:
    """The targets of the setting's value (a string, or a list of strings from ``config.toml``).

    Raises :class:`ConfigError` (exit 2) naming the position of a part that is not a URL,
    never the part itself: it may be half of a secret."""
    if isinstance(value, list | tuple):
        parts = [url for item in value for url in split_urls(str(item))]
    elif isinstance(value, str):
        parts = split_urls(value)
    else:
        raise ConfigError(f"{setting} must be Apprise URLs separated by spaces or commas")
    for position, url in enumerate(parts, 1):
        if not _SCHEME.match(url):
            raise ConfigError(
                f"{setting}: target #{position} is not an Apprise URL (scheme://…, e.g. "
                "ntfy://my-topic or mailtos://user:pass@smtp.example.com) — see "
                "https://github.com/caronc/apprise/wiki for each service's URL"
            )
    unique = list(dict.fromkeys(parts))
    return tuple(
        Target(url=SecretStr(url), position=n, count=len(unique)) for n, url in enumerate(unique, 1)
    )
