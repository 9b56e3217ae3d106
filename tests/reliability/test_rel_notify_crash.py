"""Crash matrix for delivery (SPEC §16.1): SIGKILL a real ``watcher cron`` with ``WATCHER_NOTIFY``
at each point around its sends, then run the next rounds until one has nothing left to send.

Two targets, each a real HTTP receiver on loopback (tests/_receivers.py): the first fails (HTTP
500) in the first round and recovers for the second, the other always accepts. The first round
finds two questions and a thanks on a dev.to served on loopback; the second finds one more
question. One of the two rounds is a process of its own, killed at a delivery point of the fault
rig (tests/_faults/sitecustomize.py: the new message written and nothing sent; a send about to
start; a target's acceptance not yet recorded; that record written); a scan in this process
judges its comments first, so that its own scan has nothing to fetch. Every other round runs in
this process. Then :func:`_rel_invariants.news_delivered` must hold — no news lost, at most one
duplicate per kill, nothing recorded as accepted that a target did not receive — and every other
promise of SPEC §1 (:func:`_rel_invariants.check_all`)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from _proc import run, run_main
from _rel_harness import LONG, NOTIFY_POINTS, TALLY
from _rel_invariants import Expect, check_all, needing_reply, news_delivered
from _rel_notify import Account, account, in_process_run

pytestmark = pytest.mark.slow

# Rounds after the two of the script, until one sends nothing: each round retries what is open.
MAX_ROUNDS = 6

# Where each round can be killed (a point, the n-th time the round reaches it). The first round
# sends twice (the failing target first, then the other); the second three times (the first
# message to the target that had failed, then the new message to both).
ROUND_1 = (
    "after_outbox_write",
    "before_send",
    "before_send:2",
    "after_send_accepted",
    "after_accept_write",
)
ROUND_2 = ("after_outbox_write", *(f"{p}:{k}" for p in NOTIFY_POINTS[1:] for k in (1, 2, 3)))
# The quick lane: each point once — the first round at the new message, at its acceptance and
# after its record; the second at its retry's send, and at its last acceptance, the second of
# its new message (were a message's acceptances recorded together, one kill would repeat it to
# two targets). The long lane: every send of both rounds.
QUICK = {
    ("after_outbox_write", 1),
    ("after_send_accepted", 1),
    ("after_accept_write", 1),
    ("before_send:1", 2),
    ("after_send_accepted:3", 2),
}
CASES = [
    case
    for case in [*((p, 1) for p in ROUND_1), *((p, 2) for p in ROUND_2)]
    if LONG or case in QUICK
]


def _round_killed(acc: Account, data: Path, point: str) -> list[str]:
    """A cron round as a process of its own, SIGKILLed at ``point``."""
    proc = run("cli", "cron", "--json", data_dir=data, env=acc.env(), fault=f"kill_at={point}")
    if proc.returncode != -signal.SIGKILL:
        return [f"kill point not reached (exit {proc.returncode}): {proc.stderr[-500:]}"]
    return []


def notify_crash_case(work: Path, point: str, killed: int) -> list[str]:
    """One cell: the script's two rounds, round ``killed`` killed at ``point``, then rounds until
    one sends nothing; the violations found (empty: every promise held)."""
    data = work / "data"
    problems: list[str] = []
    with account() as acc:
        acc.fake.script("t1", "no-reply")
        asked = {
            acc.say("q1", "How do I configure this?"),
            acc.say("q2", "Does it run on Windows?"),
        }
        acc.say("t1", "Thanks, great post!")
        for n in range(1, MAX_ROUNDS + 1):
            if n == 2:
                acc.recover()
                asked.add(acc.say("q3", "Where is the config file?"))
            before = acc.requests()
            if n == killed:
                # Its comments judged by a scan before it, in this process: the killed round's own
                # scan then has nothing new to fetch, and its source nothing to wait for.
                scanned = in_process_run(acc, data, "scan")
                if scanned.returncode != 0:
                    problems.append(f"the scan before round {n} exited {scanned.returncode}")
                problems += _round_killed(acc, data, point)
                continue
            done = in_process_run(acc, data, "cron")
            if done.returncode != 0:
                problems.append(f"round {n} exited {done.returncode}: {done.stderr[-300:]}")
            if n > 2 and acc.requests() == before:
                break
        else:
            problems.append(f"still sending after {MAX_ROUNDS} rounds")
        signals = run_main("cli", "signals", "--json", data_dir=data, env=acc.env())
        if signals.returncode != 0:
            problems.append(f"signals exited {signals.returncode}: {signals.stderr[-300:]}")
        if needing_reply(data) != asked:
            problems.append(
                f"the comments needing a reply are {sorted(needing_reply(data))}, "
                f"expected {sorted(asked)}"
            )
        problems += news_delivered(data, acc.received(), kills=1)
        problems += check_all(data, acc.calls(), expect=Expect())
    return [f"{point} × round {killed}: {p}" for p in problems]


@pytest.mark.parametrize(("point", "killed"), CASES)
def test_kill_around_a_send_loses_no_news_and_repeats_at_most_once(
    point: str, killed: int, tmp_path: Path
) -> None:
    """A cron round killed at this delivery point, then the next rounds: every comment that needs
    a reply reached both targets, one message at most twice, nothing recorded but received."""
    violations = notify_crash_case(tmp_path, point, killed)
    TALLY.add("crash_points", 1, violations)
    assert violations == []
