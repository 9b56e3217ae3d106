"""One message per round (SPEC §16.1): what ``watcher cron`` found, put so a person can act from
their phone, and safe in whatever format the target renders.

    news_of(result, store, now) -> News          the round's news: the comments ``inbox --new``
                                                 lists, the named no-verdict comments and the
                                                 trouble lines cron says (§15.3), each with its key
    title(news) -> str                           ``devto-watcher: 2 comments need a reply``
    body(news, fmt, message_id) -> str           text, markdown or html
    click(news) -> str | None                    the first comment's link (ntfy's click action)

Everything in a message that someone else wrote — the comment, its author's name, the article's
title, the model's summary — is shown, never obeyed. It is one line (a newline would start a
heading or a quote of its own), its control and bidi characters are visible (§15.5,
:func:`watcher.util.visible.visible`), ``@`` is the full-width ``＠`` (no service turns it into a
mention: ``@everyone`` on Discord, ``@channel`` on Slack), and for a markdown target every
punctuation character is backslash-escaped, for an html one every ``<&>"'`` is an entity — so a
comment cannot forge a link, a heading, a mention or a tag. The only links are the comments' own
dev.to addresses, http(s) only. ``tests/test_notify_message.py`` tries each.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from watcher.notify.models import NewsComment
from watcher.util.visible import visible

if TYPE_CHECKING:
    from watcher.commands.results import CronResult
    from watcher.models import InboxRecord
    from watcher.store import Store

# SPEC §16.1: the first 200 characters of the comment's own text; ten comments, then "and N more".
EXCERPT_CHARS = 200
SHOWN_COMMENTS = 10
# CommonMark's escapable characters: every ASCII punctuation character.
_MARKDOWN_SPECIAL = re.compile(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")
_FORMATS = ("text", "markdown", "html")


@dataclass
class News:
    """A round's news and the key of each piece (what makes it the same news in another round)."""

    comments: list[NewsComment] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # named no-verdict comments, then trouble
    line_keys: list[str] = field(default_factory=list)  # one per line

    def __bool__(self) -> bool:
        return bool(self.comments or self.lines)

    @property
    def keys(self) -> list[str]:
        return [f"comment:{c.id}" for c in self.comments] + self.line_keys

    def without(self, known: set[str]) -> News:
        """This news less what ``known`` already holds (news already in an outbox message)."""
        lines = [(k, line) for k, line in zip(self.line_keys, self.lines, strict=True)]
        kept = [(k, line) for k, line in lines if k not in known]
        return News(
            comments=[c for c in self.comments if f"comment:{c.id}" not in known],
            lines=[line for _k, line in kept],
            line_keys=[k for k, _line in kept],
        )


def news_of(result: CronResult, store: Store | None, day: str) -> News:
    """The news in a cron round's result: what cron prints, each piece keyed.

    ``day`` (``YYYY-MM-DD``) is part of a trouble line's key: cron says a lasting problem again
    a day later (§15.3), and that repeat is news again."""
    news = News()
    for entry in result.inbox.comments if result.inbox is not None else []:
        verdict = entry.verdict
        record = _record(store, entry.id)
        text = record.comment.text if record is not None else ""
        news.comments.append(
            NewsComment(
                id=entry.id,
                priority=verdict.priority if verdict else "normal",
                category=verdict.category if verdict else "other",
                author=entry.author,
                article=entry.article,
                summary=verdict.summary if verdict else (entry.hint or ""),
                excerpt=text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else ""),
                url=entry.url if entry.url.startswith(("https://", "http://")) else "",
            )
        )
    for named in result.named:
        if named.said:
            news.lines.append(named.line)
            news.line_keys.append(f"named:{named.state}:{named.id}")
    for problem in result.problems:
        if problem.said:
            news.lines.append(problem.line)
            news.line_keys.append(f"trouble:{problem.key}:{problem.since}:{day}")
    return news


def _record(store: Store | None, comment_id: str) -> InboxRecord | None:
    from watcher.errors import StateError

    if store is None:
        return None
    try:
        return store.load_record(comment_id)
    except StateError:
        return None  # the message goes out without the excerpt rather than not at all


def safe(text: str, fmt: str) -> str:
    """Outside text as one harmless line in ``fmt`` (see the module's docstring)."""
    text = visible(text, one_line=True).replace("@", "＠")
    if fmt == "html":
        return html.escape(text, quote=True)
    if fmt == "markdown":
        return _MARKDOWN_SPECIAL.sub(r"\\\g<0>", text)
    return text


def title(news: News) -> str:
    count = len(news.comments)
    if count == 0:
        return "devto-watcher: something needs you"
    return f"devto-watcher: {count} comment{'s need' if count != 1 else ' needs'} a reply"


def click(news: News) -> str | None:
    """The link a tap opens (ntfy's click action): the first comment's."""
    return next((c.url for c in news.comments if c.url), None)


def body(news: News, fmt: str, message_id: str) -> str:
    """The message in ``fmt`` (text, markdown or html), ending with its id: a message a crash
    made a target receive twice is visibly the same message (SPEC §16.1)."""
    if fmt not in _FORMATS:
        fmt = "text"
    blocks: list[list[str]] = []
    for comment in news.comments[:SHOWN_COMMENTS]:
        blocks.append(_comment_lines(comment, fmt))
    more = len(news.comments) - SHOWN_COMMENTS
    if more > 0:
        blocks.append([f"and {more} more — `watcher inbox` lists them"])
    if news.lines:
        blocks.append([safe(line, fmt) for line in news.lines])
    blocks.append([f"message {message_id} · devto-watcher"])
    if fmt == "html":
        return "<br>\n<br>\n".join("<br>\n".join(block) for block in blocks)
    if fmt == "markdown":
        return "\n\n".join("  \n".join(block) for block in blocks)
    return "\n\n".join("\n".join(block) for block in blocks)


def _comment_lines(comment: NewsComment, fmt: str) -> list[str]:
    head = (
        f"[{safe(comment.priority, fmt)}] {safe(comment.category, fmt)} — "
        f"{safe('@' + comment.author, fmt)} on “{safe(comment.article, fmt)}”"
    )
    lines = [head]
    if comment.summary:
        lines.append(safe(comment.summary, fmt))
    if comment.excerpt:
        lines.append(f"“{safe(comment.excerpt, fmt)}”")
    if comment.url:
        lines.append(_link(comment.url, fmt))
    return lines


def _link(url: str, fmt: str) -> str:
    shown = visible(url, one_line=True)
    if fmt == "html":
        quoted = html.escape(shown, quote=True)
        return f'<a href="{quoted}">{quoted}</a>'
    if fmt == "markdown":
        return f"<{shown.replace('>', '%3E').replace('<', '%3C').replace(' ', '%20')}>"
    return shown
