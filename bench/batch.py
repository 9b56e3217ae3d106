"""Batches: a 20-comment scan's wall time, the pipeline lock's holds, watcher's own cost per call.

``batch``: ``watcher scan --source FILE --limit 20 --parallel 4`` as a process against the
loopback fake provider (tests/_fakes/provider.py) answering every call after 50 ms. Floor: the
same scan with the fake answering at once (start-up, discovery, bookkeeping), plus the calls
alone, ceil(20/4) × 50 ms; runs interleaved, medians compared.

``lock``: a ``recheck`` of 20 failed comments, ``--parallel 4``, in this process against the same
fake, with every hold of the pipeline lock timed by a store that wraps the real one
(``Hooks.make_store``). While a batch holds the lock every other command waits (SPEC §15.1).
Floor: two durable writes per call of the batch's own records (``watcher.store.durable``).

``per-call``: a ``recheck`` of 200 failed comments in this process with a provider that answers
at once, per call, against two durable writes of the same records per call (the reservation and
the outcome every call must write). Half the floor is timed before the batch and half after, so
the drift of a shared disk's fsync latency hits both.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from _common import (
    BIN,
    Row,
    clean_env,
    instant_hooks,
    median,
    ms,
    process,
    run_of,
    settings,
    temp_dir,
    timed,
    write_export,
)
from pydantic import SecretStr

from watcher import pipeline
from watcher.config import Paths, Settings
from watcher.pipeline import Hooks
from watcher.store import durable
from watcher.store.files import FileStore

CALLS = 20
PARALLEL = 4
LATENCY_S = 0.05
BATCH_TARGET = 1.2  # --parallel 1 would be ~1.5x here: 750 ms more on a ~1.5 s floor
LOCK_TOTAL_TARGET = 3.0
LOCK_LONGEST_TARGET = 10.0
PER_CALL_TARGET = 1.5


# ---- batch: the scan a person waits for ---------------------------------------------------------


def _scan_process(root: Path, fake: Any, latency: float) -> float:
    """One 20-comment ``watcher scan --parallel 4`` on a fresh data dir, start to exit, with the
    fake answering each call after ``latency`` seconds."""
    fake.default, fake.slow_s = ("slow", latency) if latency else ("verdict", 0.0)
    env = clean_env(root / "data", **fake.env())
    export = write_export(root / "export.json", CALLS)
    argv = [str(BIN / "watcher"), "scan", "--source", str(export), "--limit", str(CALLS)]
    before = len(fake.calls)
    took = timed(lambda: process([*argv, "--parallel", str(PARALLEL)], env))
    if len(fake.calls) - before != CALLS:
        raise RuntimeError(f"the scan made {len(fake.calls) - before} model calls, not {CALLS}")
    return took


def run_batch(base: Path | None, *, quick: bool) -> list[Row]:
    from _fakes.provider import running_fake

    reps = 2 if quick else 5
    ideal = math.ceil(CALLS / PARALLEL) * LATENCY_S
    walls, instants = [], []
    with running_fake() as fake:
        with temp_dir(base, "batch-warm") as root:
            _scan_process(root, fake, 0.0)  # warm: .pyc files, page cache
        for rep in range(reps):  # interleaved, so the machine's load hits both alike
            with temp_dir(base, f"batch{rep}") as root:
                instants.append(_scan_process(root / "instant", fake, 0.0))
                walls.append(_scan_process(root / "slow", fake, LATENCY_S))
        most = fake.max_active
    wall, instant = median(walls), median(instants)
    floor = instant + ideal
    ratio = wall / floor
    serial = CALLS * LATENCY_S - ideal
    notes = [
        (
            f"floor: the same scan answered at once ({ms(instant)}) + ceil({CALLS}/{PARALLEL}) × "
            f"{ms(LATENCY_S)} of calls; --parallel 1 would add {ms(serial)} more"
        ),
        f"the fake answered at most {most} calls at once (--parallel {PARALLEL})",
        f"median of {reps} interleaved runs; walls {', '.join(ms(w) for w in walls)}",
    ]
    title = (
        f"`watcher scan --parallel {PARALLEL}` of {CALLS} new comments, provider answering in 50 ms"
    )
    return [
        Row(
            "batch.scan",
            title,
            ms(wall),
            f"{ms(floor)} (the scan answered at once + the calls' 250 ms)",
            ratio,
            f"≤ {BATCH_TARGET:.2f}×",
            ratio <= BATCH_TARGET,
            notes,
        )
    ]


# ---- lock: how long a batch keeps every other command waiting -----------------------------------


class TimedStore(FileStore):
    """The real file store, with every hold of the pipeline lock timed (the wait excluded)."""

    def __init__(self, paths: Paths) -> None:
        super().__init__(paths)
        self.holds: list[float] = []

    @contextmanager
    def pipeline_lock(self, *, timeout: float | None = None) -> Iterator[None]:
        with super().pipeline_lock(timeout=timeout):
            began = time.perf_counter()
            try:
                yield
            finally:
                self.holds.append(time.perf_counter() - began)


def _provider_settings(root: Path, base_url: str) -> Settings:
    return settings(
        root,
        provider="openai",
        model="fake-model",
        base_url=base_url,
        api_key=SecretStr("sk-bench"),
        timeout=30.0,
    )


def _two_writes_per_call(root: Path, inbox: Path) -> float:
    """Seconds per call of two durable writes of each record in ``inbox``, each replacing its
    file."""
    floor = root / "floor"
    floor.mkdir(parents=True, exist_ok=True)
    docs = [(floor / p.name, json.loads(p.read_bytes())) for p in sorted(inbox.glob("*.json"))]
    for path, doc in docs:
        path.write_text(json.dumps(doc))
    return timed(partial(_write_twice, docs)) / len(docs)


def _write_twice(pairs: list[tuple[Path, Any]]) -> None:
    """Two durable writes of each record, each replacing its file: a call's reservation, then
    its outcome."""
    for path, doc in pairs:
        durable.write_json(path, doc)
        durable.write_json(path, doc)


def run_lock(base: Path | None, *, quick: bool) -> list[Row]:
    from _fakes.provider import running_fake

    with running_fake() as fake, temp_dir(base, "lock") as root:
        s = _provider_settings(root / "data", fake.base_url)
        export = write_export(root / "export.json", CALLS)
        fake.default = "malformed"  # the seeding scan: 20 failed comments, answered at once
        seeded, error = pipeline.scan(
            run_of(s, "scan", limit=CALLS, hooks=Hooks(), parallel=PARALLEL), source=str(export)
        )
        if error is not None or seeded.counts.get("error") != CALLS:
            raise RuntimeError(
                f"the seeding scan left no {CALLS} failed comments: {error} {seeded.counts}"
            )
        fake.default, fake.slow_s = "slow", LATENCY_S
        store = TimedStore(s.paths)
        hooks = Hooks(make_store=lambda _paths: store)
        run = run_of(s, "recheck", limit=CALLS, hooks=hooks, parallel=PARALLEL)
        wall = timed(lambda: pipeline.recheck(run))
        floor = median([_two_writes_per_call(root / f"f{i}", s.paths.inbox) for i in range(3)])
    holds = store.holds
    per_call, longest = sum(holds) / CALLS, max(holds)
    share = (
        f"the batch took {ms(wall)}, the lock was held {ms(sum(holds))} of it ({len(holds)} holds)"
    )
    return [
        Row(
            "lock.total",
            f"pipeline lock held during a --parallel {PARALLEL} recheck of {CALLS}, all, per call",
            ms(per_call),
            f"{ms(floor)} (2 durable writes of the records)",
            per_call / floor,
            f"≤ {LOCK_TOTAL_TARGET:.2f}×",
            per_call / floor <= LOCK_TOTAL_TARGET,
            [share],
        ),
        Row(
            "lock.longest",
            "the longest single hold of the pipeline lock in that batch",
            ms(longest),
            ms(floor),
            longest / floor,
            f"≤ {LOCK_LONGEST_TARGET:.2f}×",
            longest / floor <= LOCK_LONGEST_TARGET,
            [f"holds, longest first: {', '.join(ms(h) for h in sorted(holds, reverse=True)[:5])}"],
        ),
    ]


# ---- per-call: watcher's own cost around each model call ----------------------------------------


def _seed_failed(root: Path, n: int) -> Settings:
    """A data dir with ``n`` comments whose one attempt failed (malformed): recheck's input."""
    s = settings(root / "data")
    export = write_export(root / "export.json", n)
    run = run_of(s, "scan", limit=n, hooks=instant_hooks(malformed=True))
    doc, error = pipeline.scan(run, source=str(export))
    if error is not None or doc.counts.get("error") != n:
        raise RuntimeError(f"the seeding scan left no {n} failed comments: {error} {doc.counts}")
    return s


def _recheck(s: Settings, n: int) -> None:
    doc, error = pipeline.recheck(run_of(s, "recheck", limit=n, hooks=instant_hooks()))
    if error is not None or doc.calls != n:
        raise RuntimeError(f"the recheck did not make {n} calls: {error} {doc.counts}")


def _floor_writer(root: Path, docs: list[Any]) -> Any:
    """``write(start, stop)``: seconds of two durable writes of records ``start:stop``, each
    replacing the record's file as a call's reservation and outcome replace it."""
    floor = root / "floor"
    floor.mkdir(parents=True, exist_ok=True)
    paths = [floor / f"{i}.json" for i in range(len(docs))]
    for path, doc in zip(paths, docs, strict=True):
        path.write_text(json.dumps(doc))

    def write(start: int, stop: int) -> float:
        return timed(
            partial(_write_twice, list(zip(paths[start:stop], docs[start:stop], strict=True)))
        )

    return write


def run_per_call(base: Path | None, *, quick: bool) -> list[Row]:
    n, reps = (50, 2) if quick else (200, 3)
    with temp_dir(base, "per-call-warm") as root:
        # Warm-up (a process's first batch pays its first imports), and the finished records
        # the floor writes: the same size as the batch's.
        s = _seed_failed(root, n)
        first = timed(lambda: _recheck(s, n))
        docs = [json.loads(p.read_bytes()) for p in sorted(s.paths.inbox.glob("*.json"))]
    ratios, runs, floors = [], [], []
    for rep in range(reps):
        with temp_dir(base, f"per-call{rep}") as root:
            s = _seed_failed(root, n)
            write = _floor_writer(root, docs)
            os.sync()  # the setup's writes are nobody's cost
            before = write(0, n // 2)
            measured = timed(partial(_recheck, s, n))
            floor = before + write(n // 2, n)
            ratios.append(measured / floor)
            runs.append(measured)
            floors.append(floor)
    ratio = median(ratios)
    notes = [
        f"{reps} reps, per-rep ratios {', '.join(f'{r:.2f}' for r in ratios)}",
        f"warm-up batch (a process's first, not in the reps): {ms(first / n)}/call",
    ]
    return [
        Row(
            "per-call",
            f"recheck of {n} failed comments, provider answering at once, per call",
            f"{ms(median(runs) / n)}/call",
            f"{ms(median(floors) / n)}/call (2 durable writes)",
            ratio,
            f"≤ {PER_CALL_TARGET:.2f}×",
            ratio <= PER_CALL_TARGET,
            notes,
        )
    ]
