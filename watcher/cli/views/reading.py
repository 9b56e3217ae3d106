"""The views of the commands that read the state: status, inbox, show, articles, mark, cron
(``view(result, screen)``, :mod:`watcher.commands.screen`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from watcher.commands.results import (
    ArticlesResult,
    CommentRecord,
    CronResult,
    InboxEntry,
    InboxResult,
    ItemVerdict,
    MarkResult,
    NotifyStatus,
    StatusResult,
)
from watcher.commands.screen import Screen, as_written, one_line
from watcher.models import Verdict
from watcher.notify.message import EDITED, waiting, waiting_line

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

HIGH = "bold red"  # how a high-priority comment stands out on a terminal


def said(verdict: ItemVerdict | Verdict) -> str:
    """A verdict on one line: whether it needs a reply, its category, priority and summary."""
    need = "needs a reply" if verdict.needs_reply else "no reply needed"
    summary = offline_label(verdict.summary)[1]
    return f"{need} · {verdict.category} · {verdict.priority}: {one_line(summary)}"


def status(doc: StatusResult, screen: Screen) -> None:
    s = doc.settings
    provider = f"{s.provider} ({s.model})" + (
        " — offline heuristic, not a language model" if s.offline else ""
    )
    if s.provider == "agent":
        provider += (
            " — the agent you work with gives the verdicts (MCP claim/submit, or `watcher claim`)"
        )
    if s.provider_defaulted:  # the offline stand-in is no choice of the person's (SPEC §16.3)
        provider = "none chosen — set WATCHER_PROVIDER (`watcher check` says how)"
    screen.out.print(f"data dir:  {s.data_dir}")
    screen.out.print(f"provider:  {provider}")
    if doc.offline_quality:
        screen.out.print(f"quality:   {doc.offline_quality}")
    if s.api_key_from:
        screen.out.print(f"key:       from {s.api_key_from} (never shown)")
    screen.out.print(f"comments:  {doc.comments} on {doc.articles} article(s)")
    screen.out.print("states:    " + ", ".join(f"{k} {v}" for k, v in doc.states.items()))
    screen.out.print("triage:    " + ", ".join(f"{k} {v}" for k, v in doc.triage.items()))
    screen.out.print(f"cooldown:  {'until ' + doc.cooldown.until if doc.cooldown else 'none'}")
    breaker = doc.breaker
    if breaker:
        screen.out.print(
            f"breaker:   OPEN since {breaker.since} ({breaker.kind}): {one_line(breaker.message)} "
            "— "
            "no model call until a free probe passes; `watcher check` tests it now"
        )
    claimed = doc.claimed
    if claimed.in_flight or claimed.lease_ended:
        screen.out.print(
            f"claimed:   {claimed.in_flight} in flight with an agent (first lease ends "
            f"{claimed.earliest_lease_until or '-'}), {claimed.lease_ended} lease(s) ended without "
            "a "
            "submit (the next run closes them as interrupted)"
        )
    for m in doc.this_month or ():
        cost = f" · ${m.dollars:.2f}" if m.dollars is not None else ""
        screen.out.print(
            f"month:     {m.provider} {one_line(m.model)}: {m.calls} call(s), "
            f"{m.input_tokens:,} in, {m.output_tokens:,} out{cost} (`watcher usage`)"
        )
    if doc.monthly_tokens is not None:
        tokens = doc.monthly_tokens
        used = f"{tokens.used or 0:,}"  # no tally yet: no call of a model has been counted
        screen.out.print(
            f"budget:    {used} of {tokens.budget:,} tokens used in {tokens.month} "
            "(WATCHER_MONTHLY_TOKENS)"
        )
    counts = doc.signals.counts
    screen.out.print(
        "signals:   "
        + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none counted yet")
        + " (what the runs recorded; `watcher signals -h`)"
    )
    if doc.signals.warning:
        screen.out.print(f"warning:   {doc.signals.warning}")
    if doc.notify is not None:
        _notify_status(doc.notify, screen)


def _notify_status(notify: NotifyStatus, screen: Screen) -> None:
    """WATCHER_NOTIFY's targets (never their URLs), the last delivery, what waits (SPEC §16.1)."""
    from watcher.util.timeutil import local_minutes

    last = local_minutes(notify.last_delivery) if notify.last_delivery else "none yet"
    pending = f", {notify.pending} waiting to be sent" if notify.pending else ""
    screen.out.print(f"notify:    {', '.join(notify.targets)} — last delivery {last}{pending}")
    for line in notify.gave_up:
        screen.out.print(f"           {one_line(line)}")
    if notify.warning:
        screen.out.print(f"warning:   {one_line(notify.warning)}")


# The offline classifier's summary: its label (the same on every comment), the category again,
# then the start of the comment (watcher/providers/offline.py, _summary).
_OFFLINE = re.compile(r"\[offline\] (heuristic guess \([^)]*\)): [a-z_]+(?:: )?(.*)", re.DOTALL)


def offline_label(summary: str) -> tuple[str | None, str]:
    """An offline verdict's summary without its label and category (said once per view, SPEC
    §16.4): ``(label, rest)``; ``(None, summary)`` for any other provider's."""
    found = _OFFLINE.fullmatch(summary)
    if found is None:
        return None, summary
    return found.group(1), found.group(2).strip() or "(empty comment)"


def offline_said(verdicts: Iterable[ItemVerdict | Verdict | None], screen: Screen) -> None:
    """The offline label, once, beside the verdicts it applies to."""
    labels = {offline_label(v.summary)[0] for v in verdicts if v}
    for label in sorted(x for x in labels if x):
        screen.out.print(f"offline verdicts are a {label}")


def inbox(doc: InboxResult, screen: Screen) -> None:
    waiting = {k: v for k, v in doc.unresolved.items() if v}
    if doc.new and not doc.comments:
        return  # cron mails only what is new: nothing new, no output, no mail
    if not doc.comments:
        screen.out.print(
            "Nothing needs a reply." if not doc.all else "No comments yet: run `watcher scan`."
        )
    if waiting and not doc.all and not doc.new:
        # "Nothing needs a reply" must never hide comments that have no verdict (SPEC §13).
        states = ", ".join(f"{n} {state}" for state, n in waiting.items())
        screen.out.print(
            f"Not yet checked: {states} — `watcher inbox --all` lists them with the reason."
        )
    if not doc.comments:
        return
    offline_said((r.verdict for r in doc.comments), screen)
    for row in doc.comments:
        if doc.oneline:
            screen.out.print(_oneline(row, screen.out.width), soft_wrap=True)
        else:
            _entry(row, screen, every=doc.all)
    screen.out.print(
        f"{doc.count} comment(s)"
        + (
            ""
            if doc.all
            else " need a reply · `watcher show ID` for the "
            "whole text · `watcher mark ID replied` (or ignored) when done"
        )
    )


def _entry(row: InboxEntry, screen: Screen, *, every: bool) -> None:
    """One comment of the listing: its line, the verdict, the start of its text (the --new
    listing cron mails, SPEC §16.1), the hint, the link."""
    from rich.text import Text

    v = row.verdict
    rest = f"  {v.category if v else '-':<10}  @{one_line(row.author)}"
    if row.answers_you:
        rest += "  answers your comment"
    if row.edited:
        rest += f"  {EDITED}"
    if every:
        rest += f"  [{row.state}, {row.triage}]"
        if row.verdict_by:
            rest += f"  verdict by {row.verdict_by}"
    priority = v.priority if v else "-"
    screen.out.print(
        Text.assemble(f"{row.id}  ", (f"{priority:<6}", HIGH if priority == "high" else ""), rest)
    )
    summary = offline_label(v.summary)[1] if v else "(no verdict yet)"
    screen.out.print(f"    {one_line(summary)}")
    if row.excerpt:
        screen.out.print(f"    “{one_line(row.excerpt)}”")
    if v and v.reply_hint:
        screen.out.print(f"    hint: {one_line(v.reply_hint)}")
    screen.out.print(f"    {one_line(row.url)}  (on “{one_line(row.article)}”)")
    if row.hint:
        screen.out.print(f"    {row.hint}")


def _oneline(row: InboxEntry, width: int) -> Text:
    """One comment on one line, cut to the width: id, priority, category, author, summary."""
    from rich.text import Text

    v = row.verdict
    priority = v.priority if v else "-"
    line = Text.assemble(
        f"{row.id:<6} ",
        (f"{priority:<6}", HIGH if priority == "high" else ""),
        f" {v.category if v else '-':<10} @{one_line(row.author)}: ",
        one_line(offline_label(v.summary)[1] if v else "(no verdict yet)"),
    )
    line.truncate(width, overflow="ellipsis")
    return line


def show(doc: CommentRecord, screen: Screen) -> None:
    """One comment: where it stands, what it answers, its text and verdict, then what came after."""
    from rich.text import Text

    from watcher.cli.wrap import hanging

    c = doc.comment
    screen.out.print(
        f"{c.id} by {one_line(c.author)} on “{one_line(c.article_title)}” ({c.created_at})"
    )
    screen.out.print(one_line(c.url))
    screen.out.print(
        f"state: {doc.state} · triage: {doc.triage} · attempts: {len(doc.attempts)}/{doc.cap}"
    )
    if doc.gone:
        screen.out.print(
            f"{doc.gone.kind} on dev.to: {one_line(doc.gone.why)} (first seen so at "
            f"{doc.gone.seen_at}); "
            "kept here, never called again"
        )
    if doc.parent:
        p = doc.parent
        who = "you" if p.yours else (f"@{one_line(p.author)}" if p.author else "someone")
        screen.out.print(
            f"in reply to {p.id} by {who}" + (" — it answers your comment" if p.yours else "") + ":"
        )
        for line in (p.excerpt or "(its text is not known here)").splitlines():
            screen.out.print(f"  > {one_line(line)}")
    screen.out.print("")
    # The comment as written: its lines wrap under themselves, as prose does.
    screen.out.print(hanging(as_written(c.text).plain, 0))
    if doc.verdict:
        v = doc.verdict
        screen.out.print("")
        by = _verdict_by(doc)
        screen.out.print(
            Text.assemble(
                f"verdict: needs_reply={v.needs_reply} {v.category} ",
                (v.priority, HIGH if v.priority == "high" else ""),
                f": {one_line(offline_label(v.summary)[1])}{by}",
            )
        )
        if v.reply_hint:
            screen.out.print(f"reply hint: {one_line(v.reply_hint)}")
    draft = doc.draft
    if draft is not None and draft.text is not None:
        offline = draft.provider == "offline"
        by = "an offline template: no model wrote it" if offline else one_line(draft.model)
        screen.out.print(f"\nreply draft {draft.n} ({by}):")
        for line in draft.text.splitlines():
            screen.out.print(f"  | {one_line(line)}")
    _after(doc, screen)


def _verdict_by(doc: CommentRecord) -> str:
    """Who gave the verdict: the provider and model of the attempt that did (SPEC §16.4), and the
    offline classifier's label."""
    if not doc.verdict_by:
        return ""
    gave = next((a for a in reversed(doc.attempts) if a.outcome == "ok"), None)
    by = f" — verdict by {doc.verdict_by}"
    if gave is not None and gave.model:
        by += f" {one_line(gave.model)}"
    label = offline_label(doc.verdict.summary)[0] if doc.verdict else None
    return by + (f", a {label}" if label else "")


def _after(doc: CommentRecord, screen: Screen) -> None:
    """What came after the comment: your replies, its edits, the hint, every attempt."""
    if doc.replied_at:
        screen.out.print(f"you replied at {doc.replied_at} (seen on dev.to)")
    for r in doc.your_replies:
        screen.out.print(f"your reply {r.id} at {r.created_at}:")
        for line in r.excerpt.splitlines():
            screen.out.print(f"  > {one_line(line)}")
    for n, e in enumerate(doc.edits, 1):
        then_said = f"verdict then: {said(e.verdict)}" if e.verdict else "no verdict then"
        then = "judged again" if e.judged else "not judged again (you had replied or marked it)"
        screen.out.print(
            f"edit {n}, seen at {e.seen_at} after {e.attempts} attempt(s) — {then}; {then_said}; "
            "the text before:"
        )
        for line in e.text.splitlines() or [""]:
            screen.out.print(f"  | {one_line(line)}")
    if doc.hint:
        screen.out.print(doc.hint)
    for a in doc.attempts:
        what = a.outcome or (
            "reserved" + (f", claimed until {a.lease_until}" if a.lease_until else "")
        )
        if a.error:
            what += f" {a.error.kind}: {one_line(a.error.message)}"
        screen.out.print(
            f"attempt {a.n}: {a.command} via {a.entrypoint} ({a.provider}) at {a.reserved_at} → "
            f"{what}"
        )


def articles(doc: ArticlesResult, screen: Screen) -> None:
    if not doc.articles:
        screen.out.print("No articles yet: run `watcher scan`.")
        return
    for a in doc.articles:
        waiting = (
            f"{a.need_reply} need a reply, the oldest {a.oldest_waiting_days:g} days"
            if a.need_reply and a.oldest_waiting_days is not None
            else "nothing waits"
        )
        screen.out.print(
            f"{a.id}  “{one_line(a.title)}”  {a.comments} comment(s) · {waiting} · last activity "
            f"{a.last_activity or '-'}"
        )
        if a.url:
            screen.out.print(f"    {one_line(a.url)}")
    screen.out.print(f"{doc.count} article(s)")


def mark(result: MarkResult, screen: Screen) -> None:
    screen.out.print(f"{', '.join(result.ids)} marked {result.triage}")


def cron(doc: CronResult, screen: Screen) -> None:
    """Problems on stderr, then the new comments and the named ones on stdout (SPEC §15.3)."""
    # A pipe (cron's mail, a log scraper) gets each problem as one line, as it is; a person's
    # terminal gets it wrapped at word boundaries. Told by the stream itself: rich takes a pipe
    # for a terminal when FORCE_COLOR or TTY_COMPATIBLE is set (tests/test_cron.py).
    person = _isatty(screen.err)
    for problem in doc.problems:
        if problem.said:
            if person:
                screen.err.print(problem.line)
            else:
                screen.err.print(problem.line, soft_wrap=True)
    if doc.inbox is not None:
        inbox(doc.inbox, screen)
        left = waiting(doc)
        if left and doc.inbox.comments:
            screen.out.print(waiting_line(left))
    for named in doc.named:
        if named.said:
            screen.out.print(named.line)


def _isatty(console: Console) -> bool:
    try:
        return console.file.isatty()
    except ValueError:  # closed
        return False
