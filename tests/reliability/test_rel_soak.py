"""Concurrency soak: real `watcher` and `watcher-bridge` processes at random against one data dir.

Workers run scan, recheck, mark, signals and status in random order from both entrypoints while
the loopback provider fails at random (malformed, invalid, 529, slow, an occasional 429 with a
sub-second Retry-After) and a few batches are SIGKILLed mid-run. Beside them an agent (SPEC §14,
``WATCHER_PROVIDER=agent``) claims comments and submits valid and invalid verdicts through
``watcher claim/submit`` and ``watcher-bridge claim/submit``, submits some twice (refused), and
walks away from some claims (their lease ends; recovery, a later run, closes them). Meanwhile dev.to
changes under them (SPEC §15.2): comments are edited, deleted (gone from the thread, or shown as
``[deleted]``) and hidden while batches run. A monitor samples the data dir
the whole time (attempts never go down, verdicts never vanish). Bounded in time: a few seconds
in the quick lane (and at least :data:`MIN_OPS` operations per worker, so a loaded machine still
soaks), 5 minutes with ``WATCHER_RELIABILITY=long``, or ``WATCHER_SOAK_SECONDS``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import _first_release
import pytest
from _fakes.provider import VERDICT, FakeProvider, running_fake
from _proc import envelope, run, start, write_export
from _rel_harness import AGENT_ENV, LONG, TALLY, recover_until_quiet
from _rel_invariants import Expect, attempts_monotonic, check_all, records, snapshot, verdict_lost

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("WATCHER_SOAK_SECONDS", "300" if LONG else "5"))
WORKERS = 4
# The long lane runs for its 5 minutes and until each of the 4 workers did 750 operations (3,000 in all).
MIN_OPS = 750 if LONG else 3
LABELS = [f"s{i:02d}" for i in range(14)]
CHAOS = {"verdict": 6, "malformed": 2, "invalid": 1, "529": 2, "slow": 2, "429:0.3": 0.3}
# 0 ran · 3 provider stop (429 / cooldown) · 4 pipeline lock busy (another batch held it > 5 s).
# No fault is injected into these processes, so 1 and 5 are always a bug.
ALLOWED = {0, 3, 4}


@dataclass
class Soak:
    data: Path
    export: Path
    fake: FakeProvider
    deadline: float
    ops: int = 0
    marks: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def note(self, problem: str) -> None:
        with self.lock:
            self.problems.append(problem)


def _batch(soak: Soak, rng: random.Random, entry: str) -> None:
    if rng.random() < 0.5:
        args = ["scan", "--source", str(soak.export)]
    else:
        args = ["recheck", *rng.sample(LABELS, rng.choice([0, 0, 1, 2]))]
    args += ["--limit", str(rng.randint(1, 6))]
    # Half the batches make their calls in parallel (SPEC §15.1), beside serial ones and the agent.
    args += ["--parallel", str(rng.choice([2, 4]))] if rng.random() < 0.5 else []
    if rng.random() < 0.1:  # die somewhere in the middle
        proc = start(entry, *args, data_dir=soak.data, env=soak.fake.env())
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        return
    done = run(entry, *args, data_dir=soak.data, env=soak.fake.env(), timeout=120)
    # recheck of an id never scanned yet is a usage error (2), as documented
    usage_ok = args[0] == "recheck" and done.returncode == 2 and "no comment" in done.stderr + done.stdout
    if done.returncode not in ALLOWED and not usage_ok:
        soak.note(f"{entry} {' '.join(args[:1] + args[2:] if args[0] == 'scan' else args)} exited "
                  f"{done.returncode}: {(done.stderr or done.stdout)[-300:]}")


def _mark(soak: Soak, rng: random.Random, entry: str, mine: list[str]) -> None:
    cid, triage = rng.choice(mine), rng.choice(["replied", "ignored", "open"])
    done = run(entry, "mark", cid, triage, data_dir=soak.data, env=soak.fake.env())
    if done.returncode == 0:
        with soak.lock:
            soak.marks[cid] = triage  # this worker alone marks cid, in order: last success wins
    elif done.returncode != 2:  # 2: not discovered yet
        soak.note(f"{entry} mark {cid} {triage} exited {done.returncode}: {done.stderr[-300:]}")


def _worker(soak: Soak, number: int) -> None:
    rng = random.Random(number * 7919)
    mine = [cid for i, cid in enumerate(LABELS) if i % WORKERS == number]
    ops = 0
    while time.monotonic() < soak.deadline or ops < MIN_OPS:
        entry = rng.choice(["cli", "bridge"])
        roll = rng.random()
        if roll < 0.65:
            _batch(soak, rng, entry)
        elif roll < 0.85:
            _mark(soak, rng, entry, mine)
        else:
            command = "signals" if roll < 0.95 else "status"
            done = run(entry, command, data_dir=soak.data, env=soak.fake.env())
            if done.returncode not in ALLOWED:
                soak.note(f"{entry} {command} exited {done.returncode}: {done.stderr[-300:]}")
        with soak.lock:
            soak.ops += 1
        ops += 1


INVALID = json.dumps({"needs_reply": "maybe"})
GONE = 4  # comments that leave dev.to during a soak; the others keep being edited
MIN_CHANGES = 12  # changes on dev.to in a soak, at least (a few seconds of the quick lane)


def _dev_to(soak: Soak) -> None:
    """dev.to while the batches run: edit a comment (its TAG stays, so the call log still names it),
    now and then delete one (childless: gone from the thread and the count) or flag or hide it. The
    export is replaced whole, as a fetch sees one answer or the next."""
    rng = random.Random(20261202)
    doc = json.loads(soak.export.read_text())
    article = doc["articles"][0]
    gone = 0
    edits = 0
    while time.monotonic() < soak.deadline or edits + gone < MIN_CHANGES:
        time.sleep(rng.uniform(0.1, 0.4))
        # Only what a scan has seen: a comment gone before it was ever fetched tests nothing.
        nodes = [n for n in article["comments"] if n["user"] and (soak.data / "inbox" / f"{n['id_code']}.json").exists()]
        if not nodes:
            continue
        node = rng.choice(nodes)
        roll = rng.random()
        if roll < 0.3 and gone < GONE:
            gone += 1
            if roll < 0.12:
                article["comments"].remove(node)
                article["comments_count"] -= 1
            else:
                node["body_html"] = "<p>[deleted]</p>" if roll < 0.21 else "<p>[hidden by post author]</p>"
                node["user"] = {}
        else:
            edits += 1
            label = node["id_code"]
            node["body_html"] = f"<p>TAG:{label} edit {edits}: {rng.choice(['never mind', 'and on macOS?'])}</p>"
        tmp = soak.export.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, soak.export)
        with soak.lock:
            soak.ops += 1


def _agent(soak: Soak) -> None:
    """Claim a few comments, then for each: submit a verdict (now and then an invalid one), sometimes
    twice (the second is refused), sometimes never (the agent went away and the lease runs out)."""
    rng = random.Random(20261130)
    ops = 0
    while time.monotonic() < soak.deadline or ops < MIN_OPS:
        entry = rng.choice(["cli", "bridge"])
        args = ["claim", "--limit", str(rng.randint(1, 3))] + (["--json"] if entry == "cli" else [])
        done = run(entry, *args, data_dir=soak.data, env=AGENT_ENV)
        ops += 1
        if done.returncode != 0:  # 4: a batch held the pipeline lock for 5 s
            if done.returncode != 4:
                soak.note(f"{entry} claim exited {done.returncode}: {(done.stderr or done.stdout)[-300:]}")
            continue
        for claimed in envelope(done)["result"]["claimed"]:
            roll = rng.random()
            if roll < 0.15:
                continue
            verdict = INVALID if roll > 0.75 else json.dumps(VERDICT)
            landed = False  # the first submit of a claim in its lease lands; any after it is refused
            for _ in range(2 if rng.random() < 0.25 else 1):
                sender = rng.choice(["cli", "bridge"])
                sent = run(sender, "submit", claimed["id"], str(claimed["n"]), verdict,
                           *(["--json"] if sender == "cli" else []), data_dir=soak.data, env=AGENT_ENV)
                ops += 1
                if sent.returncode == 4:  # a batch held the pipeline lock for 5 s: nothing was written
                    continue
                kind = (envelope(sent).get("error") or {}).get("kind")
                if (sent.returncode, kind) != ((2, "submit_refused") if landed else (0, None)):
                    soak.note(f"{sender} submit {claimed['id']} {claimed['n']} (landed before: {landed}) exited "
                              f"{sent.returncode}: {(sent.stderr or sent.stdout)[-300:]}")
                landed = True
    with soak.lock:
        soak.ops += ops


def _first_release_beside(soak: Soak, bin_dir: Path) -> None:
    """Version skew (SPEC §15.5): the first release runs status, inbox, show, scan, recheck and
    signals at random beside the workers, with its offline classifier. It may run on what only it
    wrote (version 1 files, before this release wrote one) and must otherwise exit 5 refusing a
    newer file — never quarantine, never drop a mark (the final check sees both)."""
    rng = random.Random(20261201)
    ops = 0
    while time.monotonic() < soak.deadline or ops < MIN_OPS:
        args = rng.choice([["status"], ["inbox", "--all"], ["show", rng.choice(LABELS)], ["signals"],
                           ["scan", "--source", str(soak.export), "--limit", "2"], ["recheck", "--limit", "2"]])
        done = subprocess.run([str(bin_dir / "watcher"), *args], capture_output=True, text=True, timeout=120,
                              env=_first_release.env(soak.data, WATCHER_PROVIDER="offline"), check=False)
        ops += 1
        said = done.stdout + done.stderr
        refused = done.returncode == 5 and "has schema_version 2" in said and "left untouched" in said
        unknown = done.returncode == 2 and args[0] in ("show", "recheck")  # not discovered yet
        if done.returncode not in (0, 4) and not refused and not unknown:
            soak.note(f"first release {' '.join(args[:1])} exited {done.returncode}: {said[-300:]}")
    with soak.lock:
        soak.ops += ops


def _monitor(soak: Soak, stop: threading.Event) -> None:
    """Sample the data dir while everything runs: nothing a sample promised may be taken back."""
    previous = None
    while not stop.wait(0.3):
        try:
            now = snapshot(soak.data, soak.fake.calls)
        except FileNotFoundError:
            continue  # the first scan has not created the files yet
        if previous is not None:
            recs = records(soak.data)
            for problem in attempts_monotonic(recs, previous):
                soak.note(f"while running: {problem}")
            for cid in previous.verdicts:
                if verdict_lost(recs.get(cid), previous, cid):
                    soak.note(f"while running: {cid} lost its verdict")
        previous = now


def test_concurrent_runs_from_both_entrypoints_keep_every_promise(
        tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Random scan/recheck/mark/signals from watcher and watcher-bridge, an agent claiming and submitting,
    comments edited, deleted and hidden meanwhile, random provider failures and kills — and, in the
    cross-version lane, the first release beside them: afterwards ≤ 3 calls + claims per comment (an
    edit included), each reserved first, none for a comment after it was seen gone, marks kept,
    counts match the log."""
    old_release = _first_release.for_session(tmp_path_factory) if _first_release.LANE else None
    data = tmp_path / "rig"
    with running_fake() as fake:
        fake.slow_s = 0.3
        fake.chaos(seed=20260514, weights=CHAOS)
        soak = Soak(data, write_export(tmp_path / "export.json", LABELS), fake, time.monotonic() + SECONDS)
        stop = threading.Event()
        monitor = threading.Thread(target=_monitor, args=(soak, stop))
        workers = [threading.Thread(target=_worker, args=(soak, n)) for n in range(WORKERS)]
        workers.append(threading.Thread(target=_agent, args=(soak,)))
        workers.append(threading.Thread(target=_dev_to, args=(soak,)))
        if old_release is not None:
            workers.append(threading.Thread(target=_first_release_beside, args=(soak, old_release)))
        for thread in [monitor, *workers]:
            thread.start()
        for thread in workers:
            thread.join()
        stop.set()
        monitor.join()
        recovery = recover_until_quiet(data, fake.env(), soak.export, fake=fake)
        found = soak.problems + recovery.problems
        found += check_all(data, fake.calls, expect=Expect(marks=soak.marks))
        calls = len(fake.calls)
    TALLY.add("soak_ops", soak.ops, [f"soak: {p}" for p in found])
    assert soak.ops >= WORKERS * MIN_OPS and calls > 0  # a worker that died early shows here
    assert found == []
