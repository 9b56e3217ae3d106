"""Where a scan gets its comments: one registry of sources (STYLE rule 11).

A source is anything with a ``name`` and ``fetch(settings, index, *, full=False) -> FetchResult``;
the pipeline knows only this protocol (``full``: re-read everything on purpose, ``scan --full``).
``--source`` names a registered source (``devto``, ``sample``) or is the path of a Forem-format
export. A second kind of source (Hashnode, GitHub discussions) is one
more entry here, with ids namespaced as the README's "Comment ids and a second source" says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from watcher.config import Settings
from watcher.models import SeenFile
from watcher.source._devto import fetch_devto
from watcher.source._export import bundled_sample, read_export
from watcher.source._types import FetchResult


class Source(Protocol):
    """Reads comments; never writes a file. Bad items come back as rejections; only whole-source
    failures raise (``SourceUnavailable`` exit 3, ``ConfigError``/``UsageError`` exit 2)."""

    @property
    def name(self) -> str: ...

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult: ...


@dataclass(frozen=True)
class DevtoSource:
    """The dev.to (Forem) API: only articles whose change signal moved are re-fetched (all with
    ``full``); a failure midway comes back as ``FetchResult.interrupted`` with what was fetched."""

    name: str = "devto"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return fetch_devto(settings, index, full=full)


@dataclass(frozen=True)
class ExportSource:
    """A Forem-format export file; every article in it counts as fetched (so ``full`` changes
    nothing)."""

    path: Path
    name: str = "export"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return read_export(self.path, settings)


def _sample() -> Source:
    return ExportSource(bundled_sample(), name="sample")


SOURCES: dict[str, Callable[[], Source]] = {"devto": DevtoSource, "sample": _sample}


def resolve_source(spec: str) -> Source:
    """The registered source ``spec`` names, else an export file at path ``spec``."""
    factory = SOURCES.get(spec)
    return factory() if factory is not None else ExportSource(Path(spec))
