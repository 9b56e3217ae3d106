"""The dev.to (Forem) source: list the articles, re-fetch the threads whose signal moved
(SPEC §13.3).

Change signal per article: ``comments_count`` **and** ``last_comment_at``. The count alone misses
comments: it is a counter-culture column, so a new comment and a childless deletion between two
scans cancel out, while Forem touches ``last_comment_at`` on every comment create, edit and
delete. ``/articles/me/published`` (with DEVTO_API_KEY) does not send ``last_comment_at``, so the
public listing is read too; where a Forem sends none, the count is the signal.

A failure while listing raises (nothing fetched, nothing to keep). A failure while fetching
threads stops the fetch but keeps what it got: :attr:`FetchResult.interrupted` says why, and the
articles not fetched keep their old signal, so the next scan fetches them. The source never
writes a file.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable
from watcher.models import SeenFile
from watcher.providers.classify import retry_after_seconds
from watcher.source._forem import ForemClient
from watcher.source._parse import Collector, api_site, parse_article
from watcher.source._types import FetchResult, Rejection, SourceArticle
from watcher.util.urls import shown_url

if TYPE_CHECKING:
    import httpx

__all__ = ["check_user", "fetch_devto", "retry_after_seconds"]

# Forem's own maximum. Pages are read until an *empty* one: an instance may cap a page below
# what was asked, so a short page is not the end.
PER_PAGE = 1000
# A server that ignores `page` would otherwise be paged forever.
MAX_PAGES = 1000

Listed = list[tuple[SourceArticle, str | None]]


def fetch_devto(
    settings: Settings,
    seen: SeenFile,
    *,
    full: bool = False,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    per_page: int = PER_PAGE,
) -> FetchResult:
    """List the author's articles and fetch the threads whose change signal moved (all of them
    with ``full``).

    Raises :class:`ConfigError` (no account configured, no such user, API key refused) and
    :class:`SourceUnavailable` (the listing failed: network, 5xx, 403, 429 past the wait budget,
    unusable body). A failure after the listing is returned as ``interrupted`` instead; bad
    comment payloads are rejections.
    """
    if not settings.devto_username and settings.devto_api_key is None:
        raise ConfigError(
            "no dev.to account configured: set DEVTO_USERNAME (or DEVTO_API_KEY), "
            "or use --source FILE to read a Forem-format export"
        )
    collector = Collector(
        include_own=settings.include_own_comments, site=api_site(settings.devto_base_url)
    )
    with ForemClient(settings, transport=transport, clock=clock, sleep=sleep) as client:
        listed = _list_articles(client, settings, collector, per_page=per_page)
        collector.articles.extend(article for article, _ in listed)
        due = [(a, author) for a, author in listed if full or _changed(a, seen)]
        for done, (article, author) in enumerate(due):
            if article.comments_count == 0:
                collector.fetched.add(
                    article.id
                )  # nothing to fetch: its comment list is known empty
                continue
            if collector.interrupted is not None:
                continue
            try:
                _fetch_thread(client, article, author or settings.devto_username, collector)
            except SourceUnavailable as exc:
                collector.interrupted = _interrupted(exc, done=done, due=len(due))
    return collector.result()


def check_user(
    settings: Settings,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Make sure DEVTO_USERNAME names a dev.to user (``GET /users/by_username?url=NAME``).

    Raises :class:`ConfigError` "no dev.to user NAME" on a 404 (a typo would otherwise find
    nothing, forever, with exit 0) and :class:`SourceUnavailable` when dev.to cannot answer.
    """
    name = settings.devto_username
    if not name:
        raise ConfigError(
            "DEVTO_USERNAME is not set: set it to the dev.to account whose articles to watch"
        )
    with ForemClient(settings, transport=transport, clock=clock, sleep=sleep) as client:
        _check_user(client, settings, name)


def check_key(
    settings: Settings,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Make sure dev.to accepts DEVTO_API_KEY (``GET /users/me``); return whose key it is.

    Raises :class:`ConfigError` on a 401 (a key pasted into the wrong variable, or revoked) and
    :class:`SourceUnavailable` when dev.to cannot answer; ``None`` when the instance has no
    ``/users/me`` (a 404: other Forem versions), so the key could not be checked."""
    if settings.devto_api_key is None:
        raise ConfigError("DEVTO_API_KEY is not set")
    with ForemClient(settings, transport=transport, clock=clock, sleep=sleep) as client:
        response = client.get("/users/me", {})
    if response.status_code == 404:
        return None
    try:
        data = response.json()
    except ValueError:
        data = None
    name = data.get("username") if isinstance(data, dict) else None
    return name if isinstance(name, str) else ""


def _check_user(client: ForemClient, settings: Settings, name: str) -> None:
    if client.get("/users/by_username", {"url": name}).status_code == 404:
        base = shown_url(settings.devto_base_url)
        if not settings.devto_base_url.rstrip("/").endswith("/api"):
            # https://dev.to answers 404 for every /users/… path: the base, not the name, is wrong.
            raise ConfigError(
                f"{base} has no /users/by_username (HTTP 404) — check DEVTO_BASE_URL: a Forem API "
                "base ends in /api (https://dev.to/api)"
            )
        raise ConfigError(f"no dev.to user {name} at {base} — check DEVTO_USERNAME")


def _changed(article: SourceArticle, seen: SeenFile) -> bool:
    """Whether the thread may hold something the last fetch did not see."""
    known = seen.articles.get(str(article.id))
    if known is None or known.comments_count != article.comments_count:
        return True
    # A signal recorded before last_comment_at was tracked (None) differs from a listed one: that
    # article is fetched once more, because a cancelled-out comment may already be waiting in it.
    return article.last_comment_at is not None and article.last_comment_at != known.last_comment_at


def _list_articles(
    client: ForemClient, settings: Settings, collector: Collector, *, per_page: int
) -> Listed:
    """The author's articles, each with ``last_comment_at`` where the public listing has it."""
    name = settings.devto_username or ""  # fetch_devto made sure one of the two is set
    if settings.devto_api_key is None:
        listed = _read_pages(
            client, settings, "/articles", {"username": name}, collector, per_page=per_page
        )
        if not listed:
            _check_user(
                client, settings, name
            )  # nothing listed: a typo must not look like "nothing new"
        return listed
    mine = _read_pages(client, settings, "/articles/me/published", {}, collector, per_page=per_page)
    owner = next((author for _, author in mine if author), None)
    name = owner or name
    if not mine or not name:
        return mine
    # Rejections of the public copy of the same articles would be reported twice: dropped.
    public = _read_pages(
        client,
        settings,
        "/articles",
        {"username": name},
        Collector(include_own=False),
        per_page=per_page,
    )
    if not public and owner is None:
        _check_user(client, settings, name)
    signal = {article.id: article.last_comment_at for article, _ in public}
    return [
        (dataclasses.replace(a, last_comment_at=signal.get(a.id)), author) for a, author in mine
    ]


def _read_pages(
    client: ForemClient,
    settings: Settings,
    path: str,
    query: dict[str, Any],
    collector: Collector,
    *,
    per_page: int,
) -> Listed:
    listed: dict[int, tuple[SourceArticle, str | None]] = {}
    for page in range(1, MAX_PAGES + 1):
        response = client.get(path, {**query, "page": page, "per_page": per_page})
        if response.status_code == 404:
            raise ConfigError(
                f"dev.to has no {path} at {shown_url(settings.devto_base_url)} (HTTP 404): "
                "check DEVTO_BASE_URL"
            )
        items = _json_list(response, what=f"GET {path} page {page}")
        if not items:
            break
        repeats = 0
        for i, raw in enumerate(items):
            parsed = parse_article(raw, where=f"article #{i + 1} of page {page}")
            if isinstance(parsed, Rejection):
                collector.rejected.append(parsed)
            elif parsed[0].id in listed:
                # A new article published mid-listing shifts the pages: the repeat is the same one.
                repeats += 1
            else:
                listed[parsed[0].id] = parsed
        if repeats == len(items):
            break  # a page of nothing but repeats: this server ignores `page`
    return list(listed.values())


def _json_list(response: httpx.Response, *, what: str) -> list[Any]:
    try:
        data = response.json()
    except (ValueError, RecursionError):  # "[[[[…" exhausts the decoder's recursion limit
        data = None
    if not isinstance(data, list):
        raise SourceUnavailable(
            f"dev.to returned a body that is not a JSON list for {what} "
            f"(HTTP {response.status_code}); nothing was changed — try again later"
        )
    return data


def _fetch_thread(
    client: ForemClient, article: SourceArticle, author: str | None, collector: Collector
) -> None:
    where = f"article {article.id}"
    response = client.get("/comments", {"a_id": article.id})
    if response.status_code == 404:
        collector.rejected.append(
            Rejection(f"{where}: dev.to has no comments for it (HTTP 404; deleted?)", where)
        )
        return
    try:
        nodes = response.json()
    except (ValueError, RecursionError) as exc:
        collector.rejected.append(
            Rejection(
                f"{where}: dev.to returned invalid JSON for its comments ({exc}); "
                "skipped this scan",
                where,
            )
        )
        return
    if collector.add_thread(nodes, article=article, author=author):
        collector.fetched.add(article.id)


def _interrupted(exc: SourceUnavailable, *, done: int, due: int) -> SourceUnavailable:
    stopped = SourceUnavailable(
        f"{exc} (stopped after {done} of {due} changed articles; the fetched ones are processed, "
        "the rest are fetched by the next scan)"
    )
    stopped.__cause__ = exc
    return stopped
