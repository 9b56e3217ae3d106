"""Figure 3: state at scale — ``status`` and an idle ``scan`` on 10k and 50k stored comments.

Floor: what any command that trusts nothing must do at least — load ``seen.json`` through the
guarded read (parse + validate, ``FileStore.load_index``) and list ``inbox/``. Targets: ≤ 3× that
floor, and growth no worse than linear from 10k to 50k.

Setup (not measured) writes the steady state directly, fast and without fsync: every comment
done (one ok attempt and a verdict), seen.json up to date with each inbox file's stamp, 50
comments per article. The idle scan goes through the product scan with the dev.to listing
served by ``httpx.MockTransport`` (every ``comments_count`` unchanged, so no thread is fetched)
and no pacing sleep: the real ``fetch_devto`` over that transport, registered as a source.
Both commands run in-process: process start-up is figure 5.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

from _common import (
    T0,
    VERDICT,
    Row,
    bench_source,
    cid,
    comment,
    context,
    median,
    ms,
    prompt_for,
    settings,
    temp_dir,
    timed,
)

from watcher.commands import reading, runs
from watcher.state import records
from watcher.config import Settings
from watcher.models import Usage
from watcher.store import _index
from watcher.store.files import FileStore

PER_ARTICLE = 50


def _template() -> bytes:
    c = comment(0, article_id=1)
    reserved = records.reserve(records.new_record(c, prompt_for(c)), command="scan", entrypoint="cli",
                             provider="openai", model="gpt-4o-mini", pid=4242)
    done = records.finish(reserved, verdict=VERDICT, error=None, raw=json.dumps(VERDICT.model_dump()),
                        usage=Usage(input_tokens=310, output_tokens=41), duration_ms=812)
    return (json.dumps(done.model_dump(mode="json"), ensure_ascii=False, indent=1) + "\n").encode()


def generate(s: Settings, n: int) -> None:
    """n done comments on n/50 articles, and the matching up-to-date seen.json."""
    template = _template()
    old_id, old_article = cid(0).encode(), b'"article_id": 1,'
    paths = s.paths
    paths.inbox.mkdir(parents=True)
    comments: dict[str, Any] = {}
    for i in range(n):
        article = 1 + i // PER_ARTICLE
        name = cid(i)
        path = paths.inbox_file(name)
        with open(path, "wb") as fh:
            fh.write(template.replace(old_id, name.encode()).replace(old_article, b'"article_id": %d,' % article))
        st = os.stat(path)
        comments[name] = {"article_id": article, "status": "done", "attempts": 1, "triage": "open",
                          "first_seen_at": T0, "updated_at": T0,
                          "inbox_stamp": f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"}
    articles = {str(a): {"title": f"Article {a}", "comments_count": PER_ARTICLE, "checked_at": T0,
                         "url": f"https://dev.to/me/article-{a}"} for a in range(1, _articles(n) + 1)}
    doc = {"schema_version": 1, "comments": comments, "articles": articles}
    paths.seen.write_bytes((json.dumps(doc, ensure_ascii=False, indent=1) + "\n").encode())


def settle(s: Settings) -> None:
    """Wait until inbox/ is as old as an idle account's (setup only, not measured).

    An idle account's inbox/ was last written by a scan minutes or hours ago; the setup has
    just written all of it. watcher trusts a directory's times to stand for "no file changed"
    only once it is older than any clock tick that could hide a change (``_index._QUIET_NS``,
    3 s), so a scan measured right after the setup would meet a state no cron run meets."""
    st = os.stat(s.paths.inbox)
    left = (max(st.st_mtime_ns, st.st_ctime_ns) + _index._QUIET_NS) / 1e9 - time.time()
    if left > 0:
        time.sleep(left + 0.1)


def _articles(n: int) -> int:
    return math.ceil(n / PER_ARTICLE)


def _listing(n: int) -> Any:
    import httpx
    from _common import forem_article

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/api/articles":
            raise AssertionError(f"an idle scan must not fetch {request.url.path}")
        page, per_page = int(request.url.params["page"]), int(request.url.params["per_page"])
        ids = range(1, _articles(n) + 1)[(page - 1) * per_page: page * per_page]
        return httpx.Response(200, json=[forem_article(a, PER_ARTICLE) for a in ids])

    return httpx.MockTransport(handle)


def _floor(s: Settings) -> None:
    FileStore(s.paths).load_index()
    os.listdir(s.paths.inbox)


def _status(s: Settings, n: int) -> None:
    doc = reading.status(context(s))
    if doc.states["done"] != n:
        raise RuntimeError(f"status saw {doc.states}, expected {n} done")


def _scan(s: Settings, devto: str) -> None:
    doc, error = runs.scan(context(s), source=devto)
    if error is not None or doc.planned or doc.repaired:
        raise RuntimeError(f"idle scan was not idle: {error} {doc.counts} {doc.repaired[:3]}")


def measure(base: Path | None, n: int, reps: int) -> dict[str, float]:
    floors, statuses, scans = [], [], []
    with temp_dir(base, f"scale{n}") as root:
        s = settings(root, devto_username="me", devto_base_url="http://devto.bench.invalid/api")
        generate(s, n)
        settle(s)
        with bench_source(_listing(n)) as devto:
            _status(s, n)  # warm the page cache once: every rep then sees the same (cached) disk
            for _ in range(reps):
                floors.append(timed(lambda: _floor(s)))
                statuses.append(timed(lambda: _status(s, n)))
                scans.append(timed(lambda: _scan(s, devto)))
        size = (root / "seen.json").stat().st_size
    return {"floor": median(floors), "status": median(statuses), "scan": median(scans), "seen_bytes": size}


def _exponent(small: float, large: float, factor: float) -> float:
    return math.log(large / small) / math.log(factor)


def run(base: Path | None, *, quick: bool) -> list[Row]:
    sizes, reps = ((2_000, 10_000), 2) if quick else ((10_000, 50_000), 3)
    results = {n: measure(base, n, reps) for n in sizes}
    small, large = sizes
    factor = large / small
    rows = []
    for what in ("status", "scan"):
        growth = _exponent(results[small][what], results[large][what], factor)
        floor_growth = _exponent(results[small]["floor"], results[large]["floor"], factor)
        for n in sizes:
            r = results[n]
            ratio = r[what] / r["floor"]
            notes = [(f"floor = load_index (guarded read of {r['seen_bytes'] / 1e6:.1f} MB seen.json) + listdir(inbox/), "
                     f"{ms(r['floor'])}; {reps} reps, medians")]
            ok = ratio <= 3.0
            if n == large:
                notes.append(f"growth {small:,} → {large:,}: time ×{r[what] / results[small][what]:.2f} for ×{factor:.0f} "
                             f"comments, exponent {growth:.2f} (linear = 1.00; the floor's own: {floor_growth:.2f})")
                ok = ok and growth <= 1.15
            label = "status" if what == "status" else "scan with no new comments (dev.to listing only)"
            rows.append(Row(f"3{'ab'[sizes.index(n)] if what == 'status' else 'cd'[sizes.index(n)]}",
                            f"{label}, {n:,} stored comments", ms(r[what]), ms(r["floor"]), ratio,
                            "≤ 3.00×" + (", growth exponent ≤ 1.15" if n == large else ""), ok, notes))
    return rows
