"""Power loss during a notification's delivery (SPEC §16.1, §15.5): every crash state a power cut
can leave while a cron round writes its outbox message, marks its comments listed and records
each target's outcome, checked against what the targets had received by then.

The round runs in process on a data dir whose comments a scan already judged, while
:mod:`_rel_powerloss` records its file operations, and each target's acceptance of a message is
noted in the same trace (the moment the outside world saw it). Two targets (tests/reliability/
_rel_notify.py): the first answers 500 in the round, the other accepts.

In every crash state, as it is:

- a comment the index marks listed is in an outbox message the state holds (else its news is
  lost: no later round lists it again);
- a target recorded as accepted received that message before the power went;
- a message a target received is in the state (its news cannot come back in another message);
- at most one (message, target) the state has open was received already: one power cut, at most
  one duplicate.

Then, on a sample of the states spread over the delivery (all of them in the long lane), the next
rounds run with the first target recovered, and :func:`_rel_invariants.news_delivered` must hold
(no news lost, at most one duplicate for the one cut).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _rel_harness import LONG, TALLY
from _rel_invariants import MESSAGE_ID, needing_reply, news_delivered
from _rel_notify import Account, account, in_process_run
from _rel_powerloss import Event, Recorder, State, Unsynced, materialize, recording

from watcher.models import SeenFile
from watcher.notify.models import OutboxMessage
from watcher.notify.targets import parse_targets

pytestmark = pytest.mark.slow

DATA = "data"
# The next rounds run on this many crash states of the delivery in the quick lane (all in the long).
QUICK_SAMPLE = 3
MAX_ROUNDS = 4


class _Noting(list[Any]):
    """A receiver's log that also notes, in the trace, each request its receiver accepted."""

    def __init__(self, rec: Recorder, target: str, status: Callable[[], int]) -> None:
        super().__init__()
        self.rec, self.target, self.status = rec, target, status

    def append(self, request: Any) -> None:
        super().append(request)
        if self.status() < 300:  # read under the receiver's lock, as the answer is
            self.rec.note("sent", self.target, request.json()["message"])


def _record(
    acc: Account, root: Path, monkeypatch: pytest.MonkeyPatch, plant: Unsynced | None = None
) -> tuple[Recorder, set[str]]:
    """Judge the first comments, then record one cron round that delivers them."""
    data = root / DATA
    asked = acc.first_comments()
    assert in_process_run(acc, data, "scan").returncode == 0
    first, second = parse_targets(acc.urls)
    with recording(root, monkeypatch, unsynced=plant) as rec:
        acc.failing.got = _Noting(rec, first.id, lambda: acc.failing.status)
        acc.good.got = _Noting(rec, second.id, lambda: acc.good.status)
        done = in_process_run(acc, data, "cron")
    # What the next rounds deliver is after the power cut: no longer in the trace.
    acc.failing.got, acc.good.got = list(acc.failing.got), list(acc.good.got)
    assert done.returncode == 0, done.stderr
    return rec, asked


def _sent_by(rec: Recorder, k: int) -> dict[str, list[str]]:
    """Per target, the bodies it had accepted by the crash point after trace entry ``k``."""
    sent: dict[str, list[str]] = {}
    for event in rec.trace[: k + 1]:
        if event.kind == "sent":
            sent.setdefault(event.what, []).append(event.data)
    return sent


@functools.lru_cache(maxsize=1024)
def _parse(model: Any, data: bytes) -> Any:
    try:
        return model.model_validate_json(data)
    except ValueError:
        return None


def in_state(files: dict[str, bytes | None], sent: dict[str, list[str]]) -> list[str]:
    """The promises a crash state keeps as it is (the module's first list)."""
    index = _parse(SeenFile, files.get(f"{DATA}/seen.json") or b"")
    messages = [
        _parse(OutboxMessage, data)
        for path, data in files.items()
        if path.startswith(f"{DATA}/outbox/")
        and path.endswith(".json")
        and not path.rsplit("/", 1)[1].startswith(".")
        and data is not None
    ]
    held = {m.id: m for m in messages if m is not None}
    keys = {key for m in held.values() for key in m.news}
    out = []
    if index is not None:
        out += [
            f"{cid} is marked listed but no outbox message holds it (its news is lost)"
            for cid, e in sorted(index.comments.items())
            if e.listed_at is not None and f"comment:{cid}" not in keys
        ]
    received = {
        (target, found.group(1))
        for target, bodies in sent.items()
        for body in bodies
        if (found := MESSAGE_ID.search(body))
    }
    for target, mid in sorted(received):
        if mid not in held:
            out.append(f"message {mid} reached target {target} but is not in the state")
    repeats = 0
    for m in held.values():
        for fate in m.targets:
            got = (fate.target, m.id) in received
            if fate.accepted_at is not None and not got:
                out.append(
                    f"message {m.id}: target {fate.target} recorded as accepted before it was"
                )
            repeats += fate.open and got
    if repeats > 1:
        out.append(
            f"{repeats} received messages are open in the state: one power cut, "
            "more than one duplicate"
        )
    return out


def next_rounds(
    acc: Account, state: State, sent: dict[str, list[str]], dest: Path, asked: set[str]
) -> list[str]:
    """Write the state out and run the next rounds on it (the first target recovered)."""
    materialize(state, dest)
    data = dest / DATA
    acc.recover()
    first, second = parse_targets(acc.urls)
    start = {first.id: len(acc.failing.got), second.id: len(acc.good.got)}
    out = []
    for n in range(MAX_ROUNDS):
        before = acc.requests()
        done = in_process_run(acc, data, "cron")
        if done.returncode != 0:
            out.append(f"next round {n + 1} exited {done.returncode}: {done.stderr[-300:]}")
        if acc.requests() == before:
            break
    later = {
        first.id: acc.failing.got[start[first.id] :],
        second.id: acc.good.got[start[second.id] :],
    }
    received = {t: sent.get(t, []) + [r.json()["message"] for r in later[t]] for t in later}
    needing = needing_reply(data)
    if needing != asked:
        out.append(f"the comments needing a reply are {sorted(needing)}, expected {sorted(asked)}")
    return out + news_delivered(data, received, kills=1)


def _delivery_states(rec: Recorder) -> list[tuple[State, int]]:
    """The distinct crash states from the outbox's first operation on, by crash point."""
    first = next(i for i, e in enumerate(rec.trace) if f"{DATA}/outbox" in e.what)
    return sorted(((s, k) for s, k in rec.states.items() if k >= first), key=lambda item: item[1])


def explore(
    acc: Account,
    rec: Recorder,
    asked: set[str],
    work: Path,
    *,
    sample: int | None,
    stop: Callable[[list[str]], bool] | None = None,
) -> tuple[int, list[str]]:
    """Check every crash state as it is, the next rounds on ``sample`` of the delivery's (all
    when ``None``); the number of states checked and the violations."""
    ordered = sorted(rec.states.items(), key=lambda item: item[1])
    delivery = _delivery_states(rec)
    chosen = (
        {
            delivery[round(i * (len(delivery) - 1) / max(1, sample - 1))][0]
            for i in range(min(sample, len(delivery)))
        }
        if sample is not None
        else set(rec.states)
    )
    found: list[str] = []
    for i, (state, k) in enumerate(ordered):
        sent = _sent_by(rec, k)
        problems = in_state(dict(state), sent)
        if state in chosen:
            problems += next_rounds(acc, state, sent, work / f"state-{i}", asked)
        found += [f"crash after {_describe(rec, k)}: {p}" for p in problems]
        if stop is not None and stop(found):
            break
    return len(ordered), found


def _describe(rec: Recorder, k: int) -> str:
    fs = [e for e in rec.trace[: k + 1] if e.kind != "sent"]
    last: Event | None = fs[-1] if fs else None
    return f"op {len(fs)} ({last.kind} {last.what})" if last else "op 0 (before any)"


def test_every_power_loss_state_of_a_delivery_keeps_the_news(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every crash state of a cron round's delivery keeps its news and repeats at most one message,
    as it is and after the next rounds."""
    root = tmp_path / "root"
    root.mkdir()
    with account() as acc:
        rec, asked = _record(acc, root, monkeypatch)
        states, violations = explore(
            acc, rec, asked, tmp_path, sample=None if LONG else QUICK_SAMPLE
        )
    TALLY.add("power_loss_states", states, violations)
    assert violations == []
    assert len(_delivery_states(rec)) > 10, "a delivery leaves many distinct crash states"


def _no_outbox_fsync(kind: str, name: str, last: Event | None) -> bool:
    """The outbox's durable write without the fsync of its temp file before the rename."""
    return kind == "fsync" and name.startswith(f"{DATA}/outbox/.") and name.endswith(".tmp")


def test_an_outbox_write_missing_its_sync_is_caught_losing_news(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the outbox message's bytes not synced before its rename, some crash state has the
    comments marked listed and their message empty or torn: the checker reports the lost news
    (so a clean run means something)."""
    root = tmp_path / "root"
    root.mkdir()
    with account() as acc:
        rec, asked = _record(acc, root, monkeypatch, _no_outbox_fsync)
        _states, violations = explore(
            acc,
            rec,
            asked,
            tmp_path,
            sample=0,
            stop=lambda found: any("news is lost" in v for v in found),
        )
    assert any("news is lost" in v for v in violations), violations[:5]
