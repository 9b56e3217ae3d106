"""The one check of an http(s) URL that a setting names (``WATCHER_BASE_URL``, ``DEVTO_BASE_URL``),
and the credentials such a URL may carry (``http://user:pw@proxy/v1``).

It sits below both :mod:`watcher.config` and :mod:`watcher.providers`: config checks what the
user set, and the provider factory checks again (a ``Settings`` built by hand never went
through config) without importing config, which imports the provider registry.

Credentials in a URL are a secret like the API key (SPEC §15.5): config keeps them apart
(:func:`split_credentials`), so the base URL that the breaker stores, status prints and error
messages quote has none; where a URL is shown as the user wrote it, :func:`shown_url` puts
:data:`REDACTED` in their place, so the reader still sees that credentials are in use.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from watcher.errors import ConfigError

# What stands in for a secret wherever one is shown (the API key's redaction uses it too).
REDACTED = "[redacted]"


def check_http_url(url: str, setting: str) -> str:
    """``url`` if it is an http(s) URL with a host (and a dialable port); else
    :class:`ConfigError`."""
    try:
        parts = urlsplit(url)
        # .port raises ValueError for a non-numeric or out-of-range port; 0 is no port to dial.
        usable = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # e.g. a non-numeric port or an unclosed IPv6 bracket
        usable = False
    if not usable:
        raise ConfigError(f"{setting} must be an http(s) URL, got {shown_url(url)!r}")
    return url


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@`` part, and that part as written (percent-encoded),
    or ``None`` when it has none. Everything else of the URL is kept character for character.

    The host is what follows the *last* ``@`` of the authority, as :func:`urllib.parse.urlsplit`
    (and so :func:`check_http_url`) reads it."""
    start, end = _authority(url)
    userinfo, at, host = url[start:end].rpartition("@")
    if not at:
        return url, None
    return url[:start] + host + url[end:], userinfo or None


def shown_url(url: str) -> str:
    """``url`` fit to show: credentials replaced by :data:`REDACTED` (``http://[redacted]@host/v1``)."""
    bare, userinfo = split_credentials(url)
    return marked(bare) if userinfo is not None else bare


def marked(url: str) -> str:
    """``url`` (without credentials) as shown when credentials go with it: ``http://[redacted]@host``."""
    start, _end = _authority(url)
    return f"{url[:start]}{REDACTED}@{url[start:]}"


def _authority(url: str) -> tuple[int, int]:
    """Where the authority (``user:pw@host:port``) of ``url`` starts and ends (empty if none)."""
    slashes = url.find("//")
    if slashes < 0:
        return 0, 0
    start = slashes + 2
    ends = [i for i in (url.find(c, start) for c in "/?#") if i >= 0]
    return start, min(ends, default=len(url))
