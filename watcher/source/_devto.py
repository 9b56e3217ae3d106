"""The dev.to (Forem) API client: polite, incremental, and read-only (SPEC §5).

Politeness: every request carries ``Accept: application/vnd.forem.api-v1+json`` and a real
``User-Agent`` (dev.to answers 403 without one), request starts are paced to at most 3 per
second (dev.to's documented read limit), and a 429 is honoured once per fetch when its
``Retry-After`` is at most 10 s. Anything else that means "dev.to cannot answer now" (network
error, 5xx, a second 429, a longer wait) raises :class:`SourceUnavailable` (exit 3). The source
never writes a file, so a fetch that stops has changed nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

from watcher import __version__
from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable
from watcher.models import SeenFile
from watcher.providers.classify import retry_after_seconds
from watcher.source._parse import Collector, parse_article
from watcher.source._types import FetchResult, Rejection, SourceArticle
from watcher.timeutil import iso, utcnow

if TYPE_CHECKING:
    import httpx

ACCEPT = "application/vnd.forem.api-v1+json"
USER_AGENT = f"devto-watcher/{__version__} (+https://github.com/devto-watcher/devto-watcher)"
PER_PAGE = 100
# Slightly above 1/3 s, so that no window of one second ever holds a fourth request start.
MIN_INTERVAL_S = 0.34
MAX_RETRY_AFTER_S = 10.0
# A server that ignores `page` would otherwise be paged forever.
MAX_PAGES = 1000
TIMEOUT_S = 30.0


def fetch_devto(
    settings: Settings,
    seen: SeenFile,
    *,
    transport: httpx.BaseTransport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    per_page: int = PER_PAGE,
) -> FetchResult:
    """List the author's articles and fetch the comments of those whose count changed.

    Raises :class:`ConfigError` (no account configured, API key refused) and
    :class:`SourceUnavailable` (network error, 5xx, unusable article listing, 429 beyond the
    one short wait). Bad comment payloads are returned as rejections, not raised.
    """
    if not settings.devto_username and settings.devto_api_key is None:
        raise ConfigError(
            "no dev.to account configured: set DEVTO_USERNAME (or DEVTO_API_KEY), "
            "or use --source FILE to read a Forem-format export"
        )
    collector = Collector(include_own=settings.include_own_comments)
    with _ForemClient(settings, transport=transport, clock=clock, sleep=sleep) as client:
        for article, author in _list_articles(client, settings, collector, per_page=per_page):
            collector.articles.append(article)
            if not _changed(article, seen):
                continue
            if article.comments_count == 0:
                collector.fetched.add(article.id)  # nothing to fetch: its comment list is known empty
                continue
            _fetch_thread(client, article, author or settings.devto_username, collector)
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
        raise ConfigError("DEVTO_USERNAME is not set: set it to the dev.to account whose articles to watch")
    with _ForemClient(settings, transport=transport, clock=clock, sleep=sleep) as client:
        response = client.get("/users/by_username", {"url": name})
    if response.status_code == 404:
        raise ConfigError(f"no dev.to user {name} at {settings.devto_base_url} — check DEVTO_USERNAME")


def _changed(article: SourceArticle, seen: SeenFile) -> bool:
    known = seen.articles.get(str(article.id))
    return known is None or known.comments_count != article.comments_count


def _list_articles(
    client: _ForemClient, settings: Settings, collector: Collector, *, per_page: int
) -> list[tuple[SourceArticle, str | None]]:
    path = "/articles/me/published" if settings.devto_api_key is not None else "/articles"
    listed: dict[int, tuple[SourceArticle, str | None]] = {}
    for page in range(1, MAX_PAGES + 1):
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        if settings.devto_api_key is None:
            params = {"username": settings.devto_username, **params}
        response = client.get(path, params)
        if response.status_code == 404:
            raise ConfigError(f"dev.to has no {path} at {settings.devto_base_url} (HTTP 404): check DEVTO_BASE_URL")
        items = _json_list(response, what=f"GET {path} page {page}")
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
        if len(items) < per_page or repeats == len(items):
            break
    return list(listed.values())


def _json_list(response: httpx.Response, *, what: str) -> list[Any]:
    try:
        data = response.json()
    except (ValueError, RecursionError):  # "[[[[…" exhausts the decoder's recursion limit
        data = None
    if not isinstance(data, list):
        raise SourceUnavailable(
            f"dev.to returned a body that is not a JSON list for {what} (HTTP {response.status_code}); "
            "nothing was changed — try again later"
        )
    return data


def _fetch_thread(client: _ForemClient, article: SourceArticle, author: str | None, collector: Collector) -> None:
    where = f"article {article.id}"
    response = client.get("/comments", {"a_id": article.id})
    if response.status_code == 404:
        collector.rejected.append(Rejection(f"{where}: dev.to has no comments for it (HTTP 404; deleted?)", where))
        return
    try:
        nodes = response.json()
    except (ValueError, RecursionError) as exc:
        collector.rejected.append(
            Rejection(f"{where}: dev.to returned invalid JSON for its comments ({exc}); skipped this scan", where)
        )
        return
    if collector.add_thread(nodes, article=article, author=author):
        collector.fetched.add(article.id)


class _ForemClient:
    """httpx client with pacing and the one-shot 429 wait; raises our errors, never httpx's."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        import httpx  # lazily: `import watcher` must stay cheap for commands that never fetch

        headers = {"Accept": ACCEPT, "User-Agent": USER_AGENT}
        if settings.devto_api_key is not None:
            headers["api-key"] = settings.devto_api_key.get_secret_value()
        # No redirects: httpx drops Authorization on a cross-host redirect, but not our api-key.
        try:
            self._http = httpx.Client(
                base_url=settings.devto_base_url,
                headers=headers,
                timeout=TIMEOUT_S,
                transport=transport,
                follow_redirects=False,
            )
        except httpx.InvalidURL as exc:  # e.g. "http://[::1" or a non-numeric port
            raise ConfigError(
                f"DEVTO_BASE_URL {settings.devto_base_url!r} is not a usable URL ({exc}); "
                "use e.g. https://dev.to/api"
            ) from None
        self._httpx = httpx
        self._has_key = settings.devto_api_key is not None
        self._clock = clock
        self._sleep = sleep
        self._last_start: float | None = None
        self._waited_once = False

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    def get(self, path: str, params: dict[str, Any]) -> httpx.Response:
        """One GET; 2xx and 404 come back, everything else raises."""
        response = self._send(path, params)
        if response.status_code == 429:
            delay = retry_after_seconds(response.headers.get("retry-after"))
            if self._waited_once or delay is None or delay > MAX_RETRY_AFTER_S:
                raise SourceUnavailable(_rate_limit_message(delay, again=self._waited_once))
            self._waited_once = True
            self._sleep(delay)
            response = self._send(path, params)
            if response.status_code == 429:
                later = retry_after_seconds(response.headers.get("retry-after"))
                raise SourceUnavailable(_rate_limit_message(later, again=True))
        self._check(response, path)
        return response

    def _send(self, path: str, params: dict[str, Any]) -> httpx.Response:
        self._pace()
        try:
            return self._http.get(path, params=params)
        except self._httpx.HTTPError as exc:
            raise SourceUnavailable(
                f"cannot reach dev.to at {self._http.base_url}: {type(exc).__name__}: {exc or 'no detail'}; "
                "nothing was changed — check the connection (or DEVTO_BASE_URL) and try again"
            ) from exc

    def _pace(self) -> None:
        if self._last_start is not None:
            delay = self._last_start + MIN_INTERVAL_S - self._clock()
            if delay > 0:
                self._sleep(delay)
        self._last_start = self._clock()

    def _check(self, response: httpx.Response, path: str) -> None:
        status = response.status_code
        if 200 <= status < 300 or status == 404:
            return
        if status in (401, 403) and self._has_key:
            raise ConfigError(
                f"dev.to refused DEVTO_API_KEY (HTTP {status}) for GET {path}: check the key at "
                "https://dev.to/settings/extensions, or unset it and set DEVTO_USERNAME"
            )
        if status >= 500:
            raise SourceUnavailable(
                f"dev.to is unavailable (HTTP {status} for GET {path}); nothing was changed — try again later"
            )
        raise SourceUnavailable(
            f"dev.to answered HTTP {status} for GET {path}; nothing was changed — "
            "check DEVTO_USERNAME / DEVTO_BASE_URL and try again later"
        )


def _rate_limit_message(delay: float | None, *, again: bool) -> str:
    head = "dev.to rate limit (HTTP 429)" + (" again after one short wait" if again else "")
    if delay is None:
        return f"{head}; nothing was changed — wait a minute and try again"
    until = iso(utcnow() + timedelta(seconds=delay))
    return f"{head}: dev.to asks to wait {delay:.0f} s; nothing was changed — try again after {until}"
