"""The one place Apprise is imported and called (SPEC §16.1): watcher speaks no service's protocol.

    send(target, title, render, click, redact) -> Sent     one message to one target, now
    validate(target) -> str | None                         why Apprise cannot use the URL, or None

Apprise is imported here, inside the functions, only when a message goes out or ``check`` asks:
it takes ~150 ms and pulls in requests, markdown and PyYAML (``tests/test_notify_imports.py``).

Each target is its own ``Apprise()`` with the one URL: ``notify()``'s answer is that target's
acceptance (HTTP 2xx, SMTP 250), and a slow target cannot make another's result unknown. The
body is rendered in the format the target renders (its ``notify_format``) and sent as that
format, so Apprise converts nothing: the escaping of :mod:`watcher.notify.message` is what the
reader sees. Apprise's log goes to a handler of ours for the duration — never to stderr, where
it would quote the URL — and its last warning, redacted, is the failure's reason.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

if TYPE_CHECKING:
    from watcher.notify.targets import Target
    from watcher.providers.redact import Redaction

# Services whose URL takes the link a tap opens (ntfy's X-Click, set by Apprise from ?click=).
_CLICK_SCHEMES = frozenset({"ntfy", "ntfys"})


@dataclass(frozen=True)
class Sent:
    accepted: bool
    error: str | None = None  # redacted: no part of a URL


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@contextmanager
def _apprise_log() -> Iterator[_Collect]:
    logger = logging.getLogger("apprise")
    handler = _Collect()
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # no handler of the root logger (nor logging's last resort) prints it
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _with_click(url: str, link: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}click={quote(link, safe='')}"


def _format_of(service: Any) -> str:
    """The format the target renders: its own choice among those it supports (Apprise 1.x has
    one ``notify_format``; 2.x may list several, the first being its default)."""
    resolve = getattr(service, "resolve_format", None)
    fmt = resolve(None) if callable(resolve) else service.notify_format
    if isinstance(fmt, tuple | list):
        fmt = fmt[0]
    return str(getattr(fmt, "value", fmt))


def _load(url: str) -> tuple[Any, Any]:
    import apprise

    client = apprise.Apprise()
    return client, (client[0] if client.add(url) else None)


def validate(target: Target, redact: Redaction) -> str | None:
    """Why Apprise cannot use the target's URL (redacted), or ``None``: parsed, nothing sent."""
    with _apprise_log() as log:
        _client, service = _load(target.url.get_secret_value())
    if service is not None:
        return None
    said = redact.text(log.lines[-1]) if log.lines else ""
    return "Apprise does not understand this URL" + (f" ({said})" if said else "")


def send(
    target: Target,
    title: str,
    render: Callable[[str], str],
    click: str | None,
    redact: Redaction,
) -> Sent:
    """Send one message to one target; whether it accepted, and if not why (redacted)."""
    url = target.url.get_secret_value()
    if click and target.scheme in _CLICK_SCHEMES:
        url = _with_click(url, click)
    with _apprise_log() as log:
        try:
            client, service = _load(url)
            if service is None:
                return Sent(False, "Apprise does not understand this URL")
            fmt = _format_of(service)
            ok = client.notify(
                body=render(fmt), title=title, body_format=fmt, interpret_escapes=False
            )
        except Exception as exc:  # noqa: BLE001 - a plugin's bug costs this target one attempt
            return Sent(False, redact.text(f"{type(exc).__name__}: {exc}"))
    if ok:
        return Sent(True)
    said = redact.text(log.lines[-1]) if log.lines else "not accepted"
    return Sent(False, said[:300])
