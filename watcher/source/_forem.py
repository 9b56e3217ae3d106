"""The Forem HTTP client: politeness, the Retry-After budget, and what each status means (SPEC §5).

Every request carries ``Accept: application/vnd.forem.api-v1+json`` and a real ``User-Agent``
(dev.to answers 403 without one). Request starts are at least 0.4 s apart: Forem's rack_attack
counts 3 GETs per IP in a *fixed* one-second window, so requests 0.34 s apart can still land a
fourth in one window (0.0, 0.34, 0.68 | 1.02 is fine, but jitter moves the window edge). A 429
is waited out while its ``Retry-After`` fits in what is left of 10 s of waiting per fetch.

Statuses become our errors here and nowhere else: 2xx and 404 come back to the caller; 401 is
the key refused (:class:`ConfigError`, exit 2); 403 is dev.to's edge or bot filter, key or not
(:class:`SourceUnavailable`, exit 3); 429 past the budget, 5xx, network errors and anything
else are :class:`SourceUnavailable` too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Self

from watcher import __version__
from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable
from watcher.providers.classify import retry_after_seconds
from watcher.util.timeutil import iso, utcnow
from watcher.util.urls import shown_url

if TYPE_CHECKING:
    import httpx

ACCEPT = "application/vnd.forem.api-v1+json"
USER_AGENT = f"devto-watcher/{__version__} (+https://github.com/devto-watcher/devto-watcher)"
MIN_INTERVAL_S = 0.4
# Retry-After waits add up to at most this per fetch: a cron run must not hang on dev.to.
RETRY_BUDGET_S = 10.0
# Each wait costs at least this much of the budget, so "Retry-After: 0" forever still ends.
MIN_WAIT_CHARGE_S = 1.0
TIMEOUT_S = 30.0


class ForemClient:
    """httpx client with pacing and the Retry-After budget; raises our errors, never httpx's."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.BaseTransport | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        # Imported here, not at the top: every command imports watcher.source (the pipeline
        # names it), and httpx would add 73-210 ms to `watcher --help`, `status` and `inbox`
        # (python -X importtime -c "import watcher.cli.app; import httpx", on a ~350 ms start).
        import httpx

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
                f"DEVTO_BASE_URL {shown_url(settings.devto_base_url)!r} is not a usable URL "
                f"({exc}); use e.g. https://dev.to/api"
            ) from None
        self._httpx = httpx
        self._has_key = settings.devto_api_key is not None
        self._clock = clock
        self._sleep = sleep
        self._last_start: float | None = None
        self._budget = RETRY_BUDGET_S

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    def get(self, path: str, params: dict[str, Any]) -> httpx.Response:
        """One GET; 2xx and 404 come back, everything else raises."""
        waited = False
        while True:
            response = self._send(path, params)
            if response.status_code != 429:
                break
            delay = retry_after_seconds(response.headers.get("retry-after"))
            if delay is None or delay > self._budget:
                raise SourceUnavailable(
                    _rate_limit_message(path, delay, self._budget, again=waited)
                )
            self._budget -= max(delay, MIN_WAIT_CHARGE_S)
            waited = True
            self._sleep(delay)
        self._check(response, path)
        return response

    def _send(self, path: str, params: dict[str, Any]) -> httpx.Response:
        self._pace()
        try:
            return self._http.get(path, params=params)
        except self._httpx.HTTPError as exc:
            raise SourceUnavailable(
                f"cannot reach dev.to at {shown_url(str(self._http.base_url))}: "
                f"{type(exc).__name__}: {exc or 'no detail'}; "
                "check the connection (or DEVTO_BASE_URL) and try again"
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
        if status == 401:
            if self._has_key:
                raise ConfigError(
                    f"dev.to refused DEVTO_API_KEY (HTTP 401) for GET {path}: check the key at "
                    "https://dev.to/settings/extensions, or unset it and set DEVTO_USERNAME"
                )
            raise ConfigError(
                f"dev.to asks for an API key (HTTP 401) for GET {path}: set DEVTO_API_KEY, "
                "or check DEVTO_BASE_URL"
            )
        if status == 403:
            # dev.to's CDN and bot filter answer 403 (often an HTML page) before the app sees the
            # request; the app itself answers 401 for a bad key. Saying "key refused" or "check
            # DEVTO_USERNAME" here sent people to fix the wrong thing.
            raise SourceUnavailable(
                f"blocked by dev.to's edge or bot filter (HTTP 403) for GET {path}: this is not "
                "about the key or the username; requests carry the User-Agent "
                f"{USER_AGENT!r} — try again later, from another network, or report it if it "
                "persists"
            )
        if status >= 500:
            raise SourceUnavailable(
                f"dev.to is unavailable (HTTP {status} for GET {path}); try again later"
            )
        raise SourceUnavailable(
            f"dev.to answered HTTP {status} for GET {path}; check DEVTO_BASE_URL and try again "
            "later"
        )


def _rate_limit_message(path: str, delay: float | None, budget: float, *, again: bool) -> str:
    head = f"dev.to rate limit (HTTP 429) for GET {path}" + (
        " again after waiting" if again else ""
    )
    if delay is None:
        return f"{head}, without a usable Retry-After; wait a minute and try again"
    until = iso(utcnow() + timedelta(seconds=delay))
    return (
        f"{head}: dev.to asks to wait {delay:.0f} s, more than the {max(budget, 0):.0f} s left of "
        f"this scan's {RETRY_BUDGET_S:.0f} s of waiting; try again after {until}"
    )
