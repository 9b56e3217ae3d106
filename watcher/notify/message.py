"""One message per round (SPEC §16.1): what ``watcher cron`` found, put so a person can act from
their phone, and safe in whatever format the target renders.

    news_of(result, day) -> News                 the round's news: the comments ``inbox --new``
                                                 lists, the named no-verdict comments and the
                                                 trouble lines cron says (§15.3), each with its key
    waiting(result) -> int                       the comments the round left for the next ones
    excerpt(text) -> str                         the start of a comment's own text
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

# SPEC §16.1: the first 200 characters of the comment's own text; ten comments, then "and N more".
EXCERPT_CHARS = 200
SHOWN_COMMENTS = 10
# A comment whose verdict is of its new text (SPEC §15.2); cron's stdout says it the same way.
EDITED = "edited on dev.to, judged again"
# CommonMark's escapable characters: every ASCII punctuation character.
_MARKDOWN_SPECIAL = re.compile(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")
_FORMATS = ("text", "markdown", "html")


@dataclass
class News:
    """A round's news and the key of each piece (what makes it the same news in another round)."""

    comments: list[NewsComment] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # named no-verdict comments, then trouble
    line_keys: list[str] = field(default_factory=list)  # one per line
    # Comments not judged yet (the --limit reached, or a stop): said after the comments, never
    # news by itself — the next rounds judge them and list what needs a reply.
    waiting: int = 0

    def __bool__(self) -> bool:
        return bool(self.comments or self.lines)

    @property
    def keys(self) -> list[str]:
        return [_key(c) for c in self.comments] + self.line_keys

    def without(self, known: set[str]) -> News:
        """This news less what ``known`` already holds (news already in an outbox message)."""
        lines = [(k, line) for k, line in zip(self.line_keys, self.lines, strict=True)]
        kept = [(k, line) for k, line in lines if k not in known]
        comments = [c for c in self.comments if _key(c) not in known]
        return News(
            comments=comments,
            lines=[line for _k, line in kept],
            line_keys=[k for k, _line in kept],
            waiting=self.waiting if comments else 0,
        )


def _key(comment: NewsComment) -> str:
    """A comment judged again after an edit is news again (``inbox --new`` lists it again)."""
    return f"comment:{comment.id}" + (f":edit:{comment.edited}" if comment.edited else "")


def excerpt(text: str) -> str:
    """The start of a comment's own text (SPEC §16.1), raw: each view makes it safe to show."""
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


def waiting(result: CronResult) -> int:
    """The comments a round's scan and recheck left for the next rounds: past the ``--limit``
    (``remaining``), or not started because the batch stopped (``not_started``)."""
    left = 0
    for batch in (result.scan, result.recheck):
        if batch is not None:
            left += batch.remaining + sum(1 for i in batch.items if i.outcome == "not_started")
    return left


def news_of(result: CronResult, day: str) -> News:
    """The news in a cron round's result: what cron prints, each piece keyed.

    ``day`` (``YYYY-MM-DD``) is part of a trouble line's key: cron says a lasting problem again
    a day later (§15.3), and that repeat is news again."""
    news = News(waiting=waiting(result))
    for entry in result.inbox.comments if result.inbox is not None else []:
        verdict = entry.verdict
        news.comments.append(
            NewsComment(
                id=entry.id,
                priority=verdict.priority if verdict else "normal",
                category=verdict.category if verdict else "other",
                author=entry.author,
                article=entry.article,
                summary=verdict.summary if verdict else "",
                excerpt=entry.excerpt or "",
                url=entry.url if entry.url.startswith(("https://", "http://")) else "",
                edited=entry.edited or 0,
                hint=entry.hint or "",
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
    if news.waiting and news.comments:
        blocks.append([waiting_line(news.waiting)])
    if news.lines:
        blocks.append([safe(line, fmt) for line in news.lines])
    blocks.append([f"message {message_id} · devto-watcher"])
    if fmt == "html":
        return "<br>\n<br>\n".join("<br>\n".join(block) for block in blocks)
    if fmt == "markdown":
        return "\n\n".join("  \n".join(block) for block in blocks)
    return "\n\n".join("\n".join(block) for block in blocks)


def waiting_line(count: int) -> str:
    """What the comments listed are not all of (cron's stdout says it too)."""
    return f"and {count} more waiting for the next rounds (not judged yet)"


def _comment_lines(comment: NewsComment, fmt: str) -> list[str]:
    head = (
        f"[{safe(comment.priority, fmt)}] {safe(comment.category, fmt)} — "
        f"{safe('@' + comment.author, fmt)} on “{safe(comment.article, fmt)}”"
    )
    if comment.edited:
        head += f" · {EDITED}"
    lines = [head]
    if comment.summary:
        lines.append(safe(comment.summary, fmt))
    if comment.hint:
        lines.append(safe(comment.hint, fmt))
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
