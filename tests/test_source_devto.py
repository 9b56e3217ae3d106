"""The dev.to API client against respx: paging, incremental fetches, pacing, 429s, errors (SPEC §5)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from _fakes.clock import FakeClock
from pydantic import SecretStr

import watcher
from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable, exit_code_for
from watcher.models import SeenArticle, SeenFile
from watcher.source import fetch_devto
from watcher.source._devto import retry_after_seconds

BASE = "https://dev.to/api"
KEY = "sk-devto-SECRET-123"


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    kw.setdefault("devto_username", "maya")
    kw.setdefault("devto_base_url", BASE)
    return Settings(data_dir=tmp_path / "data", **kw)


def _article(i: int, count: int = 1) -> dict[str, Any]:
    return {"type_of": "article", "id": i, "title": f"Post {i}", "url": f"https://dev.to/maya/post-{i}",
            "comments_count": count, "user": {"name": "Maya", "username": "maya"}}


def _comment(id_code: str, username: str = "priyan", children: list | None = None) -> dict[str, Any]:
    return {"type_of": "comment", "id_code": id_code, "created_at": "2026-05-14T09:12:44Z",
            "body_html": f"<p>comment {id_code}</p>", "user": {"name": "X", "username": username},
            "children": children or []}


def _seen(counts: dict[int, int]) -> SeenFile:
    return SeenFile(articles={
        str(i): SeenArticle(title=f"Post {i}", comments_count=n, checked_at="2026-05-01T00:00:00Z")
        for i, n in counts.items()
    })


def _paged(articles: list[dict[str, Any]]):
    def handler(request: httpx.Request) -> httpx.Response:
        page, per_page = int(request.url.params["page"]), int(request.url.params["per_page"])
        return httpx.Response(200, json=articles[(page - 1) * per_page: page * per_page])
    return handler


def _fetch(tmp_path: Path, seen: SeenFile | None = None, clock: FakeClock | None = None, **kw: Any):
    clock = clock or FakeClock(5000.0)
    per_page = kw.pop("per_page", 100)
    return fetch_devto(_settings(tmp_path, **kw), seen or SeenFile(), clock=clock, sleep=clock.sleep,
                       per_page=per_page)


# --- requests and paging --------------------------------------------------------------------


@respx.mock(base_url=BASE, assert_all_called=False)
def test_every_request_sends_forem_accept_and_a_real_user_agent(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """Both endpoints get the v1 Accept header and a devto-watcher User-Agent, and no api-key."""
    respx_mock.get("/articles").mock(side_effect=_paged([_article(1)]))
    respx_mock.get("/comments").mock(return_value=httpx.Response(200, json=[_comment("c1")]))
    _fetch(tmp_path)
    assert len(respx_mock.calls) == 3  # listing page 1, the empty page 2, one thread
    for request, _ in respx_mock.calls:
        assert request.headers["accept"] == "application/vnd.forem.api-v1+json"
        assert request.headers["user-agent"].startswith(f"devto-watcher/{watcher.__version__} (+https://")
        assert "api-key" not in request.headers


@respx.mock(base_url=BASE, assert_all_called=False)
def test_username_listing_reads_past_a_short_page_until_an_empty_one(respx_mock: respx.MockRouter,
                                                                    tmp_path: Path) -> None:
    """7 articles at 3 per page: the short page 3 is not the end (a Forem may cap pages lower than
    asked); the empty page 4 is."""
    route = respx_mock.get("/articles").mock(side_effect=_paged([_article(i, 0) for i in range(1, 8)]))
    result = _fetch(tmp_path, per_page=3)
    assert [a.id for a in result.articles] == list(range(1, 8))
    assert [dict(c.request.url.params) for c in route.calls] == [
        {"username": "maya", "page": str(p), "per_page": "3"} for p in (1, 2, 3, 4)
    ]


def test_the_listing_asks_for_forems_maximum_page_size(tmp_path: Path) -> None:
    """per_page=1000 by default: a 300-article account is one page and the empty second."""
    import watcher.source._devto as devto

    assert devto.PER_PAGE == 1000


@respx.mock(base_url=BASE, assert_all_called=False)
def test_listing_stops_at_an_empty_page(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """6 articles at 3 per page: the empty page 3 ends the listing."""
    route = respx_mock.get("/articles").mock(side_effect=_paged([_article(i, 0) for i in range(1, 7)]))
    assert len(_fetch(tmp_path, per_page=3).articles) == 6
    assert route.call_count == 3


@respx.mock(base_url=BASE, assert_all_called=False)
def test_api_key_lists_me_published_with_the_api_key_header(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """With DEVTO_API_KEY the private endpoint is used, the key sent only as a header; the public
    listing of the username it shows is read too, for the change signal it lacks."""
    mine = respx_mock.get("/articles/me/published").mock(side_effect=_paged([_article(1, 0)]))
    public = respx_mock.get("/articles").mock(side_effect=_paged([{**_article(1, 0), "last_comment_at": None}]))
    _fetch(tmp_path, devto_username=None, devto_api_key=SecretStr(KEY))
    assert mine.call_count == 2 and public.call_count == 2
    request = mine.calls[0].request
    assert request.headers["api-key"] == KEY
    assert KEY not in str(request.url)
    assert public.calls[0].request.url.params["username"] == "maya"


@respx.mock(base_url=BASE, assert_all_called=False)
def test_a_page_repeated_by_a_server_ignoring_page_ends_the_listing(respx_mock: respx.MockRouter,
                                                                    tmp_path: Path) -> None:
    """A full page of already-seen ids means the server ignores `page`: stop instead of looping."""
    route = respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[_article(1, 0), _article(2, 0)]))
    assert len(_fetch(tmp_path, per_page=2).articles) == 2
    assert route.call_count == 2


# --- incremental -------------------------------------------------------------------------------


@respx.mock(base_url=BASE, assert_all_called=False)
def test_steady_state_scan_of_300_articles_makes_pages_plus_5_requests(respx_mock: respx.MockRouter,
                                                                       tmp_path: Path) -> None:
    """300 known articles, 5 with a new comments_count: 4 listing pages + exactly 5 comment fetches."""
    changed = {17, 42, 123, 250, 299}
    articles = [_article(i, count=3 + (i in changed)) for i in range(1, 301)]
    seen = _seen({i: 3 for i in range(1, 301)})
    respx_mock.get("/articles").mock(side_effect=_paged(articles))
    comments = respx_mock.get("/comments").mock(
        side_effect=lambda r: httpx.Response(200, json=[_comment(f"c{r.url.params['a_id']}")]))
    result = _fetch(tmp_path, seen)
    assert len(respx_mock.calls) == 4 + 5
    assert {int(c.request.url.params["a_id"]) for c in comments.calls} == changed
    assert result.fetched_article_ids == changed
    assert len(result.articles) == 300


@respx.mock(base_url=BASE, assert_all_called=False)
def test_unknown_articles_are_fetched_and_empty_ones_need_no_request(respx_mock: respx.MockRouter,
                                                                     tmp_path: Path) -> None:
    """A never-seen article with comments is fetched; one with 0 comments is known empty without a call."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[_article(1, 2), _article(2, 0)]))
    comments = respx_mock.get("/comments").mock(return_value=httpx.Response(200, json=[_comment("c1")]))
    result = _fetch(tmp_path)
    assert [c.request.url.params["a_id"] for c in comments.calls] == ["1"]
    assert result.fetched_article_ids == {1, 2}


# --- pacing --------------------------------------------------------------------------------------


@respx.mock(base_url=BASE, assert_all_called=False)
def test_requests_are_paced_to_at_most_three_per_second(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """With an instant server, request starts are at least 0.4 s apart, so no fixed one-second
    window holds a fourth (fake clock, no real sleep)."""
    clock = FakeClock(5000.0)
    starts: list[float] = []

    def record(response: httpx.Response):
        def handler(request: httpx.Request) -> httpx.Response:
            starts.append(clock())
            return response
        return handler

    respx_mock.get("/articles").mock(side_effect=record(httpx.Response(200, json=[_article(i) for i in range(1, 11)])))
    respx_mock.get("/comments").mock(side_effect=record(httpx.Response(200, json=[])))
    _fetch(tmp_path, clock=clock)
    assert len(starts) == 12  # page 1, page 2 (all repeats), 10 threads
    assert all(later - earlier >= 0.4 - 1e-9 for earlier, later in itertools.pairwise(starts))
    assert all(later - earlier >= 1.0 for earlier, later in zip(starts, starts[3:], strict=False))
    assert clock.sleeps and all(0 < s <= 0.4 for s in clock.sleeps)


@respx.mock(base_url=BASE, assert_all_called=False)
def test_pacing_does_not_sleep_when_requests_are_already_slow(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """A server that takes a second per answer is never made to wait longer."""
    clock = FakeClock(5000.0)

    def slow(json: Any):
        def handler(request: httpx.Request) -> httpx.Response:
            clock.now += 1.0
            return httpx.Response(200, json=json)
        return handler

    respx_mock.get("/articles").mock(side_effect=slow([_article(1), _article(2)]))
    respx_mock.get("/comments").mock(side_effect=slow([]))
    _fetch(tmp_path, clock=clock)
    assert clock.sleeps == []


# --- 429 -----------------------------------------------------------------------------------------


@respx.mock(base_url=BASE, assert_all_called=False)
def test_short_retry_after_is_honoured_once_then_the_request_retried(respx_mock: respx.MockRouter,
                                                                     tmp_path: Path) -> None:
    """A 429 with Retry-After 2 sleeps 2 s (injected) and repeats the same request once."""
    clock = FakeClock(5000.0)
    route = respx_mock.get("/articles").mock(side_effect=[
        httpx.Response(429, headers={"Retry-After": "2"}), httpx.Response(200, json=[_article(1, 0)]),
        httpx.Response(200, json=[])])
    result = _fetch(tmp_path, clock=clock)
    assert [a.id for a in result.articles] == [1]
    assert route.call_count == 3 and route.calls[0].request.url == route.calls[1].request.url
    assert 2.0 in clock.sleeps


@respx.mock(base_url=BASE, assert_all_called=False)
def test_long_retry_after_stops_with_exit_3_and_says_when(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """Retry-After 120 is not waited for: SourceUnavailable (exit 3) naming the wait and a time."""
    clock = FakeClock(5000.0)
    respx_mock.get("/articles").mock(return_value=httpx.Response(429, headers={"Retry-After": "120"}))
    with pytest.raises(SourceUnavailable) as info:
        _fetch(tmp_path, clock=clock)
    assert exit_code_for(info.value) == 3
    assert "120 s" in str(info.value) and "try again after 20" in str(info.value)
    assert clock.sleeps == []


@respx.mock(base_url=BASE, assert_all_called=False)
def test_an_absurd_retry_after_stops_with_exit_3_not_a_crash(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """Retry-After 1e12 s cannot be added to "now"; it still stops cleanly with a time to retry."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(429, headers={"Retry-After": "1e12"}))
    with pytest.raises(SourceUnavailable, match="try again after") as info:
        _fetch(tmp_path)
    assert exit_code_for(info.value) == 3


@respx.mock(base_url=BASE, assert_all_called=False)
def test_retry_after_waits_add_up_to_at_most_10_s_per_fetch(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """Waits of 4 s and 4 s are honoured; a third asking 4 s more than the 2 s left stops the
    fetch midway: interrupted, the first thread kept."""
    clock = FakeClock(5000.0)
    respx_mock.get("/articles").mock(side_effect=[
        httpx.Response(429, headers={"Retry-After": "4"}), httpx.Response(200, json=[_article(1), _article(2)]),
        httpx.Response(200, json=[])])
    comments = respx_mock.get("/comments").mock(side_effect=[
        httpx.Response(429, headers={"Retry-After": "4"}), httpx.Response(200, json=[_comment("a1")]),
        httpx.Response(429, headers={"Retry-After": "4"})])
    result = _fetch(tmp_path, clock=clock)
    assert comments.call_count == 3 and [c.id for c in result.comments] == ["a1"]
    assert result.fetched_article_ids == {1}
    assert isinstance(result.interrupted, SourceUnavailable) and exit_code_for(result.interrupted) == 3
    assert "2 s left" in str(result.interrupted) and "1 of 2 changed articles" in str(result.interrupted)
    assert sum(s for s in clock.sleeps if s > 0.4) == 8.0


@respx.mock(base_url=BASE, assert_all_called=False)
def test_429_without_retry_after_stops(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """No usable Retry-After: stop and tell the user to wait a minute."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(429))
    with pytest.raises(SourceUnavailable, match="wait a minute"):
        _fetch(tmp_path)


@pytest.mark.parametrize(("header", "expected"), [
    ("3", 3.0), (" 7.5 ", 7.5), ("0", 0.0), ("-1", None), ("soon", None), ("", None), (None, None),
    ("inf", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("Wed, 21 Oct 2015 07:28:00 -0000", 0.0),
])
def test_retry_after_header_parsing(header: str | None, expected: float | None) -> None:
    """Delta-seconds and HTTP dates are understood; garbage is None; a past date means no wait."""
    assert retry_after_seconds(header) == expected


# --- failures --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 502, 503])
@respx.mock(base_url=BASE, assert_all_called=False)
def test_5xx_with_a_non_json_body_is_source_unavailable(respx_mock: respx.MockRouter, tmp_path: Path,
                                                        status: int) -> None:
    """An HTML error page from dev.to stops the fetch with exit 3 and the status in the message."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(status, text="<html>Bad Gateway</html>"))
    with pytest.raises(SourceUnavailable, match=f"HTTP {status}") as info:
        _fetch(tmp_path)
    assert exit_code_for(info.value) == 3


@respx.mock(base_url=BASE, assert_all_called=False)
def test_5xx_on_a_comments_request_keeps_what_was_fetched(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """A 5xx midway stops the fetch without losing the threads before it: those are returned as
    fetched, the rest are not (they keep their old signal), and ``interrupted`` says why."""
    respx_mock.get("/articles").mock(side_effect=_paged([_article(1), _article(2), _article(3)]))
    comments = respx_mock.get("/comments").mock(side_effect=[
        httpx.Response(200, json=[_comment("a1")]), httpx.Response(503, text="down")])
    result = _fetch(tmp_path)
    assert comments.call_count == 2  # article 3 is not asked for once dev.to is down
    assert result.fetched_article_ids == {1} and [c.id for c in result.comments] == ["a1"]
    assert isinstance(result.interrupted, SourceUnavailable) and "HTTP 503" in str(result.interrupted)
    assert [a.id for a in result.articles] == [1, 2, 3]


@pytest.mark.parametrize("exc", [httpx.ConnectError("connection refused"), httpx.ReadTimeout("timed out")])
@respx.mock(base_url=BASE, assert_all_called=False)
def test_network_errors_are_source_unavailable_without_the_key(respx_mock: respx.MockRouter, tmp_path: Path,
                                                               exc: Exception) -> None:
    """Connect errors and timeouts stop with exit 3; the api key is in no message."""
    respx_mock.get("/articles/me/published").mock(side_effect=exc)
    with pytest.raises(SourceUnavailable, match="cannot reach dev.to") as info:
        _fetch(tmp_path, devto_api_key=SecretStr(KEY))
    assert KEY not in str(info.value) and KEY not in repr(info.value.__cause__)


@respx.mock(base_url=BASE, assert_all_called=False)
def test_a_refused_api_key_is_a_config_error_that_does_not_repeat_the_key(respx_mock: respx.MockRouter,
                                                                          tmp_path: Path) -> None:
    """HTTP 401 with DEVTO_API_KEY set: exit 2, a hint, and never the key itself."""
    respx_mock.get("/articles/me/published").mock(return_value=httpx.Response(401, json={"error": KEY}))
    with pytest.raises(ConfigError, match="DEVTO_API_KEY") as info:
        _fetch(tmp_path, devto_api_key=SecretStr(KEY))
    assert exit_code_for(info.value) == 2 and KEY not in str(info.value)


@pytest.mark.parametrize("url", ["http://[::1", "http://dev.to:port/api"])
def test_an_unparsable_devto_base_url_is_a_config_error(tmp_path: Path, url: str) -> None:
    """A DEVTO_BASE_URL httpx cannot parse is exit 2 naming the setting, not an internal error."""
    with pytest.raises(ConfigError, match="DEVTO_BASE_URL") as info:
        _fetch(tmp_path, devto_base_url=url)
    assert exit_code_for(info.value) == 2


def test_no_account_configured_is_a_config_error(tmp_path: Path) -> None:
    """Without DEVTO_USERNAME or DEVTO_API_KEY nothing is requested; the message names both ways out."""
    with pytest.raises(ConfigError, match="DEVTO_USERNAME") as info:
        _fetch(tmp_path, devto_username=None)
    assert "--source FILE" in str(info.value) and exit_code_for(info.value) == 2


@respx.mock(base_url=BASE, assert_all_called=False)
def test_an_article_listing_that_is_not_json_is_source_unavailable(respx_mock: respx.MockRouter,
                                                                   tmp_path: Path) -> None:
    """Without a usable listing nothing can be trusted: exit 3."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, text="<html>maintenance</html>"))
    with pytest.raises(SourceUnavailable, match="not a JSON list"):
        _fetch(tmp_path)


@respx.mock(base_url=BASE, assert_all_called=False)
def test_invalid_json_comments_reject_that_article_only(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """One article's garbage comments are a rejection; the other article's comments go through."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[_article(1), _article(2)]))
    respx_mock.get("/comments", params={"a_id": "1"}).mock(return_value=httpx.Response(200, text="{oops"))
    respx_mock.get("/comments", params={"a_id": "2"}).mock(return_value=httpx.Response(200, json=[_comment("ok2")]))
    result = _fetch(tmp_path)
    assert [c.id for c in result.comments] == ["ok2"]
    assert [r.item for r in result.rejected] == ["article 1"] and "invalid JSON" in result.rejected[0].message
    assert result.fetched_article_ids == {2}


@respx.mock(base_url=BASE, assert_all_called=False)
def test_comments_nested_past_the_recursion_limit_reject_that_article_only(respx_mock: respx.MockRouter,
                                                                          tmp_path: Path) -> None:
    """A thread too deep for the JSON decoder is a rejection of its article, not a crash."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[_article(1), _article(2)]))
    respx_mock.get("/comments", params={"a_id": "1"}).mock(return_value=httpx.Response(200, text="[" * 100_000))
    respx_mock.get("/comments", params={"a_id": "2"}).mock(return_value=httpx.Response(200, json=[_comment("ok2")]))
    result = _fetch(tmp_path)
    assert [c.id for c in result.comments] == ["ok2"] and [r.item for r in result.rejected] == ["article 1"]


@respx.mock(base_url=BASE, assert_all_called=False)
def test_a_listing_nested_past_the_recursion_limit_is_source_unavailable(respx_mock: respx.MockRouter,
                                                                         tmp_path: Path) -> None:
    """An article listing too deep for the JSON decoder stops with exit 3, not a crash."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, text="[" * 100_000))
    with pytest.raises(SourceUnavailable, match="not a JSON list"):
        _fetch(tmp_path)


@respx.mock(base_url=BASE, assert_all_called=False)
def test_a_malformed_article_in_the_listing_is_rejected_the_rest_kept(respx_mock: respx.MockRouter,
                                                                      tmp_path: Path) -> None:
    """An article without an id is one rejection, named by its page position."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[{"title": "x"}, _article(2, 0)]))
    result = _fetch(tmp_path)
    assert [a.id for a in result.articles] == [2]
    assert result.rejected[0].item == "article #1 of page 1"


@respx.mock(base_url=BASE, assert_all_called=False)
def test_comments_404_rejects_that_article(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """An article deleted between listing and fetch is a rejection, not a crash, and stays unfetched."""
    respx_mock.get("/articles").mock(return_value=httpx.Response(200, json=[_article(1)]))
    respx_mock.get("/comments").mock(return_value=httpx.Response(404, json={"error": "not found"}))
    result = _fetch(tmp_path)
    assert result.fetched_article_ids == set() and "HTTP 404" in result.rejected[0].message


@respx.mock(base_url=BASE, assert_all_called=False)
def test_redirects_are_not_followed(respx_mock: respx.MockRouter, tmp_path: Path) -> None:
    """A redirect could carry the api-key header to another host, so it is an error instead."""
    respx_mock.get("/articles/me/published").mock(
        return_value=httpx.Response(302, headers={"Location": "https://evil.example/steal"}))
    evil = respx_mock.get("https://evil.example/steal")
    with pytest.raises(SourceUnavailable, match="HTTP 302"):
        _fetch(tmp_path, devto_api_key=SecretStr(KEY))
    assert evil.call_count == 0


def test_importing_the_source_package_does_not_import_httpx() -> None:
    """httpx is imported only when a dev.to client is built, so `--source FILE` runs never pay for it."""
    code = "import sys, watcher.source; print('httpx' in sys.modules)"
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=repo)
    assert out.stdout.strip() == "False"
