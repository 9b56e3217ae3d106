"""A seeded day of a dev.to account, played round by round against the fakes (SPEC §15.2).

Each round is half an hour of the account's day: first the person's marks (a few of the comments
the inbox listed, or one it did not), then what happens on dev.to (new comments and replies to
them, edits, deletions with and without replies, hiding, the author's own replies), then one round
of ``watcher cron`` (scan, recheck, the new comments) with ``WATCHER_NOTIFY`` at a real HTTP
receiver on loopback (``json://``, tests/_receivers.py), and the checks: ``inbox --json`` must list
exactly what the script knows needs a reply, no comment may have more than 3 + grants attempts (on
disk and in the call log), and every comment that needs a reply and whose verdict says so must have
reached the receiver by the end of that round, exactly once over the day (SPEC §16.1) — and
nothing else.

One provider outage (every call answered 500, the model missing from the models list) lasts one
round. The truth the script keeps, per comment: on dev.to or not, its current text (a question
needs a reply, a thanks does not), the author's latest action (a reply on dev.to, or a mark), and
whether its current text could have been judged yet (not when it arrived during the outage).

Time is the day's own: every command runs with a clock half an hour further each round (marks,
leases, cooldowns and the breaker read it), and dev.to stamps what happens in a round a minute
apart after the round's marks — so "the latest of the author's actions" is well defined.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _fakes.forem import ForemSource
from _fakes.provider import in_process_hooks
from _mirror import World
from _outage import in_process_answer
from _proc import Answer, run_main
from _receivers import HttpReceiver

from watcher.source import resolve_source
from watcher.util.timeutil import utcnow

ROUND = timedelta(minutes=30)
# A comment's own link in a message (watcher/notify/message.py): how the receiver's side tells
# which comments reached it, whatever else the message says.
COMMENT_LINK = re.compile(r"/comment/([a-z0-9]+)")


@dataclass
class Truth:
    """What the script knows of one comment."""

    n: int
    cid: str
    kind: str  # "q": a question (needs a reply), "t": thanks (does not)
    version: int = 1
    alive: bool = True
    last_action: str | None = (
        None  # "reply" (the author on dev.to), "replied", "ignored", "open" (marks)
    )
    judged: bool = False  # its current text was seen by a round the provider answered
    edits: int = 0
    has_children: bool = False

    @property
    def open(self) -> bool:
        return self.last_action in (None, "open")

    @property
    def needs_reply(self) -> bool:
        """What `watcher inbox` must list: on dev.to, open, its text judged, and either reopened by
        the person (`mark open` wins over the verdict) or a question."""
        return (
            self.alive
            and self.open
            and self.judged
            and (self.last_action == "open" or self.kind == "q")
        )


@dataclass
class DayFigures:
    rounds: int = 0
    comments: int = 0
    edits: int = 0
    deletions: int = 0
    hidden: int = 0
    author_replies: int = 0
    marks: int = 0
    tp: int = 0
    fp: int = 0
    fn: int = 0
    max_attempts: int = 0
    calls: int = 0
    messages: int = 0  # requests the notification receiver got
    notified: int = 0  # comments they carried
    seconds: float = 0.0
    mismatches: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    def line(self) -> str:
        return (
            f"day: {self.rounds} rounds, {self.comments} comments, {self.edits} edits, "
            f"{self.deletions} deletions, {self.hidden} hidden, {self.author_replies} author "
            f"replies, {self.marks} marks, {self.calls} calls, {self.messages} messages with "
            f"{self.notified} comments; precision {self.precision:.3f}, recall "
            f"{self.recall:.3f}, max attempts {self.max_attempts}; {self.seconds:.1f} s"
        )


class DayClock:
    """The day's "now": half an hour further each round, real time within it."""

    def __init__(self, start: datetime) -> None:
        self.start = start
        self.round = 0
        self._began = time.monotonic()

    def next_round(self) -> datetime:
        self.round += 1
        self._began = time.monotonic()
        return self.at()

    def at(self) -> datetime:
        return self.start + self.round * ROUND + timedelta(seconds=time.monotonic() - self._began)

    def __call__(self) -> datetime:
        return self.at()


def play_day(
    w: World,
    *,
    rounds: int,
    seed: int,
    outage_round: int,
    parallel: int = 1,
    outages: Mapping[int, str] | None = None,
) -> DayFigures:
    """Play ``rounds`` rounds of a seeded day on ``w``; the figures, with every mismatch named.

    ``outages``: round -> how the chat endpoint fails that round (tests/_outage.py's kinds), its
    models endpoint still saying yes, instead of the one 500 round; the round after one brings a
    new comment, which a half-open call may go to (SPEC §16.6: none goes to a comment the outage
    touched). ``parallel``: each round's WATCHER_PARALLEL."""
    receiver = HttpReceiver().start()
    try:
        return _play_day(
            w,
            receiver,
            rounds=rounds,
            seed=seed,
            outage_round=outage_round,
            parallel=parallel,
            outages=outages,
        )
    finally:
        receiver.stop()


def _play_day(
    w: World,
    receiver: HttpReceiver,
    *,
    rounds: int,
    seed: int,
    outage_round: int,
    parallel: int,
    outages: Mapping[int, str] | None,
) -> DayFigures:
    rng = random.Random(seed)
    figures = DayFigures()
    began = time.monotonic()
    clock = DayClock(utcnow() - rounds * ROUND)
    w.forem.step = timedelta(minutes=1)
    w.provider.label_last = True
    comments: dict[str, Truth] = {}  # label prefix -> truth
    by_cid: dict[str, Truth] = {}
    outage_calls: list[str] = []
    handle = w.provider.handle
    outage = False
    env = {
        "WATCHER_NOTIFY": f"json://127.0.0.1:{receiver.port}/day",
        "WATCHER_PARALLEL": str(parallel),
    }
    reached: Counter[str] = Counter()  # comment id -> how many messages carried it

    def provider(body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        if outage:
            outage_calls.append(w.provider.label_of(body))
            if outages:
                return in_process_answer(outages[r])
            return (
                500,
                {},
                b'{"error": {"message": "The server had an error", "type": "server_error"}}',
            )
        return handle(body, headers)

    w.provider.handle = provider  # type: ignore[method-assign]
    listed: set[str] = set()
    r = 0
    for r in range(1, rounds + 1):
        now = clock.next_round()
        outage = r in outages if outages else r == outage_round
        w.provider.models = [] if outage and not outages else ["fake-model"]
        _marks(w, rng, by_cid, listed, figures, clock)
        w.forem.now = now + timedelta(minutes=1)  # dev.to's changes this round come after the marks
        after = bool(outages) and r - 1 in outages and r not in outages  # type: ignore[operator]
        _dev_to(w, rng, comments, by_cid, figures, at_least=int(after))
        done = _cron(w, clock, env)
        assert done.envelope is not None, done.stderr
        if not outage:
            for truth in by_cid.values():
                truth.judged = True
        inbox = w.watcher("inbox", "--json", clock=clock).envelope
        assert inbox is not None
        listed = {c["id"] for c in inbox["result"]["comments"]}
        want = {cid for cid, t in by_cid.items() if t.needs_reply}
        figures.tp += len(listed & want)
        figures.fp += len(listed - want)
        figures.fn += len(want - listed)
        for cid in sorted(listed ^ want):
            t = by_cid[cid]
            figures.mismatches.append(
                f"round {r}: {cid} (#{t.n}) {'listed' if cid in listed else 'missing'}: {t}"
            )
        _reached(w, receiver, r, want, reached, by_cid, figures)
        figures.max_attempts = max(figures.max_attempts, _max_attempts(w.data_dir, figures))
        figures.rounds = r
    twice = {cid: n for cid, n in reached.items() if n > 1}
    if twice:
        figures.mismatches.append(f"comments that reached the receiver more than once: {twice}")
    calls: dict[str, int] = {}
    for label in [*w.provider.calls, *outage_calls]:
        cid = comments[label.split("v")[0]].cid
        calls[cid] = calls.get(cid, 0) + 1
    figures.calls = sum(calls.values())
    over = {cid: n for cid, n in calls.items() if n > 3}
    if over:
        figures.mismatches.append(f"calls above the budget: {over}")
    figures.seconds = time.monotonic() - began
    return figures


def _cron(w: World, clock: DayClock, env: Mapping[str, str]) -> Answer:
    """One ``watcher cron`` round as cron runs it, with the world's fakes and the day's clock."""
    source = ForemSource(w.clock)
    hooks = in_process_hooks(
        w.provider,
        clock=clock,
        make_source=lambda name: source if name == "devto" else resolve_source(name),
    )
    return run_main(
        "cli",
        "cron",
        "--limit",
        "20",
        "--json",
        data_dir=w.data_dir,
        env={**w.env(), **env},
        hooks=hooks,
    )


def _reached(
    w: World,
    receiver: HttpReceiver,
    r: int,
    want: set[str],
    reached: Counter[str],
    by_cid: dict[str, Truth],
    figures: DayFigures,
) -> None:
    """What reached the receiver this round, against the truth (SPEC §16.1).

    Must have arrived by now: every comment that needs a reply (``want``) and whose verdict, for
    its current text, says so. A comment that needs a reply but whose verdict says not (the model
    misjudged it) is the inbox's recall, counted above, and may stay unsent. Whatever arrived this
    round must need a reply now."""
    with receiver.lock:
        fresh, figures.messages = receiver.got[figures.messages :], len(receiver.got)
    for request in fresh:
        ids = COMMENT_LINK.findall(request.json()["message"])
        for cid in ids:
            reached[cid] += 1
            figures.notified += 1
            if cid not in want:
                t = by_cid.get(cid)
                figures.mismatches.append(
                    f"round {r}: {cid} reached the receiver but needs no reply: {t}"
                )
    for cid in sorted(want):
        if cid not in reached and _verdict_says_reply(w.data_dir, cid):
            figures.mismatches.append(
                f"round {r}: {cid} (#{by_cid[cid].n}) needs a reply, its verdict "
                f"says so, and it never reached the receiver: {by_cid[cid]}"
            )


def _verdict_says_reply(data_dir: Path, cid: str) -> bool:
    record = json.loads((data_dir / "inbox" / f"{cid}.json").read_text(encoding="utf-8"))
    verdict = record.get("verdict")
    return bool(verdict and verdict.get("needs_reply"))


def _max_attempts(data_dir: Path, figures: DayFigures) -> int:
    most = 0
    for path in (data_dir / "inbox").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        cap = 3 + sum(g["n"] for g in record.get("grants", []))
        n = sum(1 for a in record["attempts"] if not a.get("not_sent"))  # counted (SPEC §16.3)
        if n > cap:
            figures.mismatches.append(f"{path.stem}: {n} attempts, cap {cap}")
        most = max(most, n)
    return most


def _marks(
    w: World,
    rng: random.Random,
    by_cid: dict[str, Truth],
    listed: set[str],
    figures: DayFigures,
    clock: DayClock,
) -> None:
    """The person deals with what the inbox showed: marks a few replied or ignored (several ids at
    once), and now and then reopens one the author had answered."""
    shown = sorted(listed)
    if shown and rng.random() < 0.5:
        chosen = rng.sample(shown, min(len(shown), rng.randint(1, 3)))
        triage = rng.choice(["replied", "ignored"])
        assert w.watcher("mark", *chosen, triage, clock=clock).returncode == 0
        for cid in chosen:
            by_cid[cid].last_action = triage
        figures.marks += len(chosen)
    closed = sorted(cid for cid, t in by_cid.items() if t.alive and t.last_action == "reply")
    if closed and rng.random() < 0.25:
        cid = rng.choice(closed)
        assert w.watcher("mark", cid, "open", clock=clock).returncode == 0
        by_cid[cid].last_action = "open"
        figures.marks += 1


def _dev_to(
    w: World,
    rng: random.Random,
    comments: dict[str, Truth],
    by_cid: dict[str, Truth],
    figures: DayFigures,
    *,
    at_least: int = 0,
) -> None:
    """What readers and the author do on dev.to this round."""
    alive = [t for t in by_cid.values() if t.alive]
    for _ in range(max(at_least, rng.choice([0, 1, 1, 2, 3]))):
        n = len(comments) + 1
        kind = rng.choice(["q", "q", "t"])
        parent = rng.choice(alive) if alive and rng.random() < 0.3 else None
        text = "How do I configure this?" if kind == "q" else "Thanks, great post!"
        if kind == "t":
            w.provider.script(f"k{n}v1", "no-reply")  # the model reads a thanks as one
        cid = w.say(f"k{n}v1", text, parent=parent.cid if parent else None, user=f"reader{n % 7}")
        if parent is not None:
            parent.has_children = True
        truth = Truth(n, cid, kind)
        comments[f"k{n}"], by_cid[cid] = truth, truth
        figures.comments += 1
    for t in alive:
        roll = rng.random()
        if (
            roll < 0.06 and t.edits == 0
        ):  # one edit a comment at most: its budget holds it (3 attempts)
            t.kind = "t" if t.kind == "q" else "q"
            t.version += 1
            t.edits += 1
            text = (
                "EDIT: never mind, solved it"
                if t.kind == "t"
                else "Thanks! But how do I run it on Windows?"
            )
            if t.kind == "t":
                w.provider.script(f"k{t.n}v{t.version}", "no-reply")
            w.forem.edit(t.cid, f"TAG:k{t.n}v{t.version} {text}")
            if t.open:
                t.judged = False
            figures.edits += 1
        elif roll < 0.09:
            w.forem.delete(t.cid)
            t.alive = False
            figures.deletions += 1
        elif roll < 0.11:
            w.forem.hide(t.cid)
            t.alive = False
            figures.hidden += 1
        elif roll < 0.20 and t.kind == "q":
            w.reply(t.cid, "Good question: see the docs")
            t.last_action = "reply"
            figures.author_replies += 1
