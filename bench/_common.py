"""Shared pieces of the benchmarks: temp data dirs, fast setup writers, timing, result rows.

Every figure is a *ratio* against a floor measured in the same run on the same disk: absolute
times on a shared 2-core machine are noise, ratios survive it. Floor and measurement are
interleaved rep by rep and compared by their medians, so a burst of noise hits both.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from watcher.commands.core import Context
from watcher.config import Settings
from watcher.models import Comment, InboxRecord, Prompt, SeenFile, Verdict
from watcher.pipeline import Hooks, Run, new_run_id, open_store
from watcher.source import SOURCES, FetchResult, fetch_devto
from watcher.store import durable

T0 = "2026-05-14T09:00:00.000000Z"
VERDICT = Verdict(needs_reply=True, category="question", priority="normal",
                  summary="Asks how to configure the thing.", reply_hint="Point to the docs.")
COMMENT_TEXT = ("Thanks for the write-up! I tried the second example on Windows and the watcher "
                "never picks up new files; is there a flag for polling, or do I need WSL for this? "
                "Also, the link to the config reference in the last section seems to be broken.")


@dataclass
class Row:
    """One printed figure: what was measured, against which floor, and the target."""

    figure: str
    title: str
    measured: str
    floor: str
    ratio: float | None
    target: str
    ok: bool
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        verdict = "PASS" if self.ok else "MISS"
        ratio = f"{self.ratio:.2f}×" if self.ratio is not None else "-"
        lines = [f"[{self.figure}] {self.title}",
                 (f"      measured {self.measured} · floor {self.floor} · ratio {ratio} · target {self.target}"
                 f" · {verdict}")]
        lines += [f"      - {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


# ---- places -------------------------------------------------------------------------------------


@contextmanager
def temp_dir(base: Path | None, label: str) -> Iterator[Path]:
    """A fresh directory under ``base`` (default: the system temp dir), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"watcher-bench-{label}-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def settings(root: Path, **values: Any) -> Settings:
    """Settings for a bench data dir: offline unless told otherwise, nothing from the environment."""
    return Settings(data_dir=root, **values)


def context(s: Settings, *, entrypoint: str = "cli", hooks: Hooks | None = None) -> Context:
    ctx = Context(entrypoint=entrypoint, data_dir=s.data_dir, hooks=hooks or Hooks())
    ctx._settings = s  # the bench never reads the caller's WATCHER_* environment
    return ctx


def run_of(s: Settings, command: Any, *, limit: int, hooks: Hooks, parallel: int = 1) -> Run:
    """A pipeline :class:`Run` as ``commands`` builds one, but with any ``limit``.

    The 20-call cap of ``--limit`` is a policy of the command layer (``check_limit``), not a
    cost: the pipeline takes a Run of 200 calls as it is, so the bench needs no patching to
    measure one batch of 200.
    """

    # ``parallel`` only where the pipeline has it (SPEC §15.1): bench/ab.py runs this bench against
    # older trees too.
    extra = {"parallel": parallel} if "parallel" in {f.name for f in fields(Run)} else {}
    return Run(settings=s, store=open_store(s.paths, hooks), command=command, entrypoint="cli",
               run_id=new_run_id(), limit=limit, hooks=hooks, **extra)


@dataclass(frozen=True)
class BenchDevto:
    """The real dev.to source (``fetch_devto``) over a given transport with no pacing sleep.

    Registered in :data:`watcher.source.SOURCES` for the duration of a figure (see
    :func:`bench_source`), so ``scan --source bench-devto`` goes through the product's own
    source registry: nothing is patched.
    """

    transport: Any
    name: str = "bench-devto"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return fetch_devto(settings, index, full=full, transport=self.transport, sleep=lambda _s: None)


@contextmanager
def bench_source(transport: Any) -> Iterator[str]:
    """Register :class:`BenchDevto` over ``transport``; yields the name to pass as ``source=``."""
    source = BenchDevto(transport)
    SOURCES[source.name] = lambda: source
    try:
        yield source.name
    finally:
        del SOURCES[source.name]


@contextmanager
def patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# ---- data -------------------------------------------------------------------------------------------


def cid(i: int) -> str:
    """A valid Forem-like id_code for comment number ``i``."""
    return f"b{i:07x}"


def comment(i: int, *, article_id: int = 1, text: str = COMMENT_TEXT) -> Comment:
    c = cid(i)
    return Comment(id=c, article_id=article_id, article_title="Watching files on every platform",
                   article_url=f"https://dev.to/me/article-{article_id}", author="priyan",
                   created_at=f"2026-05-14T09:{(i // 60) % 60:02d}:{i % 60:02d}Z", text=text,
                   url=f"https://dev.to/priyan/comment/{c}")


def prompt_for(c: Comment) -> Prompt:
    from watcher.providers import prompts

    return prompts.render(c)


def write_plain(path: Path, payload: bytes) -> None:
    """Setup only: no fsync. What is measured always goes through watcher's own writes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(payload)


def record_bytes(record: InboxRecord) -> bytes:
    """The bytes watcher itself would write for ``record`` (same encoder as durable.write_json)."""
    return (json.dumps(record.model_dump(mode="json"), ensure_ascii=False, indent=1) + "\n").encode()


# ---- timing -----------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


class WriteCounter:
    """Counts durable writes (by file) and fsyncs while active, by wrapping the one write function.

    ``durable.write_json`` and every caller reach ``durable.write_bytes`` through the module
    global, so one wrapper sees them all; the wrapper costs about a microsecond per write.
    """

    def __init__(self) -> None:
        self.writes: Counter[str] = Counter()
        self.fsyncs = 0

    @contextmanager
    def active(self) -> Iterator[WriteCounter]:
        real_write, real_fsync = durable.write_bytes, os.fsync

        def write_bytes(path: Path, payload: bytes, **kwargs: Any) -> None:
            self.writes[_label(path)] += 1
            real_write(path, payload, **kwargs)

        def fsync(fd: int) -> None:
            self.fsyncs += 1
            real_fsync(fd)

        with patched(durable, "write_bytes", write_bytes), patched(os, "fsync", fsync):
            yield self


def _label(path: Path) -> str:
    if path.parent.name == "inbox":
        return "inbox/*.json"
    if path.parent.name == "signals":
        return f"signals/{path.name}"
    return path.name


def forem_node(i: int, *, author: str = "priyan") -> dict[str, Any]:
    """One comment as ``GET /comments?a_id=`` returns it (no replies)."""
    return {"type_of": "comment", "id_code": cid(i), "created_at": f"2026-05-14T09:{(i // 60) % 60:02d}:{i % 60:02d}Z",
            "body_html": f"<p>{COMMENT_TEXT}</p>", "user": {"username": author, "name": author}, "children": []}


def forem_article(article_id: int, comments_count: int) -> dict[str, Any]:
    """One article as ``GET /articles?username=`` lists it."""
    return {"type_of": "article", "id": article_id, "title": f"Article {article_id}",
            "url": f"https://dev.to/me/article-{article_id}", "comments_count": comments_count,
            "user": {"username": "me", "name": "Me"}}
