"""SPEC §1's promises as plain checks over a data dir and the fake provider's call log.

Every function returns a list of violations (empty when the promise holds), so one rig run can
report all it found at once. Nothing here imports the pipeline: the checks read the files the
way a suspicious user would.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from watcher.models import CAP, InboxRecord, SeenFile, SignalState
from watcher.state.records import spent
from watcher.util.timeutil import parse_iso

AttemptView = tuple[int, str | None, str | None, int]  # (n, outcome, error kind, pid)


@dataclass(frozen=True)
class Snapshot:
    """What the data dir promised at one moment, to compare a later state against."""

    attempts: dict[str, list[AttemptView]]
    verdicts: frozenset[str]
    triage: dict[str, str]
    calls: int  # length of the call log at that moment
    # Edits each comment's text had that go to the model (SPEC §15.2): one after the snapshot may
    # move a verdict into the history and ask for the new text's.
    edits: dict[str, int] = field(default_factory=dict)


@dataclass
class Expect:
    """What the test itself knows: marks it made (and saw succeed) and calls it allows."""

    marks: dict[str, str] = field(default_factory=dict)
    quarantine_empty: bool = True  # no fault in this case may corrupt a file


# ---- reading ------------------------------------------------------------------------------------


def records(data_dir: Path) -> dict[str, InboxRecord]:
    inbox = data_dir / "inbox"
    found: dict[str, InboxRecord] = {}
    if inbox.is_dir():
        for path in sorted(inbox.glob("*.json")):
            found[path.stem] = InboxRecord.model_validate_json(path.read_bytes())
    return found


def seen_file(data_dir: Path) -> SeenFile:
    path = data_dir / "seen.json"
    return SeenFile.model_validate_json(path.read_bytes()) if path.exists() else SeenFile()


def _view(record: InboxRecord) -> list[AttemptView]:
    return [(a.n, a.outcome, a.error.kind if a.error else None, a.pid) for a in record.attempts]


def snapshot(data_dir: Path, calls: Sequence[str]) -> Snapshot:
    recs = records(data_dir)
    return Snapshot(
        attempts={cid: _view(r) for cid, r in recs.items()},
        verdicts=frozenset(cid for cid, r in recs.items() if r.verdict is not None),
        triage={cid: e.triage for cid, e in seen_file(data_dir).comments.items()},
        calls=len(calls),
        edits={cid: judged_edits(r) for cid, r in recs.items()},
    )


def judged_edits(record: InboxRecord) -> int:
    return sum(e.judged for e in record.edits)


def verdict_lost(record: InboxRecord | None, before: Snapshot, cid: str) -> bool:
    """A verdict the snapshot saw is gone, and no edit of the comment's text since explains it."""
    return record is None or (record.verdict is None and judged_edits(record) == before.edits.get(cid, 0))


# ---- the promises -------------------------------------------------------------------------------


AGENT = "agent"  # the provider of an attempt an agent claimed (SPEC §14): its "call" is the agent's


def claims(record: InboxRecord) -> int:
    """Attempts an agent claimed: each is one of the comment's attempts, like a model call."""
    return sum(a.provider == AGENT for a in record.attempts)


def call_budget(recs: Mapping[str, InboxRecord], calls: Sequence[str]) -> list[str]:
    """Promise 1: model calls + claims ≤ 3 (+ grants) per comment, and every call has an attempt of
    its own reserved on disk — a claim's attempt is the agent's, never a call's (SPEC §14)."""
    out = []
    for label, n in Counter(calls).items():
        record = recs.get(label)
        granted = sum(g.n for g in record.grants) if record is not None else 0
        claimed = claims(record) if record is not None else 0
        if n + claimed > CAP + granted:
            out.append(f"{label}: {n} model calls + {claimed} claims (cap {CAP + granted})")
        if record is None:
            out.append(f"{label}: {n} model call(s) but no inbox file records an attempt")
        elif n > len(record.attempts) - claimed:
            out.append(f"{label}: {n} model calls but only {len(record.attempts) - claimed} attempt(s) "
                       f"reserved for calls on disk")
    for cid, record in recs.items():
        cap = CAP + sum(g.n for g in record.grants)  # the file's own "cap" field is not trusted
        if spent(record) > cap:  # the attempts that count: not those never sent (SPEC §16.3)
            out.append(f"{cid}: {spent(record)} attempts on disk (cap {cap})")
        if [a.n for a in record.attempts] != list(range(1, len(record.attempts) + 1)):
            out.append(f"{cid}: attempt numbers {[a.n for a in record.attempts]} are not 1..n")
        for a in record.attempts:
            if (a.provider == AGENT) != (a.command == "claim") or (a.provider == AGENT) != (a.lease_until is not None):
                out.append(f"{cid}: attempt {a.n} by {a.provider}/{a.command} has lease {a.lease_until!r}: a claim "
                           f"is exactly an agent's attempt with a lease")
    return out


def one_call_per_run(recs: Mapping[str, InboxRecord]) -> list[str]:
    """Promise 1: at most one attempt per comment per run (each run is one pid)."""
    out = []
    for cid, record in recs.items():
        pids = Counter(a.pid for a in record.attempts)
        out += [f"{cid}: {n} attempts by one run (pid {pid})" for pid, n in pids.items() if n > 1]
    return out


SETUP_KINDS = frozenset({"unreachable", "auth", "model_not_found", "bad_request"})
TRANSIENT_KINDS = frozenset({"overloaded", "server_error", "timeout", "network"})
# The provider answered (a verdict, or an answer that did not parse): a streak of transient failures ends.
ANSWER_KINDS = frozenset({None, "malformed_json", "invalid_verdict", "refused", "truncated"})
# A breaker no models list can close (SPEC §15.5): one real attempt an hour, the first an hour after.
HOURLY_KINDS = frozenset({"model_not_found", "bad_request"})
HOUR_S = 3600.0
# The shortest cooldown after a 429 that gave no usable Retry-After (none, negative, NaN, a past date).
OWN_429_WAIT_S = 60.0
# A cooldown is stamped just before its 429's outcome: a later attempt this close to its end is on time.
STAMP_SLACK_S = 1.0


@dataclass(frozen=True)
class _Seen:
    """One attempt, as the setup-stop checks read it."""

    reserved: datetime
    finished: datetime | None
    cid: str
    pid: int
    setup: tuple[str, str]
    kind: str | None
    outcome: str | None
    retry_after_s: float | None


def _attempts(recs: Mapping[str, InboxRecord]) -> list[_Seen]:
    return [_Seen(parse_iso(a.reserved_at), parse_iso(a.finished_at) if a.finished_at else None, cid, a.pid,
                  (a.provider, a.model), a.error.kind if a.error else None, a.outcome,
                  a.error.retry_after_s if a.error else None)
            for cid, record in recs.items() for a in record.attempts if a.provider != AGENT]


def setup_stop_is_last(recs: Mapping[str, InboxRecord]) -> list[str]:
    """§13.1, §15.5: a run stops at its first setup failure, and at the second transient failure in
    a row — counted across runs, in the order the outcomes were written — so one outage never spends
    a second attempt in a run; a 429 holds every run back for its cooldown (its Retry-After, or at
    least a minute without a usable one); and a model_not_found or bad_request from a real call
    allows no other attempt for that setup within the hour, whatever a models list says."""
    attempts = _attempts(recs)
    return (_stopped_at_setup_failure(attempts) + _stopped_at_second_transient(attempts)
            + _held_back_by_429(attempts) + _held_back_by_poisoned_breaker(attempts))


def _stopped_at_setup_failure(attempts: list[_Seen]) -> list[str]:
    by_run: dict[int, list[_Seen]] = {}
    for a in attempts:
        by_run.setdefault(a.pid, []).append(a)
    out = []
    for pid, mine in by_run.items():
        mine.sort(key=lambda a: a.reserved)
        streak = 0
        for i, a in enumerate(mine[:-1]):
            streak = streak + 1 if a.kind in TRANSIENT_KINDS else 0
            if a.kind in SETUP_KINDS or streak >= 2:
                out.append(f"run {pid}: {a.kind} on {a.cid} should have stopped it, yet it went on to "
                           f"{[b.cid for b in mine[i + 1:]]}")
                break
    return out


def _went_on(attempts: list[_Seen], pid: int, after: datetime) -> list[str]:
    return [a.cid for a in attempts if a.pid == pid and a.reserved > after]


def _stopped_at_second_transient(attempts: list[_Seen]) -> list[str]:
    out = []
    streak = 0
    for a in sorted((a for a in attempts if a.finished is not None), key=_finished):
        if a.kind in TRANSIENT_KINDS:
            streak += 1
        elif a.kind in ANSWER_KINDS or a.kind == "interrupted":
            streak = 0  # an answer; or an attempt whose answer is unknown — claim nothing across it
        if a.kind in TRANSIENT_KINDS and streak >= 2 and a.finished is not None:
            later = _went_on(attempts, a.pid, a.finished)
            if later:
                out.append(f"run {a.pid}: {a.kind} on {a.cid} was the second transient failure in a row and should "
                           f"have stopped it, yet it went on to {later}")
    return out


def _finished(a: _Seen) -> datetime:
    assert a.finished is not None
    return a.finished


def _held_back_by_429(attempts: list[_Seen]) -> list[str]:
    out = []
    for a in attempts:
        if a.kind != "rate_limited" or a.finished is None:
            continue
        usable = a.retry_after_s is not None and a.retry_after_s > 0
        wait = a.retry_after_s if usable else OWN_429_WAIT_S
        assert wait is not None
        early = [b.cid for b in attempts
                 if a.finished < b.reserved < a.finished + timedelta(seconds=wait - STAMP_SLACK_S)]
        if early:
            out.append(f"429 on {a.cid} (Retry-After {a.retry_after_s}) asked for {wait:g} s, yet {early} were "
                       "attempted inside that cooldown")
    return out


def _held_back_by_poisoned_breaker(attempts: list[_Seen]) -> list[str]:
    out = []
    for a in attempts:
        if a.kind not in HOURLY_KINDS or a.finished is None:
            continue
        early = [b.cid for b in attempts if b.setup == a.setup
                 and a.finished < b.reserved < a.finished + timedelta(seconds=HOUR_S - STAMP_SLACK_S)]
        if early:
            out.append(f"{a.kind} on {a.cid} opened a breaker no models list can close, yet {early} were attempted "
                       "within the hour")
    return out


def verdicts_final(recs: Mapping[str, InboxRecord], calls_since: Sequence[str], before: Snapshot | None) -> list[str]:
    """Promise 2: a persisted verdict is never re-requested (nor a later attempt made) — for the text
    it judged: an edit of the comment on dev.to moves it into the history (SPEC §15.2)."""
    out = []
    for cid, record in recs.items():
        start = max((e.attempts for e in record.edits if e.judged), default=0)  # the current text's
        oks = [a.n for a in record.attempts[start:] if a.outcome == "ok"]
        if record.verdict is not None and oks != [len(record.attempts)]:
            out.append(f"{cid}: verdict saved but ok attempts are {oks} of {len(record.attempts)}")
        if record.verdict is None and oks:
            out.append(f"{cid}: attempt(s) {oks} say ok but no verdict is saved")
    if before is not None:
        asked = Counter(calls_since)
        for cid in before.verdicts:
            edited = cid in recs and judged_edits(recs[cid]) > before.edits.get(cid, 0)
            if asked[cid] and not edited:
                out.append(f"{cid}: verdict was on disk, then requested {asked[cid]} more time(s)")
            if verdict_lost(recs.get(cid), before, cid):
                out.append(f"{cid}: verdict was on disk and is gone")
    return out


def gone_never_called(recs: Mapping[str, InboxRecord]) -> list[str]:
    """SPEC §15.2: a comment deleted or hidden on dev.to gets no attempt after the run that saw it so
    (a call already in flight then may finish: its attempt was reserved before)."""
    out = []
    for cid, record in recs.items():
        if record.gone is None:
            continue
        seen_gone = parse_iso(record.gone.seen_at)
        late = [a.n for a in record.attempts if parse_iso(a.reserved_at) > seen_gone]
        if late:
            out.append(f"{cid}: {record.gone.kind} on dev.to since {record.gone.seen_at}, yet attempt(s) {late} "
                       "were reserved after")
    return out


def edits_consistent(recs: Mapping[str, InboxRecord]) -> list[str]:
    """SPEC §15.2: an edit keeps the lifetime budget (its attempt count only grows, never past the
    attempts made), each attempt judged one of the comment's texts, and the verdict the text it
    says it judged."""
    from watcher.state.records import text_sha256

    out = []
    for cid, record in recs.items():
        counts = [e.attempts for e in record.edits]
        if counts != sorted(counts) or any(n > len(record.attempts) for n in counts):
            out.append(f"{cid}: edits at attempt counts {counts}, with {len(record.attempts)} attempt(s)")
        texts = {text_sha256(record.comment.text), *(e.text_sha256 for e in record.edits)}
        for a in record.attempts:
            if a.text_sha256 is not None and a.text_sha256 not in texts:
                out.append(f"{cid}: attempt {a.n} judged a text the comment never had")
        if record.verdict is not None and record.verdict_text_sha256 not in (None, record.attempts[-1].text_sha256):
            out.append(f"{cid}: the verdict says it judged another text than its attempt did")
    return out


def attempts_monotonic(recs: Mapping[str, InboxRecord], before: Snapshot) -> list[str]:
    """Promise 2: attempt counts never go down; a finished attempt is never rewritten."""
    out = []
    for cid, old in before.attempts.items():
        record = recs.get(cid)
        if record is None:
            out.append(f"{cid}: inbox file with {len(old)} attempt(s) disappeared")
            continue
        now = _view(record)
        if len(now) < len(old):
            out.append(f"{cid}: attempts went down from {len(old)} to {len(now)}")
        for was, is_ in zip(old, now, strict=False):
            if was[1] is None:
                if is_[0] != was[0] or is_[3] != was[3]:
                    out.append(f"{cid}: reserved attempt {was} was replaced by {is_}")
            elif was != is_:
                out.append(f"{cid}: finished attempt {was} was rewritten as {is_}")
    return out


def raw_kept(recs: Mapping[str, InboxRecord]) -> list[str]:
    """Promise 2: a received response is kept (raw) even when it does not parse."""
    return [
        f"{cid}: attempt {a.n} ({a.error.kind}, HTTP {a.error.http_status}) kept no raw body"
        for cid, r in recs.items()
        for a in r.attempts
        if a.error is not None and a.error.http_status is not None and not a.raw
    ]


def triage_kept(data_dir: Path, marks: Mapping[str, str]) -> list[str]:
    """Promise 2: a reply/ignore mark is never overwritten by a batch."""
    entries = seen_file(data_dir).comments
    return [
        f"{cid}: marked {want!r}, seen.json says {entries[cid].triage if cid in entries else 'nothing'!r}"
        for cid, want in marks.items()
        if cid not in entries or entries[cid].triage != want
    ]


def index_follows_inbox(data_dir: Path, recs: Mapping[str, InboxRecord]) -> list[str]:
    """§4.2 after a quiet run: the index knows every comment, with its state and attempts."""
    from watcher.state.records import state_of

    entries = seen_file(data_dir).comments
    out = []
    for cid, record in recs.items():
        entry = entries.get(cid)
        if entry is None:
            out.append(f"{cid}: inbox file not in seen.json")
        elif (entry.status, entry.attempts) != (state_of(record), spent(record)):  # not_sent: §16.3
            out.append(f"{cid}: seen.json says {entry.status}/{entry.attempts}, inbox says "
                       f"{state_of(record)}/{spent(record)}")
    return out


def no_open_reservation(recs: Mapping[str, InboxRecord]) -> list[str]:
    return [f"{cid}: attempt {r.attempts[-1].n} still reserved after recovery" for cid, r in recs.items()
            if r.attempts and r.attempts[-1].outcome is None]


def signals_match_log(data_dir: Path) -> list[str]:
    """§8: after a final count, counts per key == lines per key; bad lines are in ``invalid``."""
    log = data_dir / "observations.jsonl"
    data = log.read_bytes() if log.exists() else b""
    complete = data[: data.rfind(b"\n") + 1]
    keys: Counter[str] = Counter()
    invalid = 0
    for line in complete.split(b"\n")[:-1]:
        key = _key(line)
        if key is None:
            invalid += 1
        else:
            keys[key] += 1
    path = data_dir / "signals" / "state.json"
    state = SignalState.model_validate_json(path.read_bytes()) if path.exists() else SignalState()
    out = []
    if dict(keys) != state.counts:
        diff = {k: (keys.get(k, 0), state.counts.get(k, 0)) for k in set(keys) | set(state.counts)
                if keys.get(k, 0) != state.counts.get(k, 0)}
        out.append(f"signal counts differ from the log (key: (lines, counted)): {diff}")
    if invalid != state.invalid:
        out.append(f"{invalid} invalid log line(s), counter says {state.invalid}")
    if state.applied != len(complete):
        out.append(f"counter applied {state.applied} bytes of {len(complete)} complete ones")
    return out


def _key(line: bytes) -> str | None:
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # "[[[[…" is an invalid line, as for the counter
        return None
    key = data.get("key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


def quarantine_empty(data_dir: Path) -> list[str]:
    q = data_dir / "quarantine"
    moved = sorted(p.name for p in q.iterdir()) if q.is_dir() else []
    return [f"quarantined although nothing was corrupted: {moved}"] if moved else []


# ---- notifications (SPEC §16.1) -----------------------------------------------------------------

# What a receiver's side reads in a message (watcher/notify/message.py): each comment's own link,
# and the message's id, which a repeat after a crash carries again.
COMMENT_LINK = re.compile(r"/comment/([a-z0-9]+)")
MESSAGE_ID = re.compile(r"\bmessage ([0-9a-f]{8,32})\b")


def needing_reply(data_dir: Path) -> set[str]:
    """The comments that need a reply as the data dir says: open, on dev.to, and their verdict
    (of their current text) says reply."""
    entries = seen_file(data_dir).comments
    return {cid for cid, r in records(data_dir).items()
            if r.verdict is not None and r.verdict.needs_reply and r.gone is None
            and cid in entries and entries[cid].triage == "open"}


def news_delivered(data_dir: Path, received: Mapping[str, Sequence[str]], *, kills: int) -> list[str]:
    """SPEC §16.1 after recovery: no news lost, at most one duplicate per kill, and nothing marked
    delivered that its target did not receive. ``received``: per target (its ``Target.id``, as the
    outbox names it), the bodies of the messages it accepted, in order; ``kills``: the crashes.

    - every comment that needs a reply (:func:`needing_reply`) reached every target;
    - a comment reached a target in one message only (news already in a message is not put in
      another), and a message reached a target twice only as a repeat of itself (its id);
    - the repeats, over all targets, are at most one per kill;
    - each acceptance the outbox files record is of a message that target received, and after
      recovery no (message, target) is left open.
    """
    out = []
    copies: Counter[tuple[str, str]] = Counter()  # (target, message id) -> times received
    for target, bodies in received.items():
        carried: dict[str, set[str]] = {}  # comment -> the messages that carried it to this target
        for body in bodies:
            found = MESSAGE_ID.search(body)
            message = found.group(1) if found else f"<no id: {body[:60]!r}>"
            copies[target, message] += 1
            for cid in COMMENT_LINK.findall(body):
                carried.setdefault(cid, set()).add(message)
        for cid in sorted(needing_reply(data_dir) - set(carried)):
            out.append(f"{cid} needs a reply and never reached target {target} (news lost)")
        out += [f"{cid} reached target {target} in {len(ms)} different messages {sorted(ms)}"
                for cid, ms in sorted(carried.items()) if len(ms) > 1]
    repeats = sum(n - 1 for n in copies.values())
    if repeats > kills:
        twice = {f"{m} to {t}": n for (t, m), n in sorted(copies.items()) if n > 1}
        out.append(f"{repeats} repeated message(s) after {kills} kill(s) (at most one per kill): {twice}")
    outbox = data_dir / "outbox"
    for path in sorted(outbox.glob("*.json")) if outbox.is_dir() else []:
        message = json.loads(path.read_bytes())
        for fate in message["targets"]:
            if fate.get("accepted_at") and not copies[fate["target"], message["id"]]:
                out.append(f"outbox {message['id']}: target {fate['target']} recorded as accepted, "
                           "but it never received that message")
            if fate.get("accepted_at") is None and fate.get("gave_up_at") is None:
                out.append(f"outbox {message['id']}: target {fate['target']} still open after recovery")
    return out


def tokens_within_budget(recs: Mapping[str, InboxRecord], budget: int, runs: int) -> list[str]:
    """SPEC §16.4: each UTC month's recorded tokens (the usage the provider reported, by the month
    each attempt or reply draft was reserved in) never exceed WATCHER_MONTHLY_TOKENS by more than
    one call's output cap per run in flight (``runs``: the most runs that called at once). A run's
    check counts each call in flight at its worst case, which the estimate of its prompt can
    undercount; no more."""
    from watcher.state.tokens import OUTPUT_CAP

    used: Counter[str] = Counter()
    for record in recs.values():
        for a in record.attempts:
            if a.provider != AGENT and a.usage is not None:
                used[a.reserved_at[:7]] += (a.usage.input_tokens or 0) + (a.usage.output_tokens or 0)
        for d in record.drafts:  # a draft is a provider call too (SPEC §16.5)
            used[d.reserved_at[:7]] += (d.input_tokens or 0) + (d.output_tokens or 0)
    most = budget + OUTPUT_CAP * runs
    return [f"{month}: {tokens} tokens recorded, over the budget {budget} + {runs} run(s) x {OUTPUT_CAP}"
            for month, tokens in sorted(used.items()) if tokens > most]


# ---- all of them --------------------------------------------------------------------------------


def check_all(data_dir: Path, calls: Sequence[str], *, before: Snapshot | None = None,
              expect: Expect | None = None) -> list[str]:
    """Every promise at once; ``calls`` is the whole call log since the data dir was created."""
    expect = expect or Expect()
    recs = records(data_dir)
    since = calls[before.calls:] if before is not None else calls
    found = call_budget(recs, calls) + one_call_per_run(recs) + verdicts_final(recs, since, before)
    found += setup_stop_is_last(recs) + gone_never_called(recs) + edits_consistent(recs)
    found += raw_kept(recs) + triage_kept(data_dir, expect.marks) + signals_match_log(data_dir)
    if before is not None:
        found += attempts_monotonic(recs, before)
    # Every caller has run recovery until quiet: no reservation may be left open.
    found += no_open_reservation(recs) + index_follows_inbox(data_dir, recs)
    if expect.quarantine_empty:
        found += quarantine_empty(data_dir)
    return found


def files_containing(root: Path, needle: bytes) -> list[str]:
    """Every file under ``root`` whose bytes contain ``needle`` (for secrets)."""
    return [str(p.relative_to(root)) for p in _files(root) if needle in p.read_bytes()]


def _files(root: Path) -> Iterable[Path]:
    return (p for p in sorted(root.rglob("*")) if p.is_file())
