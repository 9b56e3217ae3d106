"""The one check of an http(s) URL that a setting names (``WATCHER_BASE_URL``, ``DEVTO_BASE_URL``).

It sits below both :mod:`watcher.config` and :mod:`watcher.providers`: config checks what the
user set, and the provider factory checks again (a ``Settings`` built by hand never went
through config) without importing config, which imports the provider registry.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from watcher.errors import ConfigError


def check_http_url(url: str, setting: str) -> str:
    """``url`` if it is an http(s) URL with a host (and a dialable port); else :class:`ConfigError`."""
    try:
        parts = urlsplit(url)
        # .port raises ValueError for a non-numeric or out-of-range port; 0 is no port to dial.
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # e.g. a non-numeric port or an unclosed IPv6 bracket
        usable = False
    if not usable:
        raise ConfigError(f"{setting} must be an http(s) URL, got {url!r}")
    return url
