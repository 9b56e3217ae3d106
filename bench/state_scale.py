"""State at scale: ``status`` and an idle ``scan`` on 10k and 50k stored comments.

A person with a few years of comments waits for these on every ``watcher status`` and every
cron run. Floor: what any command that trusts nothing must do at least: load ``seen.json``
through the store's guarded read (parse + validate, ``FileStore.load_index``) and list
``inbox/``. Targets: ≤ 3× that floor, and growth from 10k to 50k no worse than linear (or than
the floor's own growth on the same run by more than 0.15).

Setup (not measured): one comment is scanned for real (a provider that answers at once), then
its inbox file and its ``seen.json`` entry are cloned n times with their own ids and stamps:
every comment done, 50 per article, the index up to date. ``status`` runs through
``watcher.cli:main`` in this process (``--json``); the idle scan is ``pipeline.scan`` with the
dev.to listing served by ``httpx.MockTransport`` (no ``comments_count`` moved, so no thread is
fetched). Start-up is the ``startup`` figure's, not this one's.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import time
from pathlib import Path
from typing import Any

from _common import (
    Row,
    cid,
    forem_article,
    instant_hooks,
    median,
    ms,
    run_of,
    settings,
    temp_dir,
    timed,
    write_export,
)
from devto_requests import MockDevto

from watcher import pipeline
from watcher.cli import main as cli_main
from watcher.config import Settings
from watcher.store.files import FileStore

PER_ARTICLE = 50
# watcher trusts a directory's times for "no inbox file changed" only once they are older than
# any filesystem clock tick (3 s: watcher/store/_index.py); an idle account's inbox/ is older.
QUIET_S = 3.1


def generate(s: Settings, n: int) -> None:
    """n done comments on n/50 articles, cloned from one real scan's record, and their index."""
    paths = s.paths
    one = write_export(s.data_dir.parent / f"one-{n}.json", 1)
    doc, error = pipeline.scan(run_of(s, "scan", limit=1, hooks=instant_hooks()), source=str(one))
    if error is not None or doc.calls != 1:
        raise RuntimeError(f"the template scan did not make its call: {error}")
    index = json.loads(paths.seen.read_text())
    template = paths.inbox_file(cid(0)).read_bytes()
    entry = index["comments"][cid(0)]
    article = {**index["articles"]["1"], "comments_count": PER_ARTICLE}
    article.pop("last_comment_at", None)
    comments: dict[str, Any] = {}
    for i in range(n):
        article_id = 1 + i // PER_ARTICLE
        path = paths.inbox_file(cid(i))
        payload = template.replace(cid(0).encode(), cid(i).encode())
        path.write_bytes(payload.replace(b'"article_id": 1,', b'"article_id": %d,' % article_id))
        st = os.stat(path)
        stamp = f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"
        comments[cid(i)] = {**entry, "article_id": article_id, "inbox_stamp": stamp}
    articles = {str(a): {**article, "title": f"Article {a}"} for a in range(1, _articles(n) + 1)}
    paths.seen.write_text(
        json.dumps({**index, "comments": comments, "articles": articles}, indent=1)
    )
    age = time.time() - os.stat(paths.inbox).st_mtime
    if age < QUIET_S:
        time.sleep(QUIET_S - age)


def _articles(n: int) -> int:
    return math.ceil(n / PER_ARTICLE)


def _listing(n: int) -> Any:
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/api/articles":
            raise AssertionError(f"an idle scan must not fetch {request.url.path}")
        page, per_page = int(request.url.params["page"]), int(request.url.params["per_page"])
        ids = range(1, _articles(n) + 1)[(page - 1) * per_page : page * per_page]
        return httpx.Response(200, json=[forem_article(a, PER_ARTICLE) for a in ids])

    return MockDevto(httpx.MockTransport(handle))


def _floor(s: Settings) -> None:
    FileStore(s.paths).load_index()
    os.listdir(s.paths.inbox)


def _status(s: Settings, n: int) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli_main(["status", "--json", "--data-dir", str(s.data_dir)])
    states = json.loads(out.getvalue())["result"]["states"]
    if states.get("done") != n:
        raise RuntimeError(f"status saw {states}, expected {n} done")


def _scan(s: Settings, source: Any) -> None:
    hooks = instant_hooks(make_source=lambda _name: source)
    doc, error = pipeline.scan(run_of(s, "scan", limit=5, hooks=hooks), source="devto")
    if error is not None or doc.calls or doc.repaired:
        raise RuntimeError(f"idle scan was not idle: {error} {doc.counts} {doc.repaired[:3]}")


def measure(base: Path | None, n: int, reps: int) -> dict[str, float]:
    floors, statuses, scans = [], [], []
    with temp_dir(base, f"scale{n}") as root:
        s = settings(root, devto_username="me", devto_base_url="http://devto.bench.invalid/api")
        generate(s, n)
        source = _listing(n)
        _status(s, n)  # warm the page cache once: every rep then sees the same (cached) disk
        for _ in range(reps):
            floors.append(timed(lambda: _floor(s)))
            statuses.append(timed(lambda: _status(s, n)))
            scans.append(timed(lambda: _scan(s, source)))
        size = s.paths.seen.stat().st_size
    return {
        "floor": median(floors),
        "status": median(statuses),
        "scan": median(scans),
        "seen": size,
    }


def _exponent(small: float, large: float, factor: float) -> float:
    return math.log(large / small) / math.log(factor)


def run(base: Path | None, *, quick: bool) -> list[Row]:
    sizes, reps = ((2_000, 10_000), 2) if quick else ((10_000, 50_000), 3)
    results = {n: measure(base, n, reps) for n in sizes}
    small, large = sizes
    factor = large / small
    rows = []
    for what, label in (
        ("status", "`watcher status --json`"),
        ("scan", "idle scan (dev.to listing only)"),
    ):
        for n in sizes:
            r = results[n]
            ratio = r[what] / r["floor"]
            notes = [
                (
                    f"floor: load_index of a {r['seen'] / 1e6:.1f} MB seen.json + listdir(inbox/); "
                    f"{reps} reps, medians"
                )
            ]
            ok, target = ratio <= 3.0, "≤ 3.00×"
            if n == large:
                growth = _exponent(results[small][what], r[what], factor)
                floor_growth = _exponent(results[small]["floor"], r["floor"], factor)
                notes.append(
                    f"growth {small:,} → {large:,}: exponent {growth:.2f} (linear 1.00; the "
                    f"floor's own {floor_growth:.2f})"
                )
                # Linear, or no worse than the floor's own growth on this machine (page cache,
                # the collector) by more than 0.15.
                limit = max(1.15, floor_growth + 0.15)
                ok, target = ok and growth <= limit, target + f", growth exponent ≤ {limit:.2f}"
            rows.append(
                Row(
                    f"scale.{what}.{n // 1000}k",
                    f"{label}, {n:,} stored comments",
                    ms(r[what]),
                    ms(r["floor"]),
                    ratio,
                    target,
                    ok,
                    notes,
                )
            )
    return rows
