"""Where comments come from (SPEC §5): the dev.to (Forem) API, or a Forem-format export file.

    fetch_devto(settings, seen, *, transport=, clock=, sleep=) -> FetchResult   network, read-only
    read_export(path, settings) -> FetchResult                                  one JSON file
    bundled_sample() -> Path                                                    the demo export
    html_to_text(body_html) -> str                                              stdlib HTML -> text

Neither source writes a file. Bad items come back as :class:`Rejection` records beside the good
ones; only whole-source failures raise (``SourceUnavailable``, ``ConfigError``, ``UsageError``).
"""

from __future__ import annotations

from watcher.source._devto import fetch_devto
from watcher.source._export import bundled_sample, read_export
from watcher.source._html import html_to_text
from watcher.source._types import FetchResult, Rejection, SourceArticle

__all__ = [
    "FetchResult",
    "Rejection",
    "SourceArticle",
    "bundled_sample",
    "fetch_devto",
    "html_to_text",
    "read_export",
]
