"""A round's delivery (SPEC §16.1): the news into the outbox, then every open target of every
message sent, each outcome recorded as it happens.

    enqueue(paths, targets, news, now=) -> id | None            the news as a new message
    send_pending(paths, targets, now=, seams=) -> Delivery       every open target, now
    deliver(paths, targets, news, now=, seams=) -> Delivery     both (each under locks/outbox.lock)
    send_test(targets) -> list[TestSent]                         ``watcher notify --test``
    summary(paths, targets, now) -> NotifySummary                 ``status``: read only

The order is the promise. The message file is written before the first send; a target's
acceptance is written before the next send begins. A crash (or :attr:`Seams.after_accept`, the
fault point between an acceptance and its record) can therefore cost at most one repeat of one
message to one target, and nothing a target did not accept is ever marked accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from watcher.notify import message as msg
from watcher.notify.message import News
from watcher.notify.models import OutboxMessage, TargetFate
from watcher.notify.outbox import GIVE_UP_AFTER, accepted, failed, new_id, prune
from watcher.notify.redact import redaction
from watcher.notify.send import Sent
from watcher.notify.targets import Target
from watcher.paths import Paths
from watcher.providers.redact import Redaction
from watcher.store.outbox import OutboxFiles
from watcher.util.timeutil import iso

Sender = Callable[[Target, str, Callable[[str], str], str | None, Redaction], Sent]


def _apprise_send(
    target: Target, title: str, render: Callable[[str], str], click: str | None, redact: Redaction
) -> Sent:
    from watcher.notify.send import send

    return send(target, title, render, click, redact)


@dataclass(frozen=True)
class Seams:
    """What a test hands delivery: another sender, and the points a test kills the process at —
    with the message written but not sent, and between an acceptance and its record."""

    send: Sender = _apprise_send
    before_send: Callable[[OutboxMessage, TargetFate], None] | None = None
    after_accept: Callable[[OutboxMessage, TargetFate], None] | None = None


@dataclass
class Delivery:
    """What one round's delivery did: the lines it has for stderr, and counts for the summary."""

    created: str | None = None  # the id of this round's new message, if it had news
    accepted: list[str] = field(default_factory=list)  # "<message id> → <target shown>"
    failed: list[str] = field(default_factory=list)  # one line each, redacted
    gave_up: list[str] = field(default_factory=list)  # said once, on stderr (SPEC §16.1)
    pending: int = 0  # open (message, target) pairs left for the next round


def enqueue(paths: Paths, targets: tuple[Target, ...], news: News, *, now: datetime) -> str | None:
    """Write ``news`` (less what a message already holds) as a new message for every target; its
    id, or ``None`` when there was nothing to write. Raises :class:`StateError` (exit 5) when the
    outbox cannot be read or written: nothing is sent then, and the caller keeps the news for
    the next round; :class:`LockBusy` (exit 4) when another round holds the outbox past its wait."""
    if not targets or not news:
        return None
    outbox = OutboxFiles(paths)
    with outbox.locked():
        fresh = news.without({key for m in outbox.messages() for key in m.news})
        if not fresh:
            return None
        message = OutboxMessage(
            id=new_id(now),
            created_at=iso(now),
            news=fresh.keys,
            comments=fresh.comments,
            lines=fresh.lines,
            waiting=fresh.waiting,
            targets=[TargetFate(target=t.id, shown=t.shown) for t in targets],
        )
        outbox.save(message)  # from here the news cannot be lost
        return message.id


def send_pending(
    paths: Paths, targets: tuple[Target, ...], *, now: datetime, seams: Seams | None = None
) -> Delivery:
    """Send every open (message, target) pair, recording each outcome before the next send."""
    seams = seams or Seams()
    redact = redaction(targets)
    outbox = OutboxFiles(paths)
    result = Delivery()
    if not paths.outbox.is_dir():
        return result
    with outbox.locked():
        messages = prune(outbox, outbox.messages(), now)
        by_id = {t.id: t for t in targets}
        for message in messages:
            if not message.done:
                _send_open(outbox, message, by_id, redact, now, seams, result)
    return result


def deliver(
    paths: Paths,
    targets: tuple[Target, ...],
    news: News,
    *,
    now: datetime,
    seams: Seams | None = None,
) -> Delivery:
    """:func:`enqueue` then :func:`send_pending`: a round's whole delivery."""
    created = enqueue(paths, targets, news, now=now)
    result = send_pending(paths, targets, now=now, seams=seams)
    result.created = created
    return result


def _send_open(
    outbox: OutboxFiles,
    message: OutboxMessage,
    by_id: dict[str, Target],
    redact: Redaction,
    now: datetime,
    seams: Seams,
    result: Delivery,
) -> None:
    news = News(comments=message.comments, lines=message.lines, waiting=message.waiting)
    title = msg.title(news)
    click = msg.click(news)
    for index, fate in enumerate(message.targets):
        if not fate.open:
            continue
        target = by_id.get(fate.target)
        if target is None:
            # The target left WATCHER_NOTIFY: nothing can send to it. Retried until given up, so
            # putting the URL back within the day still delivers.
            sent = Sent(False, "no longer in WATCHER_NOTIFY")
        else:
            if seams.before_send is not None:
                seams.before_send(message, fate)
            sent = seams.send(target, title, _renderer(news, message.id), click, redact)
        if sent.accepted:
            if seams.after_accept is not None:
                seams.after_accept(message, fate)
            message.targets[index] = accepted(fate, now)
            outbox.save(message)  # before the next send: a crash repeats at most this one
            result.accepted.append(f"{message.id} → {fate.shown}")
            continue
        fate = message.targets[index] = failed(fate, now, sent.error or "not accepted")
        outbox.save(message)
        if fate.gave_up_at is not None:
            result.gave_up.append(gave_up_line(message, fate))
            continue
        result.pending += 1
        if fate.attempts == 1:  # said once; later rounds retry quietly until they give up
            result.failed.append(
                f"watcher: notification {message.id} to {fate.shown} failed "
                f"({fate.last_error}) — later rounds try again for 24 h; "
                "`watcher notify --test` tries the target now"
            )


def _renderer(news: News, message_id: str) -> Callable[[str], str]:
    return lambda fmt: msg.body(news, fmt, message_id)


def gave_up_line(message: OutboxMessage, fate: TargetFate) -> str:
    hours = int(GIVE_UP_AFTER.total_seconds() // 3600)
    return (
        f"watcher: gave up notification {message.id} to {fate.shown} after {hours} h of failures "
        f"({fate.last_error}) — `watcher notify --test` tries the target now; `watcher inbox` "
        "lists what it carried"
    )


@dataclass(frozen=True)
class TestSent:
    target: str  # shown
    accepted: bool
    error: str | None


def send_test(targets: tuple[Target, ...], *, seams: Seams | None = None) -> list[TestSent]:
    """``watcher notify --test``: a short message to each target now; nothing is written."""
    seams = seams or Seams()
    redact = redaction(targets)
    news = News(lines=["This is a test from devto-watcher: notifications reach you here."])
    out = []
    for target in targets:
        sent = seams.send(
            target,
            "devto-watcher: test",
            lambda fmt: msg.body(news, fmt, "test"),
            None,
            redact,
        )
        out.append(TestSent(target.shown, sent.accepted, sent.error))
    return out


@dataclass(frozen=True)
class NotifySummary:
    """What ``status`` shows of notifications (SPEC §16.1)."""

    targets: list[str]
    last_delivery: str | None  # ISO time, UTC
    pending: int  # open (message, target) pairs
    gave_up: list[str]  # one line each


def summary(paths: Paths, targets: tuple[Target, ...]) -> NotifySummary:
    """Read only: no lock, no write. A corrupt outbox file is quarantined by the read (exit 5)."""
    messages = OutboxFiles(paths).messages()
    accepted_at = [f.accepted_at for m in messages for f in m.targets if f.accepted_at]
    return NotifySummary(
        targets=[t.shown for t in targets],
        last_delivery=max(accepted_at) if accepted_at else None,
        pending=sum(1 for m in messages for f in m.targets if f.open),
        gave_up=[gave_up_line(m, f) for m in messages for f in m.targets if f.gave_up_at],
    )
