"""dev.to requests per steady-state scan: each is ~1/3 s of a scan a person or cron waits for.

A simulated account of 300 articles (one comment each) behind ``httpx.MockTransport``: no
socket, every request counted. The scan is the product's ``pipeline.scan`` with its source
injected through ``Hooks.make_source``: the real ``fetch_devto`` over that transport and a no-op
``sleep`` (the 3-per-second pacing is a politeness wait, not work).

1. first scan: every article is new, so every article with comments is fetched;
2. 5 articles get a new comment: the steady-state scan, the figure;
3. nothing changed: listing pages only.

The listing has no total and a Forem may cap a page below the ``per_page`` asked, so the client
reads until an empty page: 300 articles are 1 listing page + 1 empty page.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import Row, forem_article, forem_node, instant_hooks, run_of, settings, temp_dir

from watcher import pipeline
from watcher.config import Settings
from watcher.models import SeenFile
from watcher.source import FetchResult, fetch_devto

ARTICLES = 300
CHANGED = (17, 42, 123, 250, 299)
PAGE_CAP = 1000  # Forem's own per_page maximum


class FakeForemAPI:
    """Articles with one comment each; ``bump`` adds a comment and touches ``last_comment_at``."""

    def __init__(self, articles: int) -> None:
        self.threads = {a: [forem_node(a * 10)] for a in range(1, articles + 1)}
        self.touched = dict.fromkeys(self.threads, 0)  # minutes after a fixed start
        self.requests: Counter[str] = Counter()

    def bump(self, article_id: int) -> None:
        thread = self.threads[article_id]
        thread.append(forem_node(article_id * 10 + len(thread)))
        self.touched[article_id] += 1

    def handle(self, request: Any) -> Any:
        import httpx

        path = request.url.path
        self.requests[path] += 1
        if path == "/api/articles":
            page = int(request.url.params["page"])
            per_page = min(int(request.url.params["per_page"]), PAGE_CAP)
            ids = sorted(self.threads)[(page - 1) * per_page : page * per_page]
            return httpx.Response(200, json=[self._article(a) for a in ids])
        if path == "/api/comments":
            return httpx.Response(200, json=self.threads[int(request.url.params["a_id"])])
        return httpx.Response(404, json={"error": "not found"})

    def _article(self, article_id: int) -> dict[str, Any]:
        t = self.touched[article_id]
        stamp = f"2026-05-20T{t // 60:02d}:{t % 60:02d}:00Z"
        return {
            **forem_article(article_id, len(self.threads[article_id])),
            "last_comment_at": stamp,
        }


@dataclass(frozen=True)
class MockDevto:
    """The real dev.to source over a given transport, with no pacing sleep."""

    transport: Any
    name: str = "devto"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return fetch_devto(
            settings, index, full=full, transport=self.transport, sleep=lambda _s: None
        )


def _scan(root: Path, api: FakeForemAPI) -> tuple[int, Any]:
    """One scan (limit 1: the requests are the figure, not the calls); its request count."""
    import httpx

    source = MockDevto(httpx.MockTransport(api.handle))
    s = settings(root, devto_username="me", devto_base_url="http://devto.bench.invalid/api")
    before = sum(api.requests.values())
    hooks = instant_hooks(make_source=lambda _name: source)
    doc, error = pipeline.scan(run_of(s, "scan", limit=1, hooks=hooks), source="devto")
    if error is not None:
        raise RuntimeError(f"scan failed: {error}")
    return sum(api.requests.values()) - before, doc


def run(base: Path | None, *, quick: bool) -> list[Row]:
    pages = math.ceil(ARTICLES / PAGE_CAP) + 1  # the listing ends at an empty page
    with temp_dir(base, "devto") as root:
        api = FakeForemAPI(ARTICLES)
        first, first_doc = _scan(root, api)
        for article_id in CHANGED:
            api.bump(article_id)
        steady, steady_doc = _scan(root, api)
        idle, _ = _scan(root, api)
        known = len(json.loads((root / "seen.json").read_text())["articles"])
    minimum = pages + len(CHANGED)
    naive = 1 + ARTICLES
    notes = [
        (
            f"first scan (all {ARTICLES} articles new): {first} requests, discovered "
            f"{first_doc.discovered} comments"
        ),
        (
            f"steady-state scan discovered {steady_doc.discovered} new comments; naive "
            f"(1 + {ARTICLES}) would be {naive} requests"
        ),
        (
            f"scan with nothing changed: {idle} requests (listing pages only); seen.json knows "
            f"{known} articles"
        ),
    ]
    return [
        Row(
            "devto",
            f"steady-state scan, {ARTICLES} articles, {len(CHANGED)} with new comments",
            f"{steady} requests",
            f"{minimum} (= {pages} listing pages + {len(CHANGED)} threads)",
            steady / minimum,
            "exactly 1.00×; nothing changed: listing pages only",
            steady == minimum and idle == pages,
            notes,
        )
    ]
