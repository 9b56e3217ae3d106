"""Shared pieces of the benchmarks: temp data dirs, clean environments, timing, result rows.

Every figure is a ratio against a floor measured in the same run on the same machine:
absolute times on a shared 2-core machine are noise, ratios mostly survive it. Floor and
measurement are interleaved rep by rep and compared by their medians.

Only stable entry points are used: the console scripts as processes, ``watcher.cli:main``,
and the modules ``watcher.config``, ``watcher.models``, ``watcher.pipeline``, ``watcher.store``,
``watcher.providers``, ``watcher.source``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from watcher.config import Settings
from watcher.models import Prompt, Usage, Verdict
from watcher.pipeline import Hooks, Run, new_run_id, open_store
from watcher.providers.base import CallResult, ProbeResult

BIN = Path(sys.executable).parent
VERDICT = Verdict(
    needs_reply=True,
    category="question",
    priority="normal",
    summary="Asks how to configure the thing.",
    reply_hint="Point to the docs.",
)
TEXT = (
    "Thanks for the write-up! I tried the second example on Windows and the watcher never picks "
    "up new files; is there a flag for polling, or do I need WSL for this?"
)


@dataclass
class Row:
    """One printed figure: what was measured, against which floor, the target, OK or MISS."""

    figure: str
    title: str
    measured: str
    floor: str
    ratio: float | None
    target: str
    ok: bool
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        ratio = f"{self.ratio:.2f}×" if self.ratio is not None else "-"
        lines = [
            f"[{self.figure}] {self.title}",
            (
                f"      measured {self.measured} · floor {self.floor} · ratio {ratio} "
                f"· target {self.target} · {'OK' if self.ok else 'MISS'}"
            ),
        ]
        lines += [f"      - {note}" for note in self.notes]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


# ---- places and environments ------------------------------------------------------------------


@contextmanager
def temp_dir(base: Path | None, label: str) -> Iterator[Path]:
    """A fresh directory under ``base`` (default: the system temp dir), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=f"watcher-bench-{label}-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a bench process: no WATCHER_*/DEVTO_* setting and no provider key of
    the caller's, the data dir set to ``data_dir``, and ``extra`` on top."""
    keys = ("WATCHER_", "DEVTO_", "OPENAI_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(keys)}
    env.pop("PYTHONPATH", None)
    env["WATCHER_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def settings(root: Path, **values: Any) -> Settings:
    """Settings for an in-process bench data dir: nothing read from the environment."""
    return Settings(data_dir=root, **values)


def run_of(s: Settings, command: Any, *, limit: int, hooks: Hooks, parallel: int = 1) -> Run:
    """A pipeline :class:`Run` as the command layer builds one, with any ``limit``: the 20-call
    cap of ``--limit`` is a policy of the command layer, not a cost, and a batch of 200 calls
    separates the per-call cost from the once-per-run cost."""
    return Run(
        settings=s,
        store=open_store(s.paths, hooks),
        command=command,
        entrypoint="cli",
        run_id=new_run_id(),
        limit=limit,
        hooks=hooks,
        parallel=parallel,
    )


def process(argv: list[str], env: dict[str, str]) -> None:
    """Run a console script to its end; raise with its stderr if it fails."""
    done = subprocess.run(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}"
        )


# ---- data ---------------------------------------------------------------------------------------


def cid(i: int) -> str:
    """A valid Forem-like id_code for comment number ``i``."""
    return f"b{i:07x}"


def forem_node(i: int, *, created_at: str | None = None) -> dict[str, Any]:
    """One comment as ``GET /comments?a_id=`` returns it (no replies), tagged for the fake
    provider."""
    when = created_at or f"2026-05-14T09:{(i // 60) % 60:02d}:{i % 60:02d}Z"
    return {
        "type_of": "comment",
        "id_code": cid(i),
        "created_at": when,
        "body_html": f"<p>TAG:{cid(i)} {TEXT}</p>",
        "user": {"username": "priyan", "name": "Priyan"},
        "children": [],
    }


def forem_article(article_id: int, comments_count: int) -> dict[str, Any]:
    """One article as ``GET /articles?username=`` lists it."""
    return {
        "type_of": "article",
        "id": article_id,
        "title": f"Article {article_id}",
        "url": f"https://dev.to/me/article-{article_id}",
        "comments_count": comments_count,
        "user": {"username": "me", "name": "Me"},
    }


def write_export(path: Path, n: int, *, first: int = 0) -> Path:
    """A Forem-format export of ``n`` comments created in the last minutes (inside any backlog
    window, so a first scan sends every one of them to the model)."""
    now = datetime.now(UTC)
    nodes = [
        forem_node(i, created_at=(now - timedelta(seconds=n - k)).strftime("%Y-%m-%dT%H:%M:%SZ"))
        for k, i in enumerate(range(first, first + n))
    ]
    doc = {"username": "me", "articles": [{**forem_article(1, n), "comments": nodes}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


class InstantProvider:
    """Answers every prompt at once (a verdict, or with ``error`` a malformed answer): isolates
    watcher's own cost per call from the model's."""

    name = "bench"
    model = "instant"

    def __init__(self, *, malformed: bool = False) -> None:
        self.malformed = malformed

    def complete(self, prompt: Prompt) -> CallResult:
        usage = Usage(input_tokens=300, output_tokens=40)
        if self.malformed:
            from watcher.models import AttemptError

            error = AttemptError(
                kind="malformed_json", message="the model answered text that is not JSON"
            )
            return CallResult(error=error, raw="Sure! needs a reply.", usage=usage, duration_ms=0)
        raw = json.dumps(VERDICT.model_dump())
        return CallResult(verdict=VERDICT, raw=raw, usage=usage, duration_ms=0)

    def probe(self) -> ProbeResult:
        return ProbeResult(ok=True, message="instant")

    def close(self) -> None:
        pass


def instant_hooks(*, malformed: bool = False, **hooks: Any) -> Hooks:
    return Hooks(make_provider=lambda _s: InstantProvider(malformed=malformed), **hooks)


# ---- timing -------------------------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median(values: list[float]) -> float:
    return statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"
