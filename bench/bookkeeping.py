"""Figure 1: bookkeeping per model call, against the floor of two durable writes per call.

Every model call costs at least two durable writes of the comment's inbox file: the
reservation (before the call) and the outcome (after it). That is the floor, measured here with
``watcher.store.durable.write_json`` on same-sized records in the same run and on the same disk.

Method: ``watcher.pipeline.recheck`` / ``scan`` run in-process on a :class:`~watcher.pipeline.Run`
of 200 calls, built as ``commands`` builds one (the 20-call cap of ``--limit`` is checked in
the command layer; it is a policy, not a cost, and 200 calls in one batch is what isolates the
per-call cost from the once-per-run cost). The provider is injected through
``Hooks(make_provider=...)``. Everything else is the product code unchanged: plan, lock,
reconcile, per-item re-read / reserve / call / save, one signal line per outcome, the seen.json
merge-save, the signal counter at the end.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    VERDICT,
    Row,
    WriteCounter,
    comment,
    forem_node,
    median,
    ms,
    patched,
    prompt_for,
    record_bytes,
    run_of,
    settings,
    temp_dir,
    timed,
    write_plain,
)

from watcher import pipeline
from watcher.state import records as rec
from watcher.config import Settings
from watcher.models import AttemptError, InboxRecord, Prompt, SeenFile, Usage
from watcher.pipeline import Hooks
from watcher.pipeline.batch import Batch
from watcher.providers.base import CallResult, ProbeResult
from watcher.store import durable

try:
    from watcher.store.files import FileStore
except ImportError:  # a tree from before the store package split (bench/ab.py)
    from watcher.store import FileStore  # type: ignore[attr-defined,no-redef]

RAW = json.dumps(VERDICT.model_dump())


class InstantProvider:
    """Answers every prompt at once with a valid verdict: isolates bookkeeping from the model."""

    name = "bench"
    model = "instant"

    def complete(self, prompt: Prompt) -> CallResult:
        return CallResult(verdict=VERDICT, raw=RAW, usage=Usage(input_tokens=300, output_tokens=40), duration_ms=0)

    def probe(self) -> ProbeResult:
        return ProbeResult(ok=True, message="instant")

    def close(self) -> None:
        pass


INSTANT = Hooks(make_provider=lambda _settings: InstantProvider())


def _new_record(i: int) -> InboxRecord:
    c = comment(i, article_id=1 + i // 50)
    return rec.new_record(c, prompt_for(c))


def _failed_record(i: int) -> InboxRecord:
    reserved = rec.reserve(_new_record(i), command="scan", entrypoint="cli", provider="bench", model="instant")
    error = AttemptError(kind="malformed_json", message="the model answered text that is not JSON")
    return rec.finish(reserved, verdict=None, error=error, raw="Sure! Here is my verdict: needs reply.",
                        duration_ms=800)


def _seed_failed(s: Settings, n: int) -> list[InboxRecord]:
    """n failed comments (one malformed attempt each) and an up-to-date index: recheck's input.

    Each first attempt took its comment's call lock (SPEC §15.1), so its lock file exists, as on
    any data dir where a recheck has something to retry; a scan of new comments (1c) creates them."""
    records = [_failed_record(i) for i in range(n)]
    call_locks = hasattr(s.paths, "call_lock")  # a tree from before the call lock (bench/ab.py) has none
    if call_locks:
        s.paths.call_locks.mkdir(parents=True, exist_ok=True)
    for record in records:
        write_plain(s.paths.inbox_file(record.comment.id), record_bytes(record))
        if call_locks:
            s.paths.call_lock(record.comment.id).touch()
    index, _ = FileStore(s.paths).reconcile_index(SeenFile())
    durable.write_model(s.paths.seen, index)
    return records


def _floor_writer(directory: Path, records: list[InboxRecord], between: Callable[[], object] | None = None, *,
                  new: bool = False, first_creates: bool = False) -> Callable[[int, int], float]:
    """Two durable writes per call, the reserved record then the finished one, same sizes, each
    replacing the comment's file as a call's reservation and outcome replace it; ``between``
    (figure 1b: one bare POST) runs between the two, where a call makes its request. ``new``
    (figure 1c): a third write first creates the file with the discovered record, as a scan of a
    new comment does. Otherwise the record is there before the timing starts, as a failed
    comment's is before its recheck (written as ``_seed_failed`` writes the inbox files).

    ``first_creates``: the floor as measured until 2026-12-01 evening, whose first write created
    its file (and whose 1c creation went to another file); a call never does that, and on this
    ext4 a replace costs 10-25 % more than a create (bench/README.md). Kept for the notes only.

    Returns ``write(start, stop)`` timing the floor for calls ``start:stop``, so the floor can be
    split around the measured batch (half before, half after): fsync latency on a shared disk
    drifts over seconds, and bracketing makes floor and batch see the same drift.
    """
    writes: list[tuple[tuple[Path, dict[str, Any]], ...]] = []
    for record in records:
        reserved = rec.reserve(record, command="recheck", entrypoint="cli", provider="bench", model="instant")
        finished = rec.finish(reserved, verdict=VERDICT, error=None, raw=RAW,
                                usage=Usage(input_tokens=300, output_tokens=40), duration_ms=0)
        path = directory / f"{record.comment.id}.json"
        pair = ((path, reserved.model_dump(mode="json")), (path, finished.model_dump(mode="json")))
        if new:
            created = directory / f"new-{record.comment.id}.json" if first_creates else path
            pair = ((created, record.model_dump(mode="json")), *pair)
        writes.append(pair)
    directory.mkdir(parents=True, exist_ok=True)
    if not new and not first_creates:
        for record in records:
            write_plain(directory / f"{record.comment.id}.json", record_bytes(record))

    def write(start: int, stop: int) -> float:
        def write_all() -> None:
            if new:  # discovery creates the new records first, then the calls come (locked.carry_out)
                for steps in writes[start:stop]:
                    durable.write_json(*steps[0])
            for steps in writes[start:stop]:
                durable.write_json(*steps[-2])
                if between is not None:
                    between()
                durable.write_json(*steps[-1])

        return timed(write_all)

    return write


def _bracketed(floors: list[Callable[[int, int], float]], n: int, batch: Callable[[], Any],
               counter: WriteCounter | None) -> tuple[list[float], float]:
    """([each floor], batch) seconds: half of each floor before the batch, half after, the second
    halves in reverse order: the first floor (the one a ratio is of) runs first and last, the
    others nearer the batch. The setup's own writes are flushed first (``os.sync``): they are
    nobody's cost. Which runs where matters on this ext4: writes made after others churned inodes
    pay for it (bench/README.md, figure 1 notes)."""
    os.sync()
    before = [floor(0, n // 2) for floor in floors]
    if counter is not None:
        with counter.active():
            measured = timed(batch)
    else:
        measured = timed(batch)
    after = [floor(n // 2, n) for floor in reversed(floors)][::-1]
    return [b + a for b, a in zip(before, after, strict=True)], measured


def _field(doc: Any, name: str) -> Any:
    """A field of a batch's result: a model, or the dict a tree from before typed results returns (bench/ab.py)."""
    return doc[name] if isinstance(doc, dict) else getattr(doc, name)


def _calls(doc: Any) -> int:
    return int(_field(doc, "calls"))


def _recheck(s: Settings, n: int, hooks: Hooks) -> Any:
    doc, error = pipeline.recheck(run_of(s, "recheck", limit=n, hooks=hooks))
    if error is not None or _calls(doc) != n:
        raise RuntimeError(f"recheck did not make {n} calls: {error} {_field(doc, 'counts')}")
    return doc


WARM = 10


def _warm_up(batch_of: Callable[[Path, int], Callable[[], object]], base: Path | None) -> str:
    """Two batches of ``WARM`` calls before the timed reps, each in a fresh data dir; returns the note.

    The first batch in a process also pays for what a process does once: importing the modules
    the pipeline imports when it first needs them, pydantic's first-use schema builds, the
    provider's first client. Without this, rep 0 alone paid for them and rep 0 came out above
    the other reps (bench/README.md, figure 1 notes). Both batches are timed for the note, so
    that once-per-process cost is still printed, as the difference between the two.
    ``batch_of(root, k)`` sets up a data dir under ``root`` and returns its batch of ``k`` calls."""
    times = []
    for _ in range(2):
        with temp_dir(base, "warm") as root:
            times.append(timed(batch_of(root, WARM)))
    return (f"warm-up, not in the reps: two batches of {WARM} calls took {ms(times[0])} (a process's first: "
            f"first imports and schema builds, paid once per process) and {ms(times[1])}")


def _measure(base: Path | None, n: int, reps: int, *, label: str, hooks: Hooks,
             configure: Callable[[Path], Settings], between: Callable[[], object] | None = None
             ) -> tuple[list[float], list[float], WriteCounter, list[float], str]:
    """Reps of (floor, recheck of n failed comments, floor); fresh data dir each rep, after a
    warm-up (:func:`_warm_up`, whose note is the last item). The fourth list: the floor as
    measured before 2026-12-01 evening (its first write a create), for the notes."""

    def batch_of(root: Path, k: int) -> Callable[[], object]:
        s = configure(root)
        _seed_failed(s, k)
        return lambda: _recheck(s, k, hooks)

    warm = _warm_up(batch_of, base)
    floors, runs, olds = [], [], []
    counter = WriteCounter()
    for rep in range(reps):
        with temp_dir(base, label) as root:
            s = configure(root)
            records = _seed_failed(s, n)
            (floor, old), measured = _bracketed(
                [_floor_writer(root / "floor", records, between),
                 _floor_writer(root / "old-floor", records, between, first_creates=True)],
                n, lambda s=s: _recheck(s, n, hooks), counter if rep == 0 else None)
            floors.append(floor)
            olds.append(old)
            runs.append(measured)
    return floors, runs, counter, olds, warm


def _old_floor_note(runs: list[float], olds: list[float]) -> str:
    return ("the same batches against the floor as measured until 2026-12-01 evening (its first write created "
            f"a file, which no call does; bench/README.md): {_ratio(runs, olds)[0]:.2f}×")


def _ratio(runs: list[float], floors: list[float]) -> tuple[float, str]:
    """Median of the per-rep ratios, and the list of them for the notes."""
    ratios = [r / f for r, f in zip(runs, floors, strict=True)]
    return median(ratios), "per-rep ratios " + ", ".join(f"{r:.2f}" for r in ratios)


def _notes(counter: WriteCounter, n: int, *, floor_fsyncs: int) -> list[str]:
    w = counter.writes
    return [f"seen.json saved {w['seen.json']}× per batch of {n} (target: once per batch)",
            (f"durable writes in that batch: inbox {w['inbox/*.json']} ({w['inbox/*.json'] / n:.0f} per call), "
            f"seen.json {w['seen.json']}, signals state {w['signals/state.json']} + cursor {w['signals/cursor.json']}"),
            (f"fsyncs per call: {counter.fsyncs / n:.2f} (floor: {floor_fsyncs}, file + directory per durable write;"
            " the observation log is appended without one and fsynced once per count)")]


def bench_instant(base: Path | None, n: int, reps: int) -> Row:
    floors, runs, counter, olds, warm = _measure(base, n, reps, label="book", hooks=INSTANT, configure=settings)
    ratio, spread = _ratio(runs, floors)
    notes = [*_notes(counter, n, floor_fsyncs=4), f"{reps} reps; {spread}", warm, _old_floor_note(runs, olds),
             *_diagnose(base, n)]
    ok = ratio <= 1.5 and counter.writes["seen.json"] == 1
    return Row("1a", f"recheck of {n} failed comments, in-process instant provider (whole command, per call)",
               f"{ms(median(runs) / n)}/call", f"{ms(median(floors) / n)}/call (2 × durable.write_json)",
               ratio, "≤ 1.50×", ok, notes)


def _diagnose(base: Path | None, n: int) -> list[str]:
    """Where the time above the floor goes: the per-outcome observation append, measured."""
    from watcher.config import Paths

    with temp_dir(base, "diag") as root:
        s = settings(root)
        records = _seed_failed(s, n)
        # A diagnosis only, so a patch is fine here: every observation append is skipped.
        with patched(Batch, "emit", lambda *_a, **_k: None):
            (floor,), measured = _bracketed([_floor_writer(root / "floor", records)], n,
                                            lambda: _recheck(s, n, INSTANT), None)
        paths = Paths(root / "emit")
        write = timed(lambda: [durable.write_json(root / "floor" / "one.json", {"x": 1}) for _ in range(n)])
        store = FileStore(paths)
        line = {"key": "verdict.ok", "comment": "b0000001", "run": "bench", "entrypoint": "cli"}
        emit = timed(lambda: [store.append_signals([line]) for _ in range(n)])
    return [f"diagnosis: the same batch with observation appends switched off: {measured / floor:.2f}× the floor",
            (f"diagnosis: one observation append (signals lock + one write) costs {ms(emit / n)}, "
            f"one small durable write {ms(write / n)} on this disk")]


def bench_loopback(base: Path | None, n: int, reps: int) -> Row:
    """The same batch through the real OpenAI provider against the loopback fake (127.0.0.1).

    The floor's bare POST is made where a call makes its request: between the two writes. A POST
    right after an fsync'd write costs more than the same POST in a tight loop (the process slept
    in fsync, and every thread hand-over of the exchange then waits to be scheduled again): here
    ~1 ms more on a loaded machine, ~0.1 ms on tmpfs. The tight-loop time is in the notes."""
    import httpx
    from _fakes.provider import running_fake
    from pydantic import SecretStr

    with running_fake() as fake, httpx.Client(timeout=30.0) as client:
        url = f"{fake.base_url}/chat/completions"
        body = {"model": "fake-model", "messages": [{"role": "user", "content": "TAG:bare " + "x" * 1500}]}
        posts: list[float] = []

        def configure(root: Path) -> Settings:
            return settings(root, provider="openai", model="fake-model", base_url=fake.base_url,
                            api_key=SecretStr("sk-bench"), timeout=30.0)

        def bare_post() -> None:
            # The HTTP floor: one bare POST to the same server through one client.
            posts.append(timed(lambda: client.post(url, json=body)))

        client.post(url, json=body)
        # No hook: the run builds the real OpenAI provider from its settings, as a user's run does.
        floors, runs, counter, olds, warm = _measure(base, n, reps, label="http", hooks=Hooks(),
                                                     configure=configure, between=bare_post)
        tight = [timed(lambda: client.post(url, json=body)) for _ in range(n)]
        calls = len(fake.calls) - len(posts) - len(tight) - 1 - 2 * WARM
    ratio, spread = _ratio(runs, floors)
    notes = [f"the fake recorded {calls} model calls for {reps} batches of {n}: one request per call",
             *_notes(counter, n, floor_fsyncs=4), f"{reps} reps; {spread}", warm, _old_floor_note(runs, olds),
             (f"the floor's bare POST between its writes: median {ms(median(posts))}; the same POST in a tight "
              f"loop: {ms(median(tight))}")]
    return Row("1b", f"recheck of {n} failed comments, OpenAI provider over loopback HTTP (per call)",
               f"{ms(median(runs) / n)}/call", f"{ms(median(floors) / n)}/call (2 writes + 1 bare httpx POST between them)",
               ratio, "≤ 1.50×", ratio <= 1.5 and counter.writes["seen.json"] == 1, notes)


def _scan_of(root: Path, n: int) -> Callable[[], None]:
    """A data dir under ``root`` and an export of n comments no run has seen; returns the scan of them."""
    s = settings(root)
    export = root / "export.json"
    write_plain(export, json.dumps({"username": "me", "articles": [{
        "id": 1, "title": "Article 1", "url": "https://dev.to/me/article-1", "comments_count": n,
        "comments": [forem_node(i) for i in range(n)]}]}).encode())

    def batch() -> None:
        doc, error = pipeline.scan(run_of(s, "scan", limit=n, hooks=INSTANT), source=str(export))
        if error is not None or _calls(doc) != n:
            raise RuntimeError(f"scan did not make {n} calls: {error} {_field(doc, 'counts')}")

    return batch


def bench_scan(base: Path | None, n: int, reps: int) -> Row:
    """scan of n never-seen comments: discovery creates the inbox file first, so the floor is 3 writes:
    the new record, then its reservation and its outcome replacing it."""
    warm = _warm_up(_scan_of, base)
    floors, runs, olds = [], [], []
    counter = WriteCounter()
    for rep in range(reps):
        with temp_dir(base, "scan") as root:
            batch = _scan_of(root, n)
            records = [_new_record(i) for i in range(n)]
            three = _floor_writer(root / "floor", records, new=True)
            (floor, old), measured = _bracketed(
                [three, _floor_writer(root / "old-floor", records, new=True, first_creates=True)],
                n, batch, counter if rep == 0 else None)
            floors.append(floor)
            olds.append(old)
            runs.append(measured)
    ratio, spread = _ratio(runs, floors)
    notes = [*_notes(counter, n, floor_fsyncs=6), f"{reps} reps; {spread}", warm, _old_floor_note(runs, olds)]
    return Row("1c", f"scan of {n} new comments from an export, instant provider (per call, discovery included)",
               f"{ms(median(runs) / n)}/call", f"{ms(median(floors) / n)}/call (3 × durable.write_json)", ratio,
               "≤ 1.50×", ratio <= 1.5 and counter.writes["seen.json"] == 1, notes)


def run(base: Path | None, *, quick: bool) -> list[Row]:
    n, reps = (50, 2) if quick else (200, 3)
    return [bench_instant(base, n, reps), bench_loopback(base, n, reps), bench_scan(base, n, reps)]
