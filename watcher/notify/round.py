"""A cron round's news, delivered (SPEC §16.1): what ``watcher cron`` and ``watch`` call once the
round has found its news, when ``WATCHER_NOTIFY`` is set.

The order keeps news from being lost between "listed" and "sent". The round lists the new comments
without marking them listed; here the news goes into an outbox message first, and only then are
the comments marked listed (``claim``). A crash before the message is written leaves them unlisted,
so the next round finds them again; a crash after it finds them again too, and the outbox, which
holds their keys, keeps them out of a second message. When the outbox cannot be written the
comments stay unlisted (the next round tries again) and the round ends with exit 5.

What delivery has to say joins the round's problem lines on stderr: a target's first failure of a
message (later rounds retry it quietly for 24 h), and its giving up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from watcher.commands.results import CronProblemResult, CronResult
from watcher.errors import WatcherError
from watcher.notify.deliver import Seams, enqueue, send_pending
from watcher.notify.message import news_of
from watcher.notify.targets import Target
from watcher.paths import Paths
from watcher.util.timeutil import iso


def deliver_round(
    result: CronResult,
    *,
    paths: Paths,
    targets: tuple[Target, ...],
    claim: Callable[[Iterable[str]], list[str]],
    now: datetime,
    seams: Seams | None = None,
) -> WatcherError | None:
    """Put the round's news in the outbox, mark its comments listed, send what is pending; the
    error that stopped it (the outbox's), else ``None``. ``result`` is updated in place: its
    listing keeps only the comments this round marked listed, its problems gain delivery's lines."""
    news = news_of(result, iso(now)[:10])
    try:
        enqueue(paths, targets, news, now=now)
    except WatcherError as exc:
        # The comments stay unlisted: the next round lists them again and retries the outbox.
        result.problems.append(_line("outbox", exc.kind, f"watcher cron: notify stopped: {exc}"))
        return exc
    inbox = result.inbox
    if inbox is not None and inbox.comments:
        claimed = set(claim([c.id for c in inbox.comments]))
        inbox.comments = [c for c in inbox.comments if c.id in claimed]
        inbox.count = len(inbox.comments)
    try:
        delivery = send_pending(paths, targets, now=now, seams=seams)
    except WatcherError as exc:
        result.problems.append(_line("outbox", exc.kind, f"watcher cron: notify stopped: {exc}"))
        return exc
    for line in [*delivery.failed, *delivery.gave_up]:
        result.problems.append(_line("notify", "notify", line))
    return None


def _line(key: str, kind: str, line: str) -> CronProblemResult:
    from watcher.util.timeutil import utcnow

    return CronProblemResult(
        key=key, step="notify", kind=kind, line=line, said=True, since=iso(utcnow())
    )
