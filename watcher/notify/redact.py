"""Every part of a notification URL that may be a secret, out of any text (SPEC §16.1: the URLs
are redacted like keys). Which part is secret differs per service — an ntfy topic stands where a
host would, a webhook's token is its path, a mail URL holds a password and an address — so every
part of it goes, with the redaction the API key has (:class:`watcher.providers.redact.Redaction`:
literal or JSON-escaped, at any depth)."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlsplit

from watcher.notify.targets import Target
from watcher.providers.redact import Redaction, credential_secrets

# Parts of a URL shorter than this are words ("to", "x", "443") that a redaction would cut out of
# every message; the whole URL, and each of its longer parts, are always redacted.
_MIN_PART = 4


def secret_parts(url: str) -> list[str]:
    """Every part of ``url`` that may be a secret: the URL itself and after its scheme, the
    credentials (in each form :func:`credential_secrets` knows), the host unless it is a server's
    name or address (an ntfy topic or a webhook id stands there), each path segment and each query
    value — as written and decoded."""
    found = [url, url.partition("://")[2]]
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return [p for p in found if p]
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at:
        found += credential_secrets(userinfo)
        found += [userinfo, unquote(userinfo)]
    if host and not ("." in host or ":" in host or host == "localhost"):
        found.append(host)
    for segment in parts.path.split("/"):
        found += [segment, unquote(segment)]
    for _key, value in parse_qsl(parts.query, keep_blank_values=False):
        found += [value, *value.split(",")]
    return [p for p in dict.fromkeys(found) if len(p) >= _MIN_PART]


def redaction(targets: tuple[Target, ...]) -> Redaction:
    """What takes every target's secrets out of a text (an error message, Apprise's log)."""

    return Redaction(*(part for t in targets for part in secret_parts(t.url.get_secret_value())))
