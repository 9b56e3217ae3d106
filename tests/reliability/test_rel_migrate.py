"""``watcher migrate`` in the fault rig (SPEC §16.3): killed at any point and rerun, a migration
loses no mark and no attempt, brings in no sample comment, and counts no signal twice.

The source is a store shaped as the first release (0.1.0) left it in ``./data``: files at
``schema_version`` 1 with only that release's fields, a comment with a verdict marked replied,
one marked ignored, a failed one with 2 attempts spent, an orphaned reservation, a cooldown in
``provider.json``, settings in ``config.toml``, a counted observation log, and comments of the
bundled sample (one under the id it had in 0.1.0). Each case copies it and a destination — an empty data dir, or one that
already holds comments of its own — and:

- SIGKILLs a real ``watcher migrate`` at one point (:data:`_faults.sitecustomize.MIGRATE_POINTS`
  and the store's points a migration meets), checks that every command then refuses the data dir
  (exit 2 naming the migration) unless the migration had finished, reruns it, and checks the
  promises below; then runs it a third time and checks that no byte of state changed;
- or records the in-process migration's file operations and checks every state a power cut could
  leave (tests/reliability/_rel_powerloss.py): a state whose migration marker is gone already
  keeps every promise; every state does once migrate is rerun (the quick lane reruns on a sample
  of the states, the long lane on each).

The promises: every comment's counted attempts (``max(len(attempts), seen.json's)``, SPEC §4.1)
are at least the source's; every mark of either store is there, the later one where both marked
(the source's marks have no time: the data dir's timed one wins); the data dir's own comments stay;
no comment of the sample is in the data dir; the cooldown holds; and the counter, run after, counts
each of the source's (non-sample) signal lines once beside the data dir's own; the data dir has the
source's config.toml unless it had its own.
"""

from __future__ import annotations

import json
import shutil
import signal
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _fakes import records as rec
from _fakes.provider import IN_PROCESS_ENV, FakeProvider, in_process_hooks
from _faults.sitecustomize import MIGRATE_POINTS
from _proc import run, run_main, write_export
from _rel_harness import LONG, TALLY
from _rel_powerloss import materialize, recording

from watcher.commands.forget import sample_articles
from watcher.config import Paths
from watcher.state import records
from watcher.store.files import FileStore
from watcher.util.timeutil import iso, utcnow

pytestmark = pytest.mark.slow

# The store's own points a migration meets (its two index saves, provider.json, the signal
# append), and a later comment of the copy: a kill with earlier comments brought and later ones not.
POINTS = [
    *MIGRATE_POINTS,
    "migrate_after_comment:4",
    "before_seen_save",
    "before_seen_save:2",  # the comments indexed, the source's marks not yet (the second save)
    "after_seen_save:2",
    "after_cooldown_write",
    "after_signal_append",
]
DESTINATIONS = ("empty", "holding")
# A sample comment under its 0.1.0 id, and one under today's.
SAMPLE = ("4cdz", "3bkf")
SOURCE_MARKS = {"m2": "replied", "m3": "ignored"}
# The destination's own: m2 marked there after the source marked it (the later mark wins).
DEST_MARKS = {"m2": "ignored", "d1": "replied"}
# Power-loss states the quick lane reruns migrate on (the long lane: every state).
QUICK_SAMPLE = 6

# What the first release's files held: anything else in them, it could not read.
_V1 = {
    "seen": {"schema_version", "comments", "articles"},
    "entry": {"article_id", "status", "attempts", "triage", "first_seen_at", "updated_at", "inbox_stamp"},
    "article": {"title", "comments_count", "checked_at", "url"},
    "record": {"schema_version", "comment", "prompt", "cap", "attempts", "verdict"},
    "comment": {"id", "article_id", "article_title", "article_url", "parent_id", "author", "created_at", "text",
                "url"},
    "attempt": {"n", "reserved_at", "command", "entrypoint", "pid", "provider", "model", "outcome", "finished_at",
                "error", "raw", "usage", "duration_ms"},
    "error": {"kind", "message", "http_status", "retry_after_s"},
}


@dataclass(frozen=True)
class Stores:
    source: Path
    destinations: dict[str, Path]


def _only(doc: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k in _V1[kind]}


def _as_first_release(root: Path) -> None:
    """Rewrite a store as the first release wrote it: version 1, its fields only."""
    seen = json.loads((root / "seen.json").read_text())
    seen = _only(seen, "seen") | {"schema_version": 1}
    seen["comments"] = {c: _only(e, "entry") for c, e in seen["comments"].items()}
    seen["articles"] = {a: _only(e, "article") for a, e in seen["articles"].items()}
    (root / "seen.json").write_text(json.dumps(seen))
    for path in (root / "inbox").glob("*.json"):
        doc = _only(json.loads(path.read_text()), "record") | {"schema_version": 1}
        doc["comment"] = _only(doc["comment"], "comment")
        doc["attempts"] = [_only(a, "attempt") | ({"error": _only(a["error"], "error")} if a.get("error") else {})
                           for a in doc["attempts"]]
        path.write_text(json.dumps(doc))
    until = iso(utcnow().replace(microsecond=0).replace(year=utcnow().year + 1))
    (root / "provider.json").write_text(json.dumps({"schema_version": 1, "cooldown_until": until,
                                                   "reason": "rate limited (429)"}))
    (root / "config.toml").write_text("timeout = 30\n")  # the first release read its settings here


def _scan(root: Path, export: Path, fake: FakeProvider) -> None:
    done = run_main("cli", "scan", "--source", str(export), data_dir=root, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake))
    assert done.returncode == 0, done.stdout + done.stderr


def _mark(root: Path, marks: dict[str, str]) -> None:
    for cid, triage in marks.items():
        assert run_main("cli", "mark", cid, triage, data_dir=root, env=IN_PROCESS_ENV).returncode == 0


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    """The first release's store, and the two destinations; built once, copied per case."""
    work = tmp_path_factory.mktemp("migrate")
    src = work / "old"
    src.mkdir()
    fake = FakeProvider()
    fake.script("m1", "malformed")
    _scan(src, write_export(work / "old.json", ["m1", "m2", "m3", "orph", "m5", "m6"]), fake)
    assert run_main("cli", "recheck", "m1", data_dir=src, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake)).returncode in (0, 3)
    _mark(src, SOURCE_MARKS)
    store = FileStore(Paths(src))
    orph = store.load_record("orph")
    assert orph is not None
    store.save_record(records.reserve(orph.model_copy(update={"verdict": None, "attempts": orph.attempts[:0]}),
                                      command="scan", entrypoint="cli", provider="openai", model="fake-model",
                                      pid=4_999_999))
    for cid in SAMPLE:
        store.save_record(rec.record(cid, article_id=min(sample_articles())))
    assert run_main("cli", "signals", data_dir=src, env=IN_PROCESS_ENV).returncode == 0
    _as_first_release(src)
    dests = {"empty": work / "empty"}
    dests["empty"].mkdir()
    holding = dests["holding"] = work / "holding"
    holding.mkdir()
    _scan(holding, write_export(work / "new.json", ["m1", "m2", "d1"]), FakeProvider())
    _mark(holding, DEST_MARKS)
    assert run_main("cli", "signals", data_dir=holding, env=IN_PROCESS_ENV).returncode == 0
    return Stores(src, dests)


# ---- the promises ----------------------------------------------------------------------------------


def _seen(root: Path) -> dict[str, dict[str, Any]]:
    path = root / "seen.json"
    return json.loads(path.read_text())["comments"] if path.exists() else {}  # type: ignore[no-any-return]


def _counted(root: Path) -> dict[str, int]:
    """Each comment's counted attempts: max(len(attempts), seen.json's) (SPEC §4.1)."""
    counted = {cid: e["attempts"] for cid, e in _seen(root).items()}
    for path in sorted((root / "inbox").glob("*.json")) if (root / "inbox").is_dir() else []:
        cid = path.stem
        counted[cid] = max(counted.get(cid, 0), len(json.loads(path.read_text())["attempts"]))
    return counted


def _log_counts(root: Path, skip: tuple[str, ...] = ()) -> Counter[str]:
    path = root / "observations.jsonl"
    lines = path.read_bytes().splitlines() if path.exists() else []
    found: Counter[str] = Counter()
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("key"), str) and event.get("comment") not in skip:
            found[event["key"]] += 1
    return found


@dataclass(frozen=True)
class Expected:
    attempts: dict[str, int]
    marks: dict[str, str]
    cooldown: str
    signals: Counter[str]
    config: bytes  # the data dir's config.toml: its own, else the source's


def _expected(src: Path, dest: Path) -> Expected:
    attempts = {c: n for c, n in _counted(src).items() if c not in SAMPLE}
    for cid, n in _counted(dest).items():
        attempts[cid] = max(attempts.get(cid, 0), n)
    marks = dict(SOURCE_MARKS) | {c: e["triage"] for c, e in _seen(dest).items() if e["triage"] != "open"}
    cooldown = json.loads((src / "provider.json").read_text())["cooldown_until"]
    config = (dest if (dest / "config.toml").exists() else src) / "config.toml"
    return Expected(attempts, marks, cooldown, _log_counts(src, SAMPLE) + _log_counts(dest), config.read_bytes())


def _broken(data: Path, want: Expected, *, count: bool = True) -> list[str]:
    """The promises this data dir breaks; ``count``: run the counter (a state that may be kept)."""
    problems = []
    counted, seen = _counted(data), _seen(data)
    for cid, n in want.attempts.items():
        if counted.get(cid, 0) < n:
            problems.append(f"{cid}: {counted.get(cid, 0)} attempts counted, the stores had {n}")
    for cid, triage in want.marks.items():
        if seen.get(cid, {}).get("triage") != triage:
            problems.append(f"{cid}: triage {seen.get(cid, {}).get('triage')}, expected {triage}")
    brought = [cid for cid in SAMPLE if cid in seen or (data / "inbox" / f"{cid}.json").exists()]
    if brought:
        problems.append(f"sample comments brought in: {brought}")
    provider = json.loads((data / "provider.json").read_text()) if (data / "provider.json").exists() else {}
    if (provider.get("cooldown_until") or "") < want.cooldown:
        problems.append(f"cooldown {provider.get('cooldown_until')}, the source's was until {want.cooldown}")
    config = data / "config.toml"
    if (config.read_bytes() if config.exists() else None) != want.config:
        problems.append("config.toml is not the source's (nor the data dir's own)")
    if count:
        done = run_main("cli", "signals", "--json", data_dir=data, env=IN_PROCESS_ENV)
        counts = ((done.envelope or {}).get("result") or {}).get("counts")
        if done.returncode != 0 or counts is None:
            problems.append(f"signals exited {done.returncode}: {done.stderr[-300:]}")
        elif Counter(counts) != want.signals:
            problems.append(f"signal counts {dict(counts)}, expected {dict(want.signals)}")
    return problems


def _state_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not {"locks", "signals"} & set(p.relative_to(root).parts)
            and not (p.name.startswith(".") and p.name.endswith(".tmp"))}


# ---- kills -----------------------------------------------------------------------------------------------


def kill_case(stores: Stores, work: Path, point: str, dest: str) -> list[str]:
    """One cell: a migration SIGKILLed at ``point``, rerun, run again; the promises it broke."""
    src, data = work / "old", work / "data"
    shutil.copytree(stores.source, src)
    shutil.copytree(stores.destinations[dest], data)
    want = _expected(src, data)
    problems = []
    killed = run("cli", "migrate", str(src), data_dir=data, fault=f"kill_at={point}")
    if killed.returncode != -signal.SIGKILL:
        problems.append(f"kill point not reached (exit {killed.returncode}): {killed.stderr[-300:]}")
    status = run("cli", "status", data_dir=data)
    finished = point == "migrate_after_finish"
    if finished and status.returncode != 0:
        problems.append(f"status after a finished migration exited {status.returncode}: {status.stderr[-300:]}")
    if not finished and (status.returncode != 2 or f"watcher migrate {src}" not in status.stderr):
        problems.append(f"status on a half-migrated data dir exited {status.returncode}: {status.stderr[-300:]}")
    rerun = run("cli", "migrate", str(src), data_dir=data)
    if rerun.returncode != 0:
        problems.append(f"the rerun exited {rerun.returncode}: {rerun.stderr[-300:]}")
    problems += _broken(data, want)
    before = _state_files(data)
    third = run("cli", "migrate", str(src), data_dir=data)
    if third.returncode != 0 or _state_files(data) != before:
        changed = sorted(k for k in {*before, *_state_files(data)} if before.get(k) != _state_files(data).get(k))
        problems.append(f"a third run exited {third.returncode} and changed {changed}")
    return [f"{point} × {dest}: {p}" for p in problems]


@pytest.mark.parametrize("point", POINTS)
def test_a_migration_killed_at_this_point_and_rerun_loses_nothing(point: str, stores: Stores,
                                                                   tmp_path: Path) -> None:
    """SIGKILL at this point into an empty data dir and into one holding comments: refused until
    rerun, then no mark, attempt or signal lost or doubled, no sample comment, and a third run
    changes nothing."""
    with ThreadPoolExecutor(max_workers=len(DESTINATIONS)) as pool:
        found = list(pool.map(lambda d: kill_case(stores, tmp_path / d, point, d), DESTINATIONS))
    for violations in found:
        TALLY.add("crash_points", 1, violations)
    assert [v for vs in found for v in vs] == []


# ---- power loss ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dest", DESTINATIONS)
def test_every_state_a_power_cut_leaves_in_a_migration_keeps_every_promise(
        dest: str, stores: Stores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each state a power cut during the migration can leave: once its marker is gone it already
    keeps every promise; with the marker, a rerun keeps them (on a sample of states in the quick lane)."""
    src, root = tmp_path / "old", tmp_path / "root"
    shutil.copytree(stores.source, src)
    root.mkdir()
    data = root / "data"
    shutil.copytree(stores.destinations[dest], data)
    want = _expected(src, data)
    initial = _state_files(data)
    with recording(root, monkeypatch, every=LONG) as rec:
        done = run_main("cli", "migrate", str(src), data_dir=data)
    assert done.returncode == 0, done.stderr
    states = list(rec.states)
    step = 1 if LONG else max(1, len(states) // QUICK_SAMPLE)
    violations = []
    for i, state in enumerate(states):
        here = tmp_path / "states" / str(i) / "data"
        materialize(state, here.parent)
        untouched = _state_files(here) == initial  # before its marker: nothing was promised
        if not (here / "migrating.json").exists() and not untouched:
            # Finished: it keeps every promise as it is (the counter runs in the reruns below).
            violations += [f"state {i} as left: {p}" for p in _broken(here, want, count=False)]
        if i % step == 0:
            again = run_main("cli", "migrate", str(src), data_dir=here)
            if again.returncode != 0:
                violations.append(f"state {i}: the rerun exited {again.returncode}: {again.stderr[-300:]}")
            violations += [f"state {i} after a rerun: {p}" for p in _broken(here, want)]
        shutil.rmtree(here.parent)
    TALLY.add("power_loss_states", len(states), violations)
    assert violations == []
