"""Figure 2: dev.to requests per steady-state scan, against the minimum and the naive count.

A simulated account of 300 articles (one comment each) behind ``httpx.MockTransport``: no
socket at all, every request counted. The product path is unchanged except that the scan's
source is the real ``watcher.source.fetch_devto`` given the transport and a no-op ``sleep``,
registered in the source registry for the figure (the 3-per-second pacing is a politeness
wait, not work; it is covered by the source tests with a fake clock).

1. first scan: every article is new, so every article with comments is fetched;
2. 5 articles get a new comment (their ``comments_count`` changes): the steady-state scan;
3. nothing changed: listing pages only;
4. the cancel-out case (SPEC §13.3): one article gets a new comment while another comment on it
   is deleted, so ``comments_count`` is unchanged; only ``last_comment_at`` (touched by Forem on
   every comment create and delete) shows it. Found: yes/no.

The listing has no total count and a Forem may cap a page below the ``per_page=1000`` asked, so
the client reads until an *empty* page: 300 articles are 1 listing page + 1 empty page.
Minimum = listing pages + 1 empty page + changed articles.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from _common import Row, bench_source, context, forem_article, forem_node, settings, temp_dir

from watcher.commands import runs
from watcher.commands.results import BatchResult

ARTICLES = 300
CHANGED = (17, 42, 123, 250, 299)
CANCEL_OUT = 77  # not among CHANGED
PAGE_CAP = 1000  # Forem's own per_page maximum


class FakeForemAPI:
    """Articles with one comment each; ``bump`` adds a comment to an article; every change to a
    thread touches the article's ``last_comment_at``, as Forem does."""

    def __init__(self, articles: int) -> None:
        self.threads: dict[int, list[dict[str, Any]]] = {a: [forem_node(a * 10)] for a in range(1, articles + 1)}
        self.touched: dict[int, int] = dict.fromkeys(self.threads, 0)  # minutes after a fixed start
        self.requests: Counter[str] = Counter()

    def bump(self, article_id: int) -> None:
        thread = self.threads[article_id]
        thread.append(forem_node(article_id * 10 + len(thread)))
        self.touched[article_id] += 1

    def cancel_out(self, article_id: int) -> None:
        """A new comment, and the (childless) oldest one deleted: the count stays as it was."""
        self.bump(article_id)
        del self.threads[article_id][0]
        self.touched[article_id] += 1

    def handle(self, request: Any) -> Any:
        import httpx

        path = request.url.path
        self.requests[path] += 1
        if path == "/api/articles":
            page = int(request.url.params["page"])
            per_page = min(int(request.url.params["per_page"]), PAGE_CAP)
            ids = sorted(self.threads)[(page - 1) * per_page: page * per_page]
            return httpx.Response(200, json=[self._article(a) for a in ids])
        if path == "/api/comments":
            return httpx.Response(200, json=self.threads[int(request.url.params["a_id"])])
        return httpx.Response(404, json={"error": "not found"})

    def _article(self, article_id: int) -> dict[str, Any]:
        stamp = f"2026-05-20T{self.touched[article_id] // 60:02d}:{self.touched[article_id] % 60:02d}:00Z"
        return {**forem_article(article_id, len(self.threads[article_id])), "last_comment_at": stamp}


def _scan(root: Path, api: FakeForemAPI) -> tuple[int, BatchResult]:
    import httpx

    s = settings(root, devto_username="me", devto_base_url="http://devto.bench.invalid/api")
    before = sum(api.requests.values())
    with bench_source(httpx.MockTransport(api.handle)) as devto:
        doc, error = runs.scan(context(s), limit=1, source=devto)
    if error is not None:
        raise RuntimeError(f"scan failed: {error}")
    return sum(api.requests.values()) - before, doc


def run(base: Path | None, *, quick: bool) -> list[Row]:
    import math

    pages = math.ceil(ARTICLES / PAGE_CAP) + 1  # the listing ends at an empty page
    with temp_dir(base, "devto") as root:
        api = FakeForemAPI(ARTICLES)
        first, first_doc = _scan(root, api)
        for article_id in CHANGED:
            api.bump(article_id)
        steady, steady_doc = _scan(root, api)
        idle, _ = _scan(root, api)
        count_before = len(api.threads[CANCEL_OUT])
        api.cancel_out(CANCEL_OUT)
        assert len(api.threads[CANCEL_OUT]) == count_before  # comments_count did not move
        cancel, cancel_doc = _scan(root, api)
        known = len(json.loads((root / "seen.json").read_text())["articles"])
    found = cancel_doc.discovered == 1
    minimum = pages + len(CHANGED)
    naive = 1 + ARTICLES
    notes = [(f"first scan (all {ARTICLES} articles new): {first} requests ({pages} listing pages incl. the "
              f"empty one + {ARTICLES} threads), discovered {first_doc.discovered} comments"),
             (f"steady-state scan: {steady} requests = {pages} listing pages (incl. the empty one) + "
              f"{steady - pages} comment threads; discovered {steady_doc.discovered} new comments; "
              f"naive (1 + {ARTICLES}) would be {naive}"),
             f"scan with nothing changed: {idle} requests (listing pages only); seen.json knows {known} articles",
             (f"cancel-out case (a new comment + a deleted one, comments_count unchanged): found: "
              f"{'yes' if found else 'no'} ({cancel} requests = {pages} pages + {cancel - pages} threads; "
              f"discovered {cancel_doc.discovered})"),
             "the source is fetch_devto over httpx.MockTransport with a no-op sleep; everything else is the product scan"]
    return [Row("2", f"steady-state scan, {ARTICLES} articles, {len(CHANGED)} with new comments",
                f"{steady} requests", f"{minimum} (= {pages} pages + {len(CHANGED)})", steady / minimum,
                f"exactly pages + {len(CHANGED)} (vs naive {naive}); cancel-out found",
                steady == minimum and idle == pages and found and cancel == pages + 1, notes)]
