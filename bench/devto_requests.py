"""Figure 2: dev.to requests per steady-state scan, against the minimum and the naive count.

A simulated account of 300 articles (one comment each) behind ``httpx.MockTransport``: no
socket at all, every request counted. The product path is unchanged except that the scan's
source is the real ``watcher.source.fetch_devto`` given the transport and a no-op ``sleep``,
registered in the source registry for the figure (the 3-per-second pacing is a politeness
wait, not work; it is covered by the source tests with a fake clock).

1. first scan: every article is new, so every article with comments is fetched;
2. 5 articles get a new comment (their ``comments_count`` changes): the steady-state scan;
3. nothing changed: listing pages only.

The listing has no total count, so the client learns the end from a short (here: empty) page:
300 articles at 100 per page are 4 listing requests. Minimum = pages + changed articles.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Row, bench_source, context, forem_article, forem_node, settings, temp_dir

from watcher import commands

ARTICLES = 300
CHANGED = (17, 42, 123, 250, 299)
PER_PAGE = 100


class FakeForemAPI:
    """Articles with one comment each; ``bump`` adds a comment to an article."""

    def __init__(self, articles: int) -> None:
        self.threads: dict[int, list[dict[str, Any]]] = {a: [forem_node(a * 10)] for a in range(1, articles + 1)}
        self.requests: Counter[str] = Counter()

    def bump(self, article_id: int) -> None:
        thread = self.threads[article_id]
        thread.append(forem_node(article_id * 10 + len(thread)))

    def handle(self, request: Any) -> Any:
        import httpx

        path = request.url.path
        self.requests[path] += 1
        if path == "/api/articles":
            page = int(request.url.params["page"])
            per_page = int(request.url.params["per_page"])
            ids = sorted(self.threads)[(page - 1) * per_page: page * per_page]
            return httpx.Response(200, json=[forem_article(a, len(self.threads[a])) for a in ids])
        if path == "/api/comments":
            return httpx.Response(200, json=self.threads[int(request.url.params["a_id"])])
        return httpx.Response(404, json={"error": "not found"})


def _scan(root: Path, api: FakeForemAPI) -> tuple[int, dict[str, Any]]:
    import httpx

    s = settings(root, devto_username="me", devto_base_url="http://devto.bench.invalid/api")
    before = sum(api.requests.values())
    with bench_source(httpx.MockTransport(api.handle)) as devto:
        doc, error = commands.scan(context(s), limit=1, source=devto)
    if error is not None:
        raise RuntimeError(f"scan failed: {error}")
    return sum(api.requests.values()) - before, doc


def run(base: Path | None, *, quick: bool) -> list[Row]:
    import math

    pages = math.ceil((ARTICLES + 1) / PER_PAGE)  # the last page must come back short
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
    notes = [(f"first scan (all {ARTICLES} articles new): {first} requests ({pages} pages + {ARTICLES} threads), "
             f"discovered {first_doc['discovered']} comments"),
             (f"steady-state scan: {steady} requests = {pages} listing pages + {steady - pages} comment threads; "
             f"discovered {steady_doc['discovered']} new comments; naive (1 + {ARTICLES}) would be {naive}"),
             f"scan with nothing changed: {idle} requests (listing pages only); seen.json knows {known} articles",
             "the source is fetch_devto over httpx.MockTransport with a no-op sleep; everything else is the product scan"]
    return [Row("2", f"steady-state scan, {ARTICLES} articles, {len(CHANGED)} with new comments",
                f"{steady} requests", f"{minimum} (= {pages} pages + {len(CHANGED)})", steady / minimum,
                f"exactly pages + {len(CHANGED)} (vs naive {naive})", steady == minimum and idle == pages, notes)]
