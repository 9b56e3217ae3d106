"""Where comments come from (SPEC §5): the dev.to (Forem) API, or a Forem-format export file.

    resolve_source(spec) -> Source                               registry: devto, sample, FILE
    Source.fetch(settings, seen, *, full=False) -> FetchResult   what the pipeline calls
    fetch_devto(settings, seen, *, full=, transport=, clock=, sleep=)
                                                                 network, read-only
    check_user(settings) -> None                                 DEVTO_USERNAME exists?
    check_key(settings) -> str | None                            DEVTO_API_KEY accepted? whose?
    read_export(path, settings) -> FetchResult                   one JSON file
    bundled_sample() -> Path                                     the demo export
    html_to_text(body_html) -> str                               stdlib HTML -> text

Neither source writes a file. Bad items come back as :class:`Rejection` records beside the good
ones; only whole-source failures raise (``SourceUnavailable``, ``ConfigError``, ``UsageError``).
A dev.to fetch that fails after its listing returns what it got, with ``interrupted`` set.
"""

from __future__ import annotations

from watcher.source._devto import check_key, check_user, fetch_devto
from watcher.source._export import bundled_sample, read_export
from watcher.source._html import html_to_text
from watcher.source._registry import SOURCES, DevtoSource, ExportSource, Source, resolve_source
from watcher.source._types import FetchResult, Rejection, SourceArticle

__all__ = [
    "SOURCES",
    "DevtoSource",
    "ExportSource",
    "FetchResult",
    "Rejection",
    "Source",
    "SourceArticle",
    "bundled_sample",
    "check_key",
    "check_user",
    "fetch_devto",
    "html_to_text",
    "read_export",
    "resolve_source",
]
