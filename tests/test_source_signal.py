"""dev.to against a stateful fake Forem (SPEC §13.3): the change signal, paging under a cap,
pacing, interrupted fetches, author replies, and what 401/403/unknown users say."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from _fakes.clock import FakeClock
from _fakes.forem import EDGE_403, FakeForem
from pydantic import SecretStr

from watcher.config import Settings
from watcher.errors import ConfigError, SourceUnavailable, exit_code_for
from watcher.models import SeenFile
from watcher.state.seen import record_article
from watcher.source import FetchResult, fetch_devto

KEY = "devto-KEY-fake-4242"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def forem(clock: FakeClock) -> FakeForem:
    forem = FakeForem(clock=clock)
    forem.users.update({"maya", "priyan", "lena"})
    return forem


def _scan(forem: FakeForem, tmp_path: Path, seen: SeenFile | None = None, *, full: bool = False,
          **kw: Any) -> FetchResult:
    kw.setdefault("devto_username", "maya")
    settings = Settings(data_dir=tmp_path / "data", devto_base_url="https://dev.to/api", **kw)
    assert isinstance(forem.clock, FakeClock)
    return fetch_devto(settings, seen or SeenFile(), full=full, transport=httpx.MockTransport(forem.handle),
                       clock=forem.clock, sleep=forem.clock.sleep)


def _record(seen: SeenFile, result: FetchResult) -> SeenFile:
    """What the pipeline does after a scan: record the signal of the fetched articles only."""
    for a in result.articles:
        if a.id in result.fetched_article_ids:
            seen = record_article(seen, a.id, title=a.title, url=a.url, comments_count=a.comments_count,
                                  last_comment_at=a.last_comment_at)
    return seen


def _threads(forem: FakeForem) -> list[int]:
    return [int(r.query["a_id"]) for r in forem.requests if r.path == "/api/comments"]


# --- the change signal ---------------------------------------------------------------------------


def test_a_new_comment_cancelled_out_by_a_childless_deletion_is_found(forem: FakeForem, tmp_path: Path) -> None:
    """A new comment plus a removed spam comment leave comments_count as it was; last_comment_at
    moved, so the thread is fetched and the new comment found."""
    post = forem.publish("maya")
    forem.comment(post, "priyan")
    spam = forem.comment(post, "lena", "buy followers")
    seen = _record(SeenFile(), _scan(forem, tmp_path))
    new = forem.comment(post, "priyan", "a real question")
    forem.delete(spam)
    assert forem.articles[post].comments_count == seen.articles[str(post)].comments_count == 2
    result = _scan(forem, tmp_path, seen)
    assert new in {c.id for c in result.comments} and result.fetched_article_ids == {post}


def test_without_last_comment_at_the_count_is_the_signal(forem: FakeForem, tmp_path: Path) -> None:
    """A Forem whose listing lacks last_comment_at: unchanged counts are not re-fetched (and a
    changed count still is)."""
    forem.sends_last_comment_at = False
    quiet, busy = forem.publish("maya"), forem.publish("maya")
    forem.comment(quiet, "priyan")
    forem.comment(busy, "priyan")
    seen = _record(SeenFile(), _scan(forem, tmp_path))
    forem.requests.clear()
    forem.edit(forem.thread(quiet)[0]["id_code"], "edited")
    forem.comment(busy, "lena")
    result = _scan(forem, tmp_path, seen)
    assert _threads(forem) == [busy] and result.articles[0].last_comment_at is None


def test_deleting_a_comment_with_replies_flags_it_and_keeps_the_count(forem: FakeForem, tmp_path: Path) -> None:
    """Forem keeps a deleted parent as "[deleted]" (count unchanged, last_comment_at moved): the
    thread is fetched again, the reply still points at its parent, the parent is not a comment."""
    post = forem.publish("maya")
    parent = forem.comment(post, "priyan")
    reply = forem.comment(post, "lena", parent=parent)
    seen = _record(SeenFile(), _scan(forem, tmp_path))
    forem.delete(parent)
    assert forem.articles[post].comments_count == 2
    result = _scan(forem, tmp_path, seen)
    assert result.fetched_article_ids == {post}
    assert [(c.id, c.parent_id) for c in result.comments] == [(reply, parent)]
    assert result.parent_texts[parent] == "[deleted]"


def test_an_unchanged_account_fetches_no_thread(forem: FakeForem, tmp_path: Path) -> None:
    """Nothing moved: the listing pages only (page 1 and the empty page 2)."""
    for _ in range(3):
        forem.comment(forem.publish("maya"), "priyan")
    seen = _record(SeenFile(), _scan(forem, tmp_path))
    forem.requests.clear()
    result = _scan(forem, tmp_path, seen)
    assert forem.paths() == ["/api/articles", "/api/articles"] and result.fetched_article_ids == set()


def test_a_signal_recorded_before_last_comment_at_was_tracked_is_fetched_once(forem: FakeForem,
                                                                             tmp_path: Path) -> None:
    """An entry without last_comment_at (an older seen.json) may hide a cancelled-out comment:
    that thread is fetched once, then the scan is steady."""
    post = forem.publish("maya")
    forem.comment(post, "priyan")
    old = record_article(SeenFile(), post, title="t", url=None, comments_count=1)
    first = _scan(forem, tmp_path, old)
    assert first.fetched_article_ids == {post}
    forem.requests.clear()
    assert _scan(forem, tmp_path, _record(old, first)).fetched_article_ids == set() and _threads(forem) == []


def test_full_refetches_every_thread(forem: FakeForem, tmp_path: Path) -> None:
    """`scan --full`: every article with comments is fetched although nothing moved."""
    posts = [forem.publish("maya") for _ in range(3)]
    for post in posts[:2]:
        forem.comment(post, "priyan")
    seen = _record(SeenFile(), _scan(forem, tmp_path))
    forem.requests.clear()
    result = _scan(forem, tmp_path, seen, full=True)
    assert sorted(_threads(forem)) == posts[:2] and result.fetched_article_ids == set(posts)


def test_with_an_api_key_the_signal_comes_from_the_public_listing_too(forem: FakeForem, tmp_path: Path) -> None:
    """/articles/me/published lacks last_comment_at: the public listing of the key's own username
    supplies it, so the cancel-out case is found with a key as well."""
    forem.keys[KEY] = "maya"
    post = forem.publish("maya")
    spam = forem.comment(post, "lena")
    seen = _record(SeenFile(), _scan(forem, tmp_path, devto_username=None, devto_api_key=SecretStr(KEY)))
    assert seen.articles[str(post)].last_comment_at is not None
    new = forem.comment(post, "priyan")
    forem.delete(spam)
    forem.requests.clear()
    result = _scan(forem, tmp_path, seen, devto_username=None, devto_api_key=SecretStr(KEY))
    assert [c.id for c in result.comments] == [new]
    assert [(r.path, r.query.get("username")) for r in forem.requests] == [
        ("/api/articles/me/published", None), ("/api/articles/me/published", None),
        ("/api/articles", "maya"), ("/api/articles", "maya"), ("/api/comments", None)]


# --- listing -------------------------------------------------------------------------------------


def test_paging_under_a_per_page_cap_finds_every_article(forem: FakeForem, tmp_path: Path) -> None:
    """A Forem capping pages at 2 (below the 1000 asked): short pages are read past, every one of
    5 articles is found, and the empty page 4 ends the listing."""
    forem.page_cap = 2
    posts = {forem.publish("maya") for _ in range(5)}
    result = _scan(forem, tmp_path)
    assert {a.id for a in result.articles} == posts
    assert [(r.query["page"], r.query["per_page"]) for r in forem.requests] == [
        ("1", "1000"), ("2", "1000"), ("3", "1000"), ("4", "1000")]


def test_an_unknown_username_is_a_config_error_not_nothing_new(forem: FakeForem, tmp_path: Path) -> None:
    """An empty first page is checked with /users/by_username: a typo is exit 2, not silence."""
    with pytest.raises(ConfigError, match="no dev.to user mayaa") as info:
        _scan(forem, tmp_path, devto_username="mayaa")
    assert exit_code_for(info.value) == 2
    assert forem.requests[-1].path == "/api/users/by_username" and forem.requests[-1].query == {"url": "mayaa"}


def test_a_known_user_without_articles_finds_nothing(forem: FakeForem, tmp_path: Path) -> None:
    """An existing user with no articles: empty result, no error."""
    result = _scan(forem, tmp_path, devto_username="lena")
    assert result.articles == [] and result.interrupted is None


# --- pacing and interruptions ----------------------------------------------------------------------


def test_request_starts_are_at_least_0_4_s_apart_and_rack_attack_never_throttles(
    forem: FakeForem, clock: FakeClock, tmp_path: Path
) -> None:
    """Against rack_attack's 3-per-fixed-second window, 12 requests get no 429 and start ≥ 0.4 s apart."""
    forem.rate_limit = True
    for _ in range(10):
        forem.comment(forem.publish("maya"), "priyan")
    result = _scan(forem, tmp_path)
    starts = [r.at for r in forem.requests]
    assert len(starts) == 12 and result.interrupted is None and len(result.fetched_article_ids) == 10
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 0.4 - 1e-9


def test_a_429_midway_keeps_the_fetched_part_and_the_next_scan_completes_it(forem: FakeForem,
                                                                            tmp_path: Path) -> None:
    """A 429 asking 60 s on the third thread: two threads are kept, the rest keep their old signal,
    and the next scan fetches exactly those; every comment is found once."""
    posts = [forem.publish("maya") for _ in range(4)]
    made = {forem.comment(post, "priyan") for post in posts}
    forem.fail("/api/comments", 429, after=2, headers={"retry-after": "60"})
    first = _scan(forem, tmp_path)
    assert isinstance(first.interrupted, SourceUnavailable) and exit_code_for(first.interrupted) == 3
    assert "60 s" in str(first.interrupted) and len(first.fetched_article_ids) == 2
    seen = _record(SeenFile(), first)
    assert len(seen.articles) == 2
    forem.requests.clear()
    second = _scan(forem, tmp_path, seen)
    assert second.interrupted is None and set(_threads(forem)) == set(posts) - first.fetched_article_ids
    found = [c.id for c in first.comments + second.comments]
    assert sorted(found) == sorted(made)


def test_a_failed_listing_still_raises(forem: FakeForem, tmp_path: Path) -> None:
    """Nothing fetched yet: a 503 on the listing is SourceUnavailable (exit 3), not an empty result."""
    forem.publish("maya")
    forem.fail("/api/articles", 503, body=b"<html>down</html>")
    with pytest.raises(SourceUnavailable, match="HTTP 503") as info:
        _scan(forem, tmp_path)
    assert exit_code_for(info.value) == 3


# --- what errors say -------------------------------------------------------------------------------


@pytest.mark.parametrize("with_key", [False, True])
def test_an_edge_403_is_exit_3_naming_the_bot_filter_and_user_agent(forem: FakeForem, tmp_path: Path,
                                                                     with_key: bool) -> None:
    """An HTML 403 from dev.to's edge is not "key refused" nor "check DEVTO_USERNAME", key or not."""
    forem.keys[KEY] = "maya"
    forem.edge_block = True
    kw: dict[str, Any] = {"devto_api_key": SecretStr(KEY)} if with_key else {}
    with pytest.raises(SourceUnavailable) as info:
        _scan(forem, tmp_path, **kw)
    message = str(info.value)
    assert exit_code_for(info.value) == 3
    assert "edge or bot filter (HTTP 403)" in message and "User-Agent" in message and "devto-watcher/" in message
    assert "DEVTO_USERNAME" not in message and "refused" not in message and KEY not in message


def test_a_403_midway_keeps_the_fetched_part(forem: FakeForem, tmp_path: Path) -> None:
    """The bot filter starting to block mid-scan interrupts it like a 429 does."""
    posts = [forem.publish("maya") for _ in range(3)]
    for post in posts:
        forem.comment(post, "priyan")
    forem.fail("/api/comments", 403, after=1, headers={"content-type": "text/html"}, body=EDGE_403)
    result = _scan(forem, tmp_path)
    assert len(result.fetched_article_ids) == 1 and len(result.comments) == 1
    assert result.interrupted is not None and "HTTP 403" in str(result.interrupted)


def test_a_refused_key_is_exit_2(forem: FakeForem, tmp_path: Path) -> None:
    """HTTP 401 with DEVTO_API_KEY: the key was refused; exit 2, the key not repeated."""
    forem.publish("maya")
    with pytest.raises(ConfigError) as info:
        _scan(forem, tmp_path, devto_api_key=SecretStr("not-the-key"))
    assert str(info.value).startswith("dev.to refused DEVTO_API_KEY (HTTP 401)")
    assert exit_code_for(info.value) == 2 and "not-the-key" not in str(info.value)


# --- comments --------------------------------------------------------------------------------------


def test_author_replies_are_reported_by_their_earliest_direct_reply(forem: FakeForem, tmp_path: Path) -> None:
    """Only a direct reply by the author counts (case-insensitive), the earliest one; the author's
    own comments are still no comments to triage."""
    post = forem.publish("maya")
    question = forem.comment(post, "priyan")
    first = forem.comment(post, "Maya", "thanks!", parent=question)
    forem.comment(post, "maya", "and one more thing", parent=question)
    follow_up = forem.comment(post, "priyan", "follow-up", parent=first)
    deep = forem.comment(post, "maya", "answered deeper", parent=follow_up)
    unanswered = forem.comment(post, "lena")
    result = _scan(forem, tmp_path)
    at = {n["id_code"]: n["created_at"] for n in _walk(forem.thread(post))}
    assert result.author_replies == {question: at[first], follow_up: at[deep]}
    assert {c.id for c in result.comments} == {question, follow_up, unanswered}


def test_comments_get_real_id_codes_and_permalinks_built_from_the_site(forem: FakeForem, tmp_path: Path) -> None:
    """id_codes are base 26 (0–9, a–p); the API sends no url, so it is {site}/{username}/comment/{id}."""
    post = forem.publish("maya")
    code = forem.comment(post, "priyan")
    (comment,) = _scan(forem, tmp_path).comments
    assert re.fullmatch(r"[0-9a-p]+", comment.id) and comment.id == code
    assert comment.url == f"https://dev.to/priyan/comment/{code}"


def _walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for node in nodes:
        out.append(node)
        out.extend(_walk(node["children"]))
    return out
