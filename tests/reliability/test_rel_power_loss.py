"""Power loss (SPEC §15.5): every crash state a power cut can leave, checked against the promises.

A workload runs in process from the rig's baseline while :mod:`_rel_powerloss` records its file
operations and what the outside world saw (a request leaving for the provider, an item reported,
a command's exit). For each crash state the persistence model allows, within its bound, the
state is written out as a data dir and checked as it is, then the next commands run on it
(``status``, ``recheck``, ``scan``, ``signals``) and it is checked again:

- a request that left has its reservation in the crash state, a claim handed out its attempt;
- no comment has more than 3 + grants calls over the whole history (before and after the crash);
- a verdict, mark or grant a command reported (an item line, or exit 0) survives, and stays;
- the signal counter's total counts each line of the log once, never a line the log lost;
- the next commands open the state (exit 0), or stop with a clear exit 5; none exits 1; and what
  they quarantine was really torn in the crash state.

The quick lane checks every state as it is and runs the next commands on a bounded sample of
them (:data:`QUICK_SAMPLE` per workload, spread over the trace); the long lane runs them on every state.
"""

from __future__ import annotations

import functools
import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _fakes import records as fake_records
from _fakes.clock import LEASE_END, later
from _fakes.provider import IN_PROCESS_ENV, TAG, VERDICT, FakeProvider, in_process
from _proc import Answer, run_main
from _rel_harness import AGENT_ENV, LONG, TALLY, Baseline, RunPidStore, script_followups
from _rel_invariants import Snapshot, attempts_monotonic, call_budget, verdicts_final
from _rel_powerloss import Event, Recorder, State, Unsynced, materialize, recording

from watcher.state import records as rec_rules
from watcher.config import Paths
from watcher.errors import CorruptState
from watcher.models import InboxRecord, SeenFile, SignalState
from watcher.pipeline import Hooks
from watcher.store import durable
from watcher.store.files import FileStore

# Next commands run on this many states per workload in the quick lane (all of them in the long lane).
QUICK_SAMPLE = 2
DATA = "data"


# ---- workloads -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    entry: str
    args: tuple[str, ...]
    agent: bool = False
    during: tuple[str, ...] = ()  # a command run while this one's first model call goes out


def _scan(*extra: str) -> Step:
    return Step("cli", ("scan", "--source", "{full}", "--limit", "20", "--parallel", "1", *extra))


WORKLOADS: dict[str, tuple[Step, ...]] = {
    # New comments created, reserved and answered; failures retried; signals appended; the index saved.
    "scan": (_scan(),),
    # An orphaned reservation closed, failed comments retried.
    "recheck": (Step("bridge", ("recheck", "--limit", "20", "--parallel", "1")),),
    # A person's mark lands between the batch's reservation and its call; the batch saves the index after.
    "mark-during-batch": (Step("cli", ("recheck", "--limit", "20", "--parallel", "1", "--json"),
                               during=("mark", "orph", "replied")),),
    # A grant on a failed comment, then the recheck that spends it.
    "grant": (Step("cli", ("grant", "bad", "--yes", "--json")),
              Step("cli", ("recheck", "bad", "--limit", "20", "--parallel", "1", "--json"))),
    # An agent claims (reservations with leases) and submits one verdict.
    "claim-submit": (Step("bridge", ("claim", "--limit", "20"), agent=True),
                     Step("bridge", ("submit", "{claimed}", "{claimed_n}", json.dumps(VERDICT)), agent=True)),
    # A line appended by a grant (an append is never fsynced), the counter applying it, then a
    # recount from zero (--reset: the state written back to nothing, then every line again).
    "signals": (Step("cli", ("grant", "flaky", "--yes", "--json")), Step("bridge", ("signals",)),
                Step("cli", ("signals", "--reset", "--json"))),
    # An index save on its own: marks, and the listing of new comments.
    "index-save": (Step("bridge", ("mark", "flaky", "ignored")), Step("cli", ("inbox", "--new", "--json"))),
    # Four calls in flight: reservations and outcomes interleaved in the order answers arrive.
    "parallel": (Step("cli", ("scan", "--source", "{full}", "--limit", "20", "--parallel", "4", "--json")),),
    # A first scan into a data dir that does not exist yet: every directory is new.
    "fresh-data-dir": (_scan("--json"),),
}


@dataclass
class Recorded:
    """A workload's trace and crash states, and what the test knows about its history."""

    name: str
    rec: Recorder
    calls_before: list[str]  # the provider calls that built the baseline
    root: Path


def _expand(args: tuple[str, ...], baseline: Baseline, last: Answer | None) -> list[str]:
    claimed = ((last.envelope or {}).get("result") or {}).get("claimed") or [{}] if last else [{}]
    first = claimed[0] if claimed else {}
    values = {"{full}": str(baseline.full_export), "{claimed}": str(first.get("id", "")),
              "{claimed_n}": str(first.get("n", ""))}
    return [values.get(a, a) for a in args]


def run_workload(name: str, baseline: Baseline, work: Path, monkeypatch: pytest.MonkeyPatch,
                 plant: Unsynced | None = None, *, every: bool = True) -> Recorded:
    """Run workload ``name`` in process on a copy of the baseline while recording it."""
    root = work / "root"
    root.mkdir(parents=True)
    fake = FakeProvider()
    if name == "fresh-data-dir":
        fake.calls[:] = []
        script_followups(fake)
        calls_before: list[str] = []
    else:
        baseline.clone(root / DATA, fake)
        calls_before = list(fake.calls)
    data = root / DATA
    with recording(root, monkeypatch, every=every, unsynced=plant) as rec:
        _trace_requests(fake, rec)
        last: Answer | None = None
        for step in WORKLOADS[name]:
            last = _run_step(step, data, fake, rec, baseline, last)
            # The workload itself runs to its end: its crash states are what a power cut leaves.
            assert last.returncode == 0, f"{name}: {' '.join(step.args)} exited {last.returncode}: {last.stderr[-500:]}"
    return Recorded(name, rec, calls_before, root)


def _trace_requests(fake: FakeProvider, rec: Recorder) -> None:
    real = fake.handle

    def handle(body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        match = TAG.search(json.dumps(body))
        rec.note("request", match.group(1) if match else "?")
        return real(body, headers)

    fake.handle = handle  # type: ignore[method-assign]


def _run_step(step: Step, data: Path, fake: FakeProvider, rec: Recorder, baseline: Baseline,
              last: Answer | None) -> Answer:
    env = AGENT_ENV if step.agent else IN_PROCESS_ENV
    args = _expand(step.args, baseline, last)
    during = list(step.during)

    def on_call(cid: str) -> None:
        if during:
            nested = Step("bridge", tuple(during))
            during.clear()
            assert _run_step(nested, data, fake, rec, baseline, None).returncode == 0

    hooks = Hooks(make_store=RunPidStore, make_provider=None if step.agent else in_process(fake),
                  on_item=lambda item: rec.note("item", item.id, (item.id, item.outcome)),
                  on_call=on_call if during else None)
    answer = run_main(step.entry, *args, data_dir=data, env=env, hooks=hooks)
    rec.note("exit", " ".join(args[:2]), (answer, args))
    return answer


# ---- what was promised by a crash point ---------------------------------------------------------------


@dataclass
class Promised:
    calls: list[str] = field(default_factory=list)  # every provider call so far, the baseline's too
    verdicts: dict[str, str] = field(default_factory=dict)  # id -> who reported it
    marks: dict[str, str] = field(default_factory=dict)
    caps: dict[str, int] = field(default_factory=dict)
    claims: dict[str, int] = field(default_factory=dict)  # id -> attempt number handed to an agent


def promised_at(recorded: Recorded, k: int, initial: dict[str, InboxRecord], index: SeenFile) -> Promised:
    """What the outside world had been told by the crash point after trace entry ``k``."""
    out = Promised(calls=list(recorded.calls_before))
    out.verdicts = {cid: "the baseline" for cid, r in initial.items() if r.verdict is not None}
    out.marks = {cid: e.triage for cid, e in index.comments.items() if e.triage != "open"}
    for event in recorded.rec.trace[: k + 1]:
        if event.kind == "request":
            out.calls.append(event.what)
        elif event.kind == "item" and event.data[1] == "verdict":
            out.verdicts[event.data[0]] = "an item line"
        elif event.kind == "exit":
            _promised_by_exit(out, *event.data)
    return out


def _promised_by_exit(out: Promised, answer: Answer, args: list[str]) -> None:
    if answer.returncode != 0:
        return
    result = (answer.envelope or {}).get("result") or {}
    command = args[0]
    if command in ("scan", "recheck"):
        for item in result.get("items", []):
            if item["outcome"] == "verdict":
                out.verdicts[item["id"]] = f"{command} exit 0"
    elif command == "mark":
        *ids, triage = args[1:]
        out.marks.update(dict.fromkeys(ids, triage))
    elif command == "grant":
        out.caps[result["id"]] = result["cap"]
    elif command == "claim":
        out.claims.update({c["id"]: c["n"] for c in result.get("claimed", [])})
    elif command == "submit":
        out.verdicts[args[1]] = "submit exit 0"


# ---- reading a crash state -----------------------------------------------------------------------------


@dataclass
class Read:
    records: dict[str, InboxRecord]
    torn: set[str]  # paths (under the data dir) of state files that do not parse
    index: SeenFile | None
    counter: SignalState | None
    log: bytes


def read_state(files: dict[str, bytes | None]) -> Read:
    recs: dict[str, InboxRecord] = {}
    torn: set[str] = set()

    def parse(rel: str, model: Any) -> Any:
        data = files.get(f"{DATA}/{rel}")
        if data is None:
            return None
        found = _parse(model, data)
        if found is None:
            torn.add(rel)
        return found

    for path in files:
        if path.startswith(f"{DATA}/inbox/") and path.endswith(".json") and not path.rsplit("/", 1)[1].startswith("."):
            rel = path[len(DATA) + 1:]
            found = parse(rel, InboxRecord)
            if found is not None:
                recs[rel[len("inbox/"):-len(".json")]] = found
    from watcher.models import ProviderState, SignalCursor

    index = parse("seen.json", SeenFile)
    counter = parse("signals/state.json", SignalState)
    parse("signals/cursor.json", SignalCursor)
    parse("provider.json", ProviderState)
    return Read(recs, torn, index, counter, files.get(f"{DATA}/observations.jsonl") or b"")


@functools.lru_cache(maxsize=4096)
def _parse(model: Any, data: bytes) -> Any:
    """The file's model, ``None`` if it does not parse (states share most files' bytes: parsed once)."""
    try:
        return model.model_validate_json(data)
    except ValueError:
        return None


def promises_in_state(read: Read, promised: Promised) -> list[str]:
    """The promises a crash state itself must keep, before any command runs on it."""
    out = [f"{p} (a request left; its reservation is not in the crash state)" if "model call" in p else p
           for p in call_budget(read.records, promised.calls)]
    out += kept(read, promised)
    for cid, n in promised.claims.items():
        record = read.records.get(cid)
        if record is None or len(record.attempts) < n or record.attempts[n - 1].provider != "agent":
            out.append(f"{cid}: attempt {n} was handed to an agent; the crash state does not hold its claim")
    out += counted_once(read)
    return out


def kept(read: Read, promised: Promised) -> list[str]:
    out = []
    for cid, who in promised.verdicts.items():
        record = read.records.get(cid)
        if record is None or record.verdict is None:
            out.append(f"{cid}: verdict reported ({who}) is lost")
    entries = read.index.comments if read.index is not None else {}
    for cid, triage in promised.marks.items():
        if cid not in entries or entries[cid].triage != triage:
            got = entries[cid].triage if cid in entries else "nothing"
            out.append(f"{cid}: marked {triage} (exit 0), the index says {got}")
    for cid, cap in promised.caps.items():
        record = read.records.get(cid)
        if record is None or rec_rules.cap_of(record) < cap:
            out.append(f"{cid}: granted up to {cap} attempts (exit 0), the grant is lost")
    return out


def counted_once(read: Read) -> list[str]:
    """The counter's totals are exactly the log's lines up to its watermark: none counted twice,
    none counted that the log no longer holds."""
    state = read.counter
    if state is None:
        return []
    if state.applied > len(read.log):
        return [f"the counter counted {state.applied} bytes of a log that holds {len(read.log)}"]
    keys: Counter[str] = Counter()
    invalid = 0
    for line in read.log[: state.applied].split(b"\n")[:-1]:
        try:
            key = json.loads(line).get("key")
        except (ValueError, AttributeError):
            key = None
        if isinstance(key, str) and key:
            keys[key] += 1
        else:
            invalid += 1
    if dict(keys) != state.counts or invalid != state.invalid:
        return [(f"the counter's totals {state.counts} (+{state.invalid} invalid) are not the log's lines up to "
                 f"its watermark {dict(keys)} (+{invalid} invalid)")]
    return []


# ---- the next commands ------------------------------------------------------------------------------

NEXT = (("cli", ("status", "--json")), ("bridge", ("recheck", "--limit", "20", "--parallel", "1")),
        ("cli", ("scan", "--source", "{full}", "--limit", "20", "--parallel", "1", "--json")),
        ("bridge", ("signals",)))


def run_next(state: State, read: Read, promised: Promised, baseline: Baseline, dest: Path) -> list[str]:
    """Write ``state`` out, run the next commands on it, check what they did and what they left."""
    materialize(state, dest)
    data = dest / DATA
    fake = FakeProvider()
    script_followups(fake)
    hooks = Hooks(make_store=RunPidStore, make_provider=in_process(fake), clock=later(LEASE_END))
    out: list[str] = []
    counted = False
    for entry, args in NEXT:
        argv = _expand(args, baseline, None)
        answer = run_main(entry, *argv, data_dir=data, env=IN_PROCESS_ENV, hooks=hooks)
        error = (answer.envelope or {}).get("error") or {}
        if answer.returncode == 5 and read.torn and error.get("message"):
            continue  # a clear stop on a file the crash really tore
        if answer.returncode not in (0, 3):
            out.append(f"next `{argv[0]}` exited {answer.returncode}: {error.get('message') or answer.stderr[-300:]}")
        counted = counted or (argv[0] == "signals" and answer.returncode == 0)
    after = _files(data)
    now = read_state({f"{DATA}/{k}": v for k, v in after.items()})
    out += _quarantined_only_torn(after, read)
    calls = promised.calls + fake.calls
    out += [f"after the next commands: {p}" for p in call_budget(now.records, calls) + kept(now, promised)]
    before = Snapshot({cid: [(a.n, a.outcome, a.error.kind if a.error else None, a.pid) for a in r.attempts]
                       for cid, r in read.records.items()},
                      frozenset(cid for cid, r in read.records.items() if r.verdict is not None), {}, 0)
    out += [f"after the next commands: {p}" for p in verdicts_final(now.records, fake.calls, before)
            + attempts_monotonic(now.records, before)]
    if counted:
        out += [f"after signals: {p}" for p in counted_once(now)]
        complete = now.log[: now.log.rfind(b"\n") + 1]
        if now.counter is None or now.counter.applied != len(complete):
            out.append(f"after signals: the counter stopped short of the log's {len(complete)} complete bytes")
    return out


def _files(data: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for path in sorted(data.rglob("*")):
        rel = path.relative_to(data).as_posix()
        found[rel] = None if path.is_dir() else path.read_bytes()
    return found


def _quarantined_only_torn(after: dict[str, bytes | None], read: Read) -> list[str]:
    labels = {rel.replace("inbox/", "inbox-") if rel.startswith("inbox/") else rel.rsplit("/", 1)[-1]
              for rel in read.torn}
    moved = [rel[len("quarantine/"):] for rel in after if rel.startswith("quarantine/")]
    return [f"quarantined {name}, which the crash did not tear" for name in moved
            if not any(name.startswith(label + ".") for label in labels)]


# ---- one workload, every state ------------------------------------------------------------------------


@dataclass
class Explored:
    states: int = 0
    crash_points: int = 0
    next_runs: int = 0
    bad_states: int = 0  # states that broke a promise
    violations: list[str] = field(default_factory=list)


def explore(recorded: Recorded, baseline: Baseline, work: Path, *, sample: int | None,
            enough: Callable[[Explored], bool] | None = None) -> Explored:
    """Check every distinct crash state; run the next commands on all of them, or on ``sample``
    of them spread evenly over the trace (the last crash point's among them). ``enough``: stop
    as soon as it says what was found is enough (a planted bug's case)."""
    from _rel_invariants import records as read_records
    from _rel_invariants import seen_file

    rec = recorded.rec
    initial_data = baseline.data_dir if recorded.name != "fresh-data-dir" else None
    initial = read_records(initial_data) if initial_data else {}
    index = seen_file(initial_data) if initial_data else SeenFile()
    ordered = sorted(rec.states.items(), key=lambda item: item[1])
    chosen = set(range(len(ordered))) if sample is None else {
        round(i * (len(ordered) - 1) / max(1, sample - 1)) for i in range(min(sample, len(ordered)))}
    found = Explored(states=len(ordered), crash_points=rec.crash_points)
    for i, (state, k) in enumerate(ordered):
        files = dict(state)
        read = read_state(files)
        promised = promised_at(recorded, k, initial, index)
        problems = promises_in_state(read, promised)
        if i in chosen:
            problems += run_next(state, read, promised, baseline, work / f"state-{i}")
            found.next_runs += 1
        if problems:
            found.bad_states += 1
            where = _describe(rec, k)
            found.violations += [f"{recorded.name}, crash after {where}: {p}" for p in dict.fromkeys(problems)]
        if enough is not None and enough(found):
            break
    return found


def _describe(rec: Recorder, k: int) -> str:
    fs = [e for e in rec.trace[: k + 1] if e.kind not in ("request", "item", "exit")]
    last = fs[-1] if fs else None
    return f"op {len(fs)} ({last.kind} {last.what})" if last else "op 0 (before any)"


# ---- the tests --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_power_loss_state_keeps_the_promises(name: str, baseline: Baseline, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Every crash state of this workload keeps every promise, as it is and after the next commands."""
    recorded = run_workload(name, baseline, tmp_path, monkeypatch)
    found = explore(recorded, baseline, tmp_path, sample=None if LONG else QUICK_SAMPLE)
    TALLY.add("power_loss_states", found.states, found.violations)
    assert found.violations == []
    assert found.states > 10, "a workload this size leaves many distinct crash states"


# ---- the checker sees a broken durable write ------------------------------------------------------------


def _no_directory_fsync(kind: str, name: str, last: Event | None) -> bool:
    """The durable write without the fsync of its directory after the rename into it."""
    return (kind == "fsync-dir" and last is not None and last.kind == "rename"
            and os.path.dirname(last.what.split(" -> ")[1]) == name)


def _no_fsync_before_replace(kind: str, name: str, last: Event | None) -> bool:
    """The durable write without the fsync of its temp file (``.<name>.<random>.tmp``) before the rename."""
    base = os.path.basename(name)
    return kind == "fsync" and base.startswith(".") and base.endswith(".tmp")


# Each planted bug, and what the checker must then report: reservations of requests that left are
# lost (the rename undone; or the file renamed before its bytes were durable, torn or empty), and
# so are verdicts an item line reported.
PLANTED: dict[str, Unsynced] = {"no-directory-fsync": _no_directory_fsync,
                                "no-fsync-before-replace": _no_fsync_before_replace}
PLANTED_WORKLOAD = "recheck"


@pytest.mark.parametrize("bug", list(PLANTED))
def test_a_durable_write_missing_a_sync_breaks_promises_in_crash_states(bug: str, baseline: Baseline, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With one sync removed from the durable write, the checker finds crash states that lose a
    reservation whose request left, and a verdict that was reported (so a clean run means something)."""
    wanted = ("its reservation is not in the crash state", "verdict reported (an item line) is lost")

    def both(found: Explored) -> bool:
        return all(any(w in v for v in found.violations) for w in wanted)

    # Every combination of a broken run is thousands of broken states: the one-group-at-a-time
    # bound shows it as well, and the exploration stops once both kinds were seen.
    recorded = run_workload(PLANTED_WORKLOAD, baseline, tmp_path, monkeypatch, PLANTED[bug], every=False)
    found = explore(recorded, baseline, tmp_path, sample=0, enough=both)
    assert found.bad_states > 0
    assert both(found), found.violations[:5]


# ---- directories the store creates (each a promise of its own) ----------------------------------------


def _lock_then_save(store: FileStore) -> None:
    with store.pipeline_lock():
        store.save_record(fake_records.record("abc1"))


def _count_signals(store: FileStore) -> None:
    store.append_signals([{"key": "item.ok", "comment": "abc1"}])
    store.count_signals()


def _quarantine(store: FileStore) -> None:
    with pytest.raises(CorruptState):
        store.load_record("abc1")


# What each call leaves that a power cut after it must not undo (paths under the data dir).
CREATES: dict[str, tuple[Callable[[FileStore], None], tuple[str, ...]]] = {
    "save-record": (lambda store: store.save_record(fake_records.record("abc1")), ("inbox/abc1.json",)),
    "lock-then-save": (_lock_then_save, ("inbox/abc1.json",)),
    "count-signals": (_count_signals, ("observations.jsonl", "signals/state.json")),
    "quarantine": (_quarantine, ("quarantine",)),
}
TORN = b'{"schema_version": 2, "comm'


@pytest.mark.parametrize("case", list(CREATES))
def test_what_a_store_call_wrote_into_new_directories_survives_power_loss(case: str, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory the store creates (the data dir itself, inbox/, signals/, locks/, quarantine/) is
    synced in its parent before the call returns: no power cut after it undoes what was written there.
    For the quarantine, the moved file is never lost: it is at its old name or in quarantine/."""
    root = tmp_path / "root"
    root.mkdir()
    data = root / DATA
    if case == "quarantine":
        (data / "inbox").mkdir(parents=True)
        (data / "inbox" / "abc1.json").write_bytes(TORN)
    call, wanted = CREATES[case]
    with recording(root, monkeypatch) as rec:
        call(FileStore(Paths(data)))
    lost = []
    for state in rec.at[len(rec.trace) - 1]:
        files = dict(state)
        missing = [w for w in wanted if f"{DATA}/{w}" not in files]
        if case == "quarantine" and missing:
            missing = [] if any(v == TORN for v in files.values()) else [f"the torn file ({TORN!r})"]
        lost += missing
    assert lost == [], f"a power cut after the call returned loses {sorted(set(lost))}"


# ---- the recorder and the model themselves ------------------------------------------------------------


def test_the_recorder_sees_each_operation_and_the_model_keeps_only_what_was_synced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kind of operation is in the trace; unsynced bytes and entries may be lost (wholly or in
    part), synced ones never are (so a clean exploration cannot pass by seeing nothing)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "old").write_bytes(b"old")
    with recording(root, monkeypatch) as rec:
        os.mkdir(root / "d")
        durable.fsync_dir(root)
        fd = os.open(root / "d" / "f", os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"abcd")
        os.close(fd)
        after_write = len(rec.trace) - 1
        fd = os.open(root / "d" / "f", os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
        durable.fsync_dir(root / "d")
        synced = len(rec.trace) - 1
        os.replace(root / "old", root / "new")
        os.link(root / "new", root / "also")
        os.unlink(root / "also")
    assert [e.kind for e in rec.trace] == ["mkdir", "fsync-dir", "create", "write", "fsync", "fsync-dir", "rename",
                                           "link", "unlink"]
    at = {k: sorted({dict(s).get("d/f", b"-") for s in rec.at[k]}) for k in (after_write, synced)}
    # Before the sync: the file may be missing (its entry unsynced), empty, or hold any cut of its write.
    assert at[after_write] == [b"", b"-", b"a", b"ab", b"abc", b"abcd"]
    assert set(at[synced]) == {b"abcd"}
    final = [dict(s) for s in rec.at[len(rec.trace) - 1]]
    # The rename and link were never synced: the old name may be back, the new one gone, in any mix.
    assert {("old" in s, "new" in s) for s in final} == {(True, False), (False, True)}


def _no_log_fsync(kind: str, name: str, last: Event | None) -> bool:
    """The counter without its fsync of the log (observations.jsonl) before it saves the watermark."""
    return kind == "fsync" and os.path.basename(name) == "observations.jsonl"


def test_a_counter_that_does_not_sync_the_log_is_caught_counting_lines_a_power_cut_loses(
        baseline: Baseline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the fsync of the log before the watermark, some crash state's counter claims lines
    the log no longer holds; the checker reports it."""
    recorded = run_workload("signals", baseline, tmp_path, monkeypatch, _no_log_fsync)
    found = explore(recorded, baseline, tmp_path, sample=0)
    assert any("the counter counted" in v and "of a log that holds" in v for v in found.violations), \
        found.violations[:5]
