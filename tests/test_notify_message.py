"""The round's message (SPEC §16.1): what it says, and that a comment cannot forge anything in it."""

from __future__ import annotations

from html.parser import HTMLParser

import markdown
import pytest

from watcher.commands.results import (
    BatchResult,
    CronNamed,
    CronProblemResult,
    CronResult,
    InboxEntry,
    InboxResult,
    ItemResult,
)
from watcher.models import Verdict
from watcher.notify import message as msg
from watcher.notify.models import NewsComment

LINK = "https://dev.to/priyan/comment/3bkf"
HOSTILE = (
    "[Reply here](https://evil.example/login) ![x](https://evil.example/p.png) "
    "<https://evil.example> <a href='https://evil.example'>click</a> <img src=x onerror=alert(1)>\n"
    "# Your account is locked\n@everyone @here <!channel> <@U123> **bold** _it_ `code`\n"
    "\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ \x1b[2J \u202egnp.exe\u202c\n"
    "[Sign in][1] ![logo][1]\n\n[1]: https://evil.example/login\nAccount locked\n=====\n"
    "<https://evil.example/reset|Reset your password> <!here> *[x]: https://evil.example"
)


def _comment(text: str = HOSTILE, **over: object) -> NewsComment:
    fields: dict[str, object] = {
        "id": "3bkf",
        "priority": "high",
        "category": "question",
        "author": "priyan",
        "article": "Rust lifetimes",
        "summary": "Asks how lifetimes work.",
        "excerpt": text,
        "url": LINK,
    }
    return NewsComment.model_validate({**fields, **over})


def _hostile_everywhere() -> msg.News:
    return msg.News(
        comments=[_comment(author=HOSTILE, article=HOSTILE, summary=HOSTILE, hint=HOSTILE)],
        lines=[HOSTILE],
        line_keys=["trouble:x"],
    )


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html_text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html_text)
    return parser.tags


def test_markdown_body_renders_no_link_heading_or_tag_of_the_comment() -> None:
    """Rendered as markdown, the only link is the comment's own; no heading, image or html."""
    rendered = markdown.markdown(msg.body(_hostile_everywhere(), "markdown", "m1"))
    tags = _tags(rendered)
    assert {tag for tag, _ in tags} <= {"p", "br", "a"}
    assert [attrs.get("href") for tag, attrs in tags if tag == "a"] == [LINK]


def test_html_body_has_only_its_own_tags() -> None:
    """In html, every tag is the message's own: line breaks and the comment's link."""
    tags = _tags(msg.body(_hostile_everywhere(), "html", "m1"))
    assert {tag for tag, _ in tags} == {"br", "a"}
    assert [attrs.get("href") for tag, attrs in tags if tag == "a"] == [LINK]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_no_mention_survives(fmt: str) -> None:
    """No ``@`` of the comment's reaches a target, so no service turns it into a mention."""
    body = msg.body(_hostile_everywhere(), fmt, "m1")
    assert "@" not in body
    assert "＠everyone" in body.replace("\\", "")


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_terminal_controls_are_shown_not_obeyed(fmt: str) -> None:
    """ESC, C1 and bidi overrides arrive as visible escapes (SPEC §15.5)."""
    body = msg.body(_hostile_everywhere(), fmt, "m1")
    assert "\x1b" not in body and "\u202e" not in body
    assert "x1b" in body and "u202e" in body


def test_text_body_keeps_each_comment_on_its_own_lines() -> None:
    """A newline in the comment cannot start a line of its own (a fake heading or notice)."""
    body = msg.body(_hostile_everywhere(), "text", "m1")
    assert not any(line.startswith("#") for line in body.splitlines())
    assert "\\n# Your account is locked" in body


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_no_line_of_the_comment_starts_a_definition_or_an_underline(fmt: str) -> None:
    """A link reference definition (``[1]: URL``) or a setext underline (``=====``) needs a line
    of its own: the comment's newlines never give it one."""
    lines = msg.body(_hostile_everywhere(), fmt, "m1").replace("<br>", "\n").splitlines()
    starts = [line.lstrip("\\").lstrip() for line in lines]
    assert not any(line.startswith(("[1]", "=", "Account locked")) for line in starts), lines


def test_markdown_body_renders_no_heading_from_an_underline_or_link_from_a_reference() -> None:
    """Rendered as markdown with the reference and underline forms: no h1/h2, no link but the
    comment's own."""
    rendered = markdown.markdown(msg.body(_hostile_everywhere(), "markdown", "m1"))
    assert "<h1" not in rendered and "<h2" not in rendered and "<img" not in rendered
    assert [a.get("href") for tag, a in _tags(rendered) if tag == "a"] == [LINK]


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_a_comment_judged_again_after_an_edit_says_edited(fmt: str) -> None:
    """Its first line says "edited on dev.to, judged again"; another comment's does not."""
    news = msg.News(comments=[_comment("new text", edited=1), _comment("other", id="b")])
    body = msg.body(news, fmt, "m1")
    assert body.count(msg.EDITED) == 1
    assert body.index(msg.EDITED) < body.index("new text") < body.index("other")


def test_a_comment_judged_again_is_news_again() -> None:
    """Its key differs from the first listing's: a message that carried the first verdict does not
    keep the new one out (``inbox --new`` lists it again)."""
    first = msg.News(comments=[_comment()])
    again = msg.News(comments=[_comment(edited=1)])
    assert again.without(set(first.keys)).comments == again.comments
    assert not again.without(set(again.keys))


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_comments_left_for_the_next_rounds_follow_the_listing(fmt: str) -> None:
    """"and N more waiting for the next rounds" after the comments, past the ten shown too."""
    news = msg.News(comments=[_comment(f"text {n}", id=f"c{n}") for n in range(12)], waiting=7)
    body = msg.body(news, fmt, "m1")
    assert "and 2 more" in body and "and 7 more waiting for the next rounds" in body
    assert body.index("and 2 more") < body.index("and 7 more waiting")


def test_comments_left_for_later_are_no_news_by_themselves() -> None:
    """Without a comment to list (or with every one sent already) the count goes too."""
    sent = msg.News(comments=[_comment()], waiting=3)
    assert not msg.News(waiting=3)
    assert not sent.without(set(sent.keys))
    assert "waiting" not in msg.body(msg.News(lines=["x"], line_keys=["k"], waiting=3), "text", "m")


def test_the_hint_follows_the_summary() -> None:
    """A hint (an old verdict shown, a grant to give) is said after the verdict's summary."""
    hint = "the verdict shown is the old text's"
    body = msg.body(msg.News(comments=[_comment("t", hint=hint)]), "text", "m1")
    assert body.index("Asks how lifetimes work.") < body.index(hint)


def test_title_counts_the_comments() -> None:
    """One comment needs, several need; no comment still has a title."""
    one = msg.News(comments=[_comment()])
    three = msg.News(comments=[_comment(id=str(n)) for n in range(3)])
    assert msg.title(one) == "devto-watcher: 1 comment needs a reply"
    assert msg.title(three) == "devto-watcher: 3 comments need a reply"
    assert msg.title(msg.News(lines=["x"], line_keys=["k"])).startswith("devto-watcher: ")


def test_ten_comments_then_and_n_more() -> None:
    """Past ten comments the message says how many more."""
    news = msg.News(comments=[_comment(f"text {n}", id=f"c{n}") for n in range(13)])
    body = msg.body(news, "text", "m1")
    assert "text 9" in body and "text 10" not in body
    assert "and 3 more" in body


def test_body_names_its_message_id() -> None:
    """The message id is in the body: a repeat after a crash is visibly the same message."""
    assert "message m1x9" in msg.body(msg.News(comments=[_comment()]), "text", "m1x9")


def test_click_is_the_first_comments_link() -> None:
    """ntfy's click action opens the first comment."""
    news = msg.News(comments=[_comment(), _comment(id="b", url="https://dev.to/x/comment/b")])
    assert msg.click(news) == LINK


def _cron_result() -> CronResult:
    verdict = Verdict(
        needs_reply=True, category="bug_report", priority="high", summary="Reports a crash.",
        reply_hint="",
    )
    entry = InboxEntry(
        id="3bkf", state="done", triage="open", attempts=1, author="priyan", article="Rust",
        url=LINK, created_at="2026-12-03T09:00:00Z", verdict=verdict, verdict_by="openai",
        hint=None, excerpt=msg.excerpt("y" * 300), edited=2,
    )
    scan = BatchResult("scan", limit=1)
    scan.remaining = 4
    recheck = BatchResult("recheck", limit=1)
    recheck.items = [ItemResult("r1", "not_started"), ItemResult("r2", "verdict")]
    inbox = InboxResult(all=False, new=True, count=1, comments=[entry], unresolved={})
    return CronResult(
        scan=scan, recheck=recheck, inbox=inbox, notices=[],
        named=[
            CronNamed(id="aa1", state="exhausted", said=True, line="aa1: no verdict"),
            CronNamed(id="aa2", state="exhausted", said=False, line=""),
        ],
        problems=[
            CronProblemResult(key="provider_unavailable", step="scan", kind="x", line="down",
                              said=True, since="2026-12-03T08:00:00Z"),
            CronProblemResult(key="lock_busy", step="scan", kind="x", line="busy", said=False,
                              since="2026-12-03T08:00:00Z"),
        ],
    )


def test_news_is_what_cron_says() -> None:
    """The listed comment with its verdict, first 200 characters and edits, only the lines cron
    said, and what scan and recheck left for later (past the limit, or not started)."""
    news = msg.news_of(_cron_result(), "2026-12-03")
    (comment,) = news.comments
    assert (comment.priority, comment.category, comment.summary) == ("high", "bug_report",
                                                                     "Reports a crash.")
    assert (comment.excerpt, comment.edited) == ("y" * 200 + "…", 2)
    assert news.lines == ["aa1: no verdict", "down"]
    assert news.keys == ["comment:3bkf:edit:2", "named:exhausted:aa1",
                         "trouble:provider_unavailable:2026-12-03T08:00:00Z:2026-12-03"]
    assert news.waiting == 5


def test_an_excerpt_is_the_first_200_characters() -> None:
    """Cut at 200 characters with an ellipsis; a shorter text whole."""
    assert msg.excerpt("y" * 300) == "y" * 200 + "…"
    assert msg.excerpt("y" * 200) == "y" * 200


def test_news_already_sent_is_left_out() -> None:
    """``without`` drops the pieces whose keys a message already holds."""
    news = msg.news_of(_cron_result(), "2026-12-03")
    rest = news.without({"comment:3bkf:edit:2", "named:exhausted:aa1"})
    assert rest.comments == [] and rest.lines == ["down"]
