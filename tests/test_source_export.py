"""--source FILE: Forem-format exports, the bundled sample, and per-item rejections (SPEC §5)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from watcher.config import Settings
from watcher.errors import UsageError, exit_code_for
from watcher.models import COMMENT_ID_RE
from watcher.source import bundled_sample, read_export


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings(data_dir=tmp_path / "data", **kw)


def _comment(id_code: Any, username: str = "priyan", text: str = "Nice post", children: list | None = None,
             **extra: Any) -> dict[str, Any]:
    return {
        "type_of": "comment", "id_code": id_code, "created_at": "2026-05-14T09:12:44Z",
        "body_html": f"<p>{text}</p>", "user": {"name": username.title(), "username": username},
        "children": children or [], **extra,
    }


def _export(tmp_path: Path, comments: list[Any], *, username: str | None = "maya", **article: Any) -> Path:
    data: dict[str, Any] = {"articles": [{
        "id": 1201, "title": "Token buckets", "url": "https://dev.to/maya/token-buckets-1k2j",
        "comments_count": len(comments), "comments": comments, **article,
    }]}
    if username is not None:
        data["username"] = username
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- the bundled sample ---------------------------------------------------------------------


def test_bundled_sample_is_found_in_the_source_tree() -> None:
    """bundled_sample() points at an existing export.json."""
    path = bundled_sample()
    assert path.is_file() and path.name == "export.json"


def test_bundled_sample_has_enough_articles_and_comments_for_the_demo(tmp_path: Path) -> None:
    """At least 3 articles and 20 usable comments (at most 24), none rejected, all fetched."""
    result = read_export(bundled_sample(), _settings(tmp_path))
    assert len(result.articles) >= 3
    assert 20 <= len(result.comments) <= 24
    assert result.rejected == []
    assert result.fetched_article_ids == {a.id for a in result.articles}


def test_bundled_sample_has_nested_replies_deleted_hidden_and_own_comments(tmp_path: Path) -> None:
    """Replies keep parent ids; deleted, hidden and maya_writes's own replies are skipped but quotable."""
    result = read_export(bundled_sample(), _settings(tmp_path))
    kept = {c.id for c in result.comments}
    skipped = set(result.parent_texts) - kept
    assert any(c.parent_id in skipped for c in result.comments)  # a reply to an own/deleted comment
    assert "[deleted]" in result.parent_texts.values()
    assert "[hidden by post author]" in result.parent_texts.values()
    assert all(c.author != "maya_writes" for c in result.comments)
    assert all(COMMENT_ID_RE.match(c.id) for c in result.comments)


def test_bundled_sample_has_real_shapes(tmp_path: Path) -> None:
    """Forem's shapes: base-26 id_codes (0-9, a-p), last_comment_at on every article, no comment url;
    3 articles, 29 comments, 23 of them someone else's and visible."""
    data = json.loads(bundled_sample().read_text(encoding="utf-8"))

    def walk(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [n for node in nodes for n in (node, *walk(node["children"]))]

    nodes = [n for article in data["articles"] for n in walk(article["comments"])]
    assert len(data["articles"]) == 3 and len(nodes) == 29
    assert all(re.fullmatch(r"[0-9a-p]+", n["id_code"]) for n in nodes)
    assert all("url" not in n for n in nodes)
    result = read_export(bundled_sample(), _settings(tmp_path))
    assert all(a.last_comment_at is not None for a in result.articles) and len(result.comments) == 23


def test_bundled_sample_reports_the_authors_replies(tmp_path: Path) -> None:
    """maya_writes answered four comments directly; each is reported with her reply's time."""
    result = read_export(bundled_sample(), _settings(tmp_path))
    assert result.author_replies == {
        "4cd1": "2026-05-11T13:15:48Z", "3bkf": "2026-05-02T12:20:13Z",
        "3bn2": "2026-05-02T16:41:09Z", "2ab4k": "2026-04-21T10:02:51Z",
    }


def test_bundled_sample_keeps_own_replies_when_configured(tmp_path: Path) -> None:
    """include_own_comments brings the author's replies back."""
    result = read_export(bundled_sample(), _settings(tmp_path, include_own_comments=True))
    assert any(c.author == "maya_writes" for c in result.comments)


# --- flattening and skipping ----------------------------------------------------------------


def test_nested_threads_flatten_in_order_with_parent_ids(tmp_path: Path) -> None:
    """Pre-order: a parent comes before its replies, and each reply names its parent."""
    thread = [_comment("a1", children=[_comment("b1", children=[_comment("c1")]), _comment("b2")]), _comment("a2")]
    result = read_export(_export(tmp_path, thread), _settings(tmp_path))
    assert [(c.id, c.parent_id) for c in result.comments] == [
        ("a1", None), ("b1", "a1"), ("c1", "b1"), ("b2", "a1"), ("a2", None)
    ]


def test_comment_fields_map_to_the_inbox_comment(tmp_path: Path) -> None:
    """id, article, author, text and a permalink built from the article's host."""
    path = _export(tmp_path, [_comment("3bkf", text="Why &amp; how?")], url="https://forem.example/maya/x-1")
    (comment,) = read_export(path, _settings(tmp_path)).comments
    assert comment.model_dump() == {
        "id": "3bkf", "article_id": 1201, "article_title": "Token buckets",
        "article_url": "https://forem.example/maya/x-1", "parent_id": None, "author": "priyan",
        "created_at": "2026-05-14T09:12:44Z", "text": "Why & how?",
        "url": "https://forem.example/priyan/comment/3bkf",
    }


def test_a_url_in_the_payload_is_used_as_given(tmp_path: Path) -> None:
    """An explicit comment url wins over the built permalink."""
    path = _export(tmp_path, [_comment("3bkf", url="https://dev.to/priyan/comment/3bkf?x=1")])
    assert read_export(path, _settings(tmp_path)).comments[0].url == "https://dev.to/priyan/comment/3bkf?x=1"


def test_deleted_hidden_and_empty_user_comments_are_skipped_but_their_replies_kept(tmp_path: Path) -> None:
    """Skipped comments produce no rejection; replies to them still point at them."""
    thread = [
        {**_comment("del1", text="[deleted]"), "user": {}, "children": [_comment("r1")]},
        {**_comment("hid1", text="[hidden by post author]"), "children": [_comment("r2")]},
        {**_comment("gone1", text="from a deleted account"), "user": {"username": ""}},
        {**_comment("gone2"), "user": None},
    ]
    result = read_export(_export(tmp_path, thread), _settings(tmp_path))
    assert [(c.id, c.parent_id) for c in result.comments] == [("r1", "del1"), ("r2", "hid1")]
    assert result.rejected == []


def test_own_comments_are_skipped_but_kept_as_parent_text(tmp_path: Path) -> None:
    """The author's reply is not a comment to triage, but a reply to it can quote it."""
    thread = [_comment("q1", children=[_comment("own1", username="Maya", text="Thanks!", children=[_comment("q2")])])]
    result = read_export(_export(tmp_path, thread), _settings(tmp_path))
    assert [(c.id, c.parent_id) for c in result.comments] == [("q1", None), ("q2", "own1")]
    assert result.parent_texts["own1"] == "Thanks!"


def test_author_replies_count_direct_replies_only_the_earliest(tmp_path: Path) -> None:
    """The author's reply answers its parent, not the comments above it; two replies: the first."""
    thread = [_comment("q1", children=[
        _comment("own1", username="maya", created_at="2026-05-15T10:00:00Z", children=[
            _comment("q2", children=[_comment("own3", username="MAYA", created_at="2026-05-16T10:00:00Z")])]),
        _comment("own2", username="maya", created_at="2026-05-15T09:00:00+00:00"),
    ]), _comment("q3")]
    result = read_export(_export(tmp_path, thread), _settings(tmp_path))
    assert result.author_replies == {"q1": "2026-05-15T09:00:00+00:00", "q2": "2026-05-16T10:00:00Z"}
    assert [c.id for c in result.comments] == ["q1", "q2", "q3"]


def test_own_comments_fall_back_to_the_configured_username(tmp_path: Path) -> None:
    """Without a username in the export, DEVTO_USERNAME names the author."""
    path = _export(tmp_path, [_comment("own1", username="maya"), _comment("q1")], username=None)
    result = read_export(path, _settings(tmp_path, devto_username="maya"))
    assert [c.id for c in result.comments] == ["q1"]


def test_read_export_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading an export creates no file anywhere under the temp dir (not even the data dir)."""
    path = _export(tmp_path, [_comment("ok1"), _comment("../../etc")])
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    read_export(path, _settings(tmp_path))
    assert _tree(tmp_path) == before


# --- whole-file problems ---------------------------------------------------------------------


def test_missing_export_file_is_a_usage_error(tmp_path: Path) -> None:
    """Exit 2 and a message naming the path."""
    with pytest.raises(UsageError, match="does not exist") as info:
        read_export(tmp_path / "nope.json", _settings(tmp_path))
    assert exit_code_for(info.value) == 2 and "nope.json" in str(info.value)


def test_export_that_is_not_json_is_a_usage_error(tmp_path: Path) -> None:
    """Invalid JSON in the whole file stops with exit 2."""
    path = tmp_path / "export.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_export(path, _settings(tmp_path))


@pytest.mark.parametrize("data", [[], {"articles": {}}, {"comments": []}, "articles"])
def test_export_with_the_wrong_top_level_shape_is_a_usage_error(tmp_path: Path, data: Any) -> None:
    """Anything but an object with an articles list is refused, with the expected shape shown."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UsageError, match="Forem-format export"):
        read_export(path, _settings(tmp_path))


# --- per-item rejections ----------------------------------------------------------------------


def test_path_traversal_id_is_rejected_and_its_replies_kept(tmp_path: Path) -> None:
    """`../../etc` never becomes a comment; the message names the item; good siblings go through."""
    thread = [_comment("ok1"), _comment("../../etc", children=[_comment("ok2")]), _comment("ok3")]
    result = read_export(_export(tmp_path, thread), _settings(tmp_path))
    assert [(c.id, c.parent_id) for c in result.comments] == [("ok1", None), ("ok2", None), ("ok3", None)]
    (rejection,) = result.rejected
    assert "'../../etc'" in rejection.message and "id_code" in rejection.message
    assert rejection.item == "article 1201, comment #2"


@pytest.mark.parametrize("bad_id", ["ABC", "a" * 17, "", 42, None, "a b", "x/y", "..", "é1"])
def test_ids_outside_the_safe_pattern_are_rejected(tmp_path: Path, bad_id: Any) -> None:
    """Anything but ^[a-z0-9]{1,16}$ is rejected; the good comment beside it still goes through."""
    result = read_export(_export(tmp_path, [_comment(bad_id), _comment("good")]), _settings(tmp_path))
    assert [c.id for c in result.comments] == ["good"]
    assert len(result.rejected) == 1 and "does not match" in result.rejected[0].message


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"created_at": None}, "created_at must be a timestamp string"),
        ({"created_at": "yesterday"}, "is not an ISO 8601 timestamp"),
        ({"body_html": 7}, "body_html must be a string"),
        ({"user": "priyan"}, "user must be an object"),
        ({"user": {"username": 5}}, "user.username must be a string"),
        ({"url": ["x"]}, "url must be a string"),
    ],
)
def test_mistyped_comment_fields_are_rejected_by_name(tmp_path: Path, patch: dict, expected: str) -> None:
    """Each bad field gives a rejection naming the comment id and the field; the sibling survives."""
    result = read_export(_export(tmp_path, [{**_comment("bad1"), **patch}, _comment("good")]), _settings(tmp_path))
    assert [c.id for c in result.comments] == ["good"]
    (rejection,) = result.rejected
    assert rejection.item == "bad1" and expected in rejection.message and "bad1" in rejection.message


@pytest.mark.parametrize("missing", ["created_at", "body_html", "user"])
def test_missing_comment_fields_are_rejected(tmp_path: Path, missing: str) -> None:
    """A comment without a required field is rejected, the rest of the payload is kept."""
    bad = _comment("bad1")
    del bad[missing]
    result = read_export(_export(tmp_path, [bad, _comment("good")]), _settings(tmp_path))
    assert [c.id for c in result.comments] == ["good"]
    assert [r.item for r in result.rejected] == ["bad1"]


def test_a_comment_that_is_not_an_object_is_rejected(tmp_path: Path) -> None:
    """A string in the comment list is named by its position."""
    result = read_export(_export(tmp_path, ["oops", _comment("good")]), _settings(tmp_path))
    assert [c.id for c in result.comments] == ["good"]
    assert result.rejected[0].item == "article 1201, comment #1"


def test_children_that_are_not_a_list_reject_only_the_replies(tmp_path: Path) -> None:
    """The comment itself is kept; the message says its replies were skipped."""
    result = read_export(_export(tmp_path, [{**_comment("top1"), "children": "nope"}]), _settings(tmp_path))
    assert [c.id for c in result.comments] == ["top1"]
    assert "children must be a list" in result.rejected[0].message


def test_duplicate_comment_ids_keep_the_first(tmp_path: Path) -> None:
    """A repeated id_code is rejected instead of producing two records for one inbox file."""
    result = read_export(_export(tmp_path, [_comment("dup1", text="one"), _comment("dup1", text="two")]),
                         _settings(tmp_path))
    assert [c.text for c in result.comments] == ["one"]
    assert "appears twice" in result.rejected[0].message


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"id": "1201"}, "id must be a positive integer"),
        ({"title": None}, "title must be a string"),
        ({"comments_count": "3"}, "comments_count must be a non-negative integer"),
        ({"comments_count": True}, "comments_count must be a non-negative integer"),
        ({"comments": {"a": 1}}, "comments must be a JSON list"),
    ],
)
def test_bad_articles_are_rejected_and_other_articles_kept(tmp_path: Path, patch: dict, expected: str) -> None:
    """A broken article is one rejection; the next article's comments still go through."""
    good = {"id": 7, "title": "Good", "url": "https://dev.to/maya/good", "comments_count": 1, "comments": [_comment("g1")]}
    bad = {"id": 1201, "title": "Bad", "url": "https://dev.to/maya/bad", "comments_count": 1,
           "comments": [_comment("b1")], **patch}
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"articles": [bad, good]}), encoding="utf-8")
    result = read_export(path, _settings(tmp_path))
    assert [c.id for c in result.comments] == ["g1"]
    assert len(result.rejected) == 1 and expected in result.rejected[0].message
    assert 1201 not in result.fetched_article_ids and 7 in result.fetched_article_ids


def test_an_article_without_comments_field_is_rejected(tmp_path: Path) -> None:
    """Missing `comments` is named in the rejection and the article is not marked fetched."""
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"articles": [{"id": 3, "title": "t", "url": "u", "comments_count": 0}]}), "utf-8")
    result = read_export(path, _settings(tmp_path))
    assert result.rejected[0].message.startswith("article 3: missing field comments")
    assert result.fetched_article_ids == set()


# --- property: any tree flattens to consistent records ---------------------------------------

_IDS = st.one_of(st.from_regex(r"[a-z0-9]{1,6}", fullmatch=True), st.sampled_from(["../x", "UP", ""]))
_NODES = st.recursive(
    st.builds(lambda i: _comment(i), _IDS),
    lambda kids: st.builds(lambda i, ch: _comment(i, children=ch), _IDS, st.lists(kids, max_size=3)),
    max_leaves=12,
)


@hsettings(max_examples=60, deadline=None)
@given(st.lists(_NODES, max_size=4))
def test_any_thread_flattens_to_safe_ids_with_known_parents(tmp_path_factory: pytest.TempPathFactory,
                                                            thread: list) -> None:
    """Every kept id is safe and unique, and every parent_id is a comment seen in the payload."""
    tmp = tmp_path_factory.mktemp("prop")
    result = read_export(_export(tmp, thread), _settings(tmp))
    ids = [c.id for c in result.comments]
    assert len(ids) == len(set(ids)) and all(COMMENT_ID_RE.match(i) for i in ids)
    assert all(c.parent_id is None or c.parent_id in result.parent_texts for c in result.comments)


def test_export_nested_past_the_recursion_limit_is_a_usage_error(tmp_path: Path) -> None:
    """JSON nested deeper than the decoder's recursion limit is refused (exit 2), not a crash."""
    path = tmp_path / "export.json"
    path.write_text('{"articles": ' + "[" * 100_000, encoding="utf-8")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_export(path, _settings(tmp_path))
