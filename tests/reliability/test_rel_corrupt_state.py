"""Corrupt state files of every kind in every place: loud, quarantined byte-for-byte, recoverable.

For each state file of a data dir and each way it can be damaged, a command meets it: if the
command needed the file, it exits 5 with a message naming it and the damaged bytes are in
``quarantine/`` exactly; if it did not, the file is left untouched (never overwritten). Either
way the runs that follow recover: they exit 0 and every promise still holds (a comment whose
inbox file was lost is never given a fresh budget).

Planted files count too (SPEC §13.5): a symlink (a loop, or a link to a file outside
the data dir), a FIFO or an empty directory at a state path is quarantined itself — never read
through, never opened blocking, its target untouched — and an inbox file whose content is
another comment (restored under the wrong name, a hard link) is corrupt. A directory holding
files is the one thing left in place: exit 5 naming it, until the person moves it away.
"""

from __future__ import annotations

import itertools
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

import pytest
from _fakes.provider import running_fake
from _proc import Answer, run_main
from _rel_harness import LONG, TALLY, Baseline, error_of, recover_until_quiet, rig_hooks
from _rel_invariants import Expect, check_all, snapshot

from watcher.store.durable import quarantined_names

# place -> (path inside the data dir, its quarantine label)
PLACES = {
    "inbox-failed": ("inbox/flaky.json", "inbox-flaky.json"),
    "inbox-done": ("inbox/done.json", "inbox-done.json"),
    "seen": ("seen.json", "seen.json"),
    "provider": ("provider.json", "provider.json"),
    "signals-state": ("signals/state.json", "state.json"),
    "signals-cursor": ("signals/cursor.json", "cursor.json"),
}
KINDS = {
    "empty": lambda good: b"",
    "not-json": lambda good: b"{not json",
    "truncated": lambda good: good[: len(good) // 2],
    "not-an-object": lambda good: b"[1, 2, 3]\n",
    "wrong-shape": lambda good: b'{"schema_version": 1, "surprise": {"deep": [1]}}\n',
    "not-utf8": lambda good: b"\xff\xfe\x00garbage\x80",
}
COMMANDS = ("scan", "recheck", "status", "signals", "mark", "show", "inbox")


def _cases() -> list[tuple[str, str, str]]:
    if LONG:
        return list(itertools.product(PLACES, KINDS, COMMANDS))
    # Quick: every place meets every kind, and every command, at least once.
    rotate = itertools.cycle(COMMANDS)
    cases = {(p, k, next(rotate)) for p in PLACES for k in KINDS}
    kinds = itertools.cycle(KINDS)
    cases |= {(p, next(kinds), c) for p in PLACES for c in COMMANDS}
    return sorted(cases)


def _meet(data: Path, env: dict[str, str], command: str, baseline: Baseline) -> Answer:
    """``watcher COMMAND --json`` against the baseline, in process: the run that meets the damage."""
    args = {"scan": ["scan", "--source", str(baseline.full_export), "--limit", "20"], "recheck": ["recheck", "--limit", "20"],
            "mark": ["mark", "flaky", "replied"], "show": ["show", "flaky"]}.get(command, [command])
    return run_main("cli", *args, "--json", data_dir=data, env=env, hooks=rig_hooks())


def _next_scan(data: Path, env: dict[str, str], baseline: Baseline) -> Answer:
    """The bridge's scan after a command that did not need the damaged file: this one does."""
    return run_main("bridge", "scan", "--source", str(baseline.full_export), "--limit", "20", data_dir=data, env=env,
                    hooks=rig_hooks())


def _prepare(data: Path, rel: str, fake_env: dict[str, str]) -> bytes:
    """Make sure the file exists in its healthy form and return those bytes."""
    path = data / rel
    if rel == "provider.json" and not path.exists():
        from watcher.store.durable import write_json

        write_json(path, {"schema_version": 1, "cooldown_until": None, "reason": None})
    return path.read_bytes()


def corrupt_case(baseline: Baseline, work: Path, place: str, kind: str, command: str) -> list[str]:
    rel, label = PLACES[place]
    problems: list[str] = []
    with running_fake() as fake:
        data = baseline.clone(work / "data", fake)
        env = fake.env()
        good = _prepare(data, rel, env)
        before = snapshot(data, fake.calls)
        bad = KINDS[kind](good)
        (data / rel).write_bytes(bad)
        first = _meet(data, env, command, baseline)
        if first.returncode != 5:
            if (data / rel).read_bytes() != bad:
                problems.append(f"{command} exited {first.returncode} and changed the corrupt file without a word")
            # It did not need the file; the next scan does, and must say so.
            first = _next_scan(data, env, baseline)
        problems += _loud(first, data, rel, label, bad)
        recovery = recover_until_quiet(data, env, baseline.full_export)
        problems += recovery.problems
        lost = rel.removeprefix("inbox/").removesuffix(".json") if rel.startswith("inbox/") else None
        problems += _still_kept(data, fake.calls, before, baseline, lost=lost, seen_lost=place == "seen")
    return [f"{place} × {kind} × {command}: {p}" for p in problems]


def _loud(answer: Answer, data: Path, rel: str, label: str, bad: bytes) -> list[str]:
    out = []
    if answer.returncode != 5:
        out.append(f"{answer.args[1]} exited {answer.returncode}, expected 5 for a corrupt {rel}")
        return out
    message = error_of(answer).get("message", "")
    if str(data / rel) not in message or "quarantine" not in message:
        out.append(f"message does not name the file and where it went: {message!r}")
    copies = [p.read_bytes() for p in quarantined_names(data / "quarantine", label)]
    if bad not in copies:
        out.append(f"the corrupt bytes of {rel} are not in quarantine/ byte-for-byte")
    return out


def _still_kept(data: Path, calls: list[str], before, baseline: Baseline, *,  # type: ignore[no-untyped-def]
                lost: str | None, seen_lost: bool) -> list[str]:
    """Every promise after recovery; a quarantined inbox file's comment gets no new calls."""
    marks = {} if seen_lost else baseline.marks  # triage lives only in seen.json
    if lost is not None:
        marks = {k: v for k, v in marks.items() if k != lost}
        since = calls[before.calls:]
        restarted = f"{lost}: its inbox file was quarantined, then {since.count(lost)} new call(s) were made"
        found = [restarted] if lost in since else []
        before.attempts.pop(lost, None)
        found += [v for v in check_all(data, [c for c in calls if c != lost], before=before,
                                       expect=Expect(marks=marks, quarantine_empty=False))
                  if not v.startswith(f"{lost}:")]
        return found
    return check_all(data, calls, before=before, expect=Expect(marks=marks, quarantine_empty=False))


@pytest.mark.parametrize("place", list(PLACES))
def test_corrupt_state_file_is_quarantined_loudly_and_next_runs_recover(place: str, baseline: Baseline,
                                                                        tmp_path: Path) -> None:
    """Every kind of damage to this file, met by the commands: exit 5, quarantined as is, recovery."""
    found: list[str] = []
    cases = [c for c in _cases() if c[0] == place]
    for i, (p, kind, command) in enumerate(cases):
        found += corrupt_case(baseline, tmp_path / str(i), p, kind, command)
    TALLY.add("bad_inputs", len(cases), found)
    assert found == []


# ---- planted files: special files and names that lie (SPEC §13.5) --------------------------------


def _link_outside(path: Path, good: bytes, work: Path) -> None:
    outside = work / "outside" / path.name
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_bytes(good)
    os.symlink(outside, path)


def _dir_with_files(path: Path, good: bytes, work: Path) -> None:
    (path / "mine").mkdir(parents=True)
    (path / "mine" / "notes.txt").write_bytes(good)


def _other_inbox_file(path: Path) -> Path:
    return next(p for p in sorted(path.parent.glob("*.json")) if p != path)


def _wrong_name(path: Path, good: bytes, work: Path) -> None:
    path.write_bytes(_other_inbox_file(path).read_bytes())


def _hard_link(path: Path, good: bytes, work: Path) -> None:
    os.link(_other_inbox_file(path), path)


Plant = Callable[[Path, bytes, Path], None]
SPECIAL: dict[str, Plant] = {
    "symlink-loop": lambda path, good, work: os.symlink(path.name, path),
    "symlink-outside": _link_outside,
    "fifo": lambda path, good, work: os.mkfifo(path),
    "empty-dir": lambda path, good, work: path.mkdir(),
    "dir-with-files": _dir_with_files,
}
NAME_LIES: dict[str, Plant] = {"wrong-name": _wrong_name, "hard-link": _hard_link}  # inbox places only
LEFT_IN_PLACE = {"dir-with-files"}


def _planted_cases() -> list[tuple[str, str, str]]:
    kinds = {p: [*SPECIAL, *(NAME_LIES if PLACES[p][0].startswith("inbox/") else ())] for p in PLACES}
    if LONG:
        return sorted((p, k, c) for p in PLACES for k in kinds[p] for c in COMMANDS)
    rotate = itertools.cycle(COMMANDS)
    return sorted((p, k, next(rotate)) for p in PLACES for k in kinds[p])


def _identity(path: Path) -> tuple[int, int]:
    st = os.lstat(path)
    return st.st_ino, stat.S_IFMT(st.st_mode)


def planted_case(baseline: Baseline, work: Path, place: str, kind: str, command: str) -> list[str]:
    rel, label = PLACES[place]
    plant = {**SPECIAL, **NAME_LIES}[kind]
    problems: list[str] = []
    with running_fake() as fake:
        data = baseline.clone(work / "data", fake)
        env = fake.env()
        path = data / rel
        good = _prepare(data, rel, env)
        before = snapshot(data, fake.calls)
        path.unlink()
        plant(path, good, work)
        planted = _identity(path)
        outside = {p: p.read_bytes() for p in (work / "outside").glob("*")} if (work / "outside").is_dir() else {}
        first = _meet(data, env, command, baseline)
        if first.returncode != 5:
            if not os.path.lexists(path) or _identity(path) != planted:
                problems.append(f"{command} exited {first.returncode} and moved the planted {kind} without a word")
            first = _next_scan(data, env, baseline)
        problems += _loud_planted(first, data, rel, label, kind, planted)
        if kind in LEFT_IN_PLACE and path.is_dir():
            shutil.move(path, work / "moved-aside")  # what the message tells the person to do
        if any(p.read_bytes() != b for p, b in outside.items()):
            problems.append("a file outside the data dir was written through the planted link")
        recovery = recover_until_quiet(data, env, baseline.full_export)
        problems += recovery.problems
        # Quarantined or moved aside by hand, the comment's file is gone: it must get no new budget.
        lost = rel.removeprefix("inbox/").removesuffix(".json") if rel.startswith("inbox/") else None
        problems += _still_kept(data, fake.calls, before, baseline, lost=lost, seen_lost=place == "seen")
    return [f"{place} × {kind} × {command}: {p}" for p in problems]


def _loud_planted(answer: Answer, data: Path, rel: str, label: str, kind: str, planted: tuple[int, int]) -> list[str]:
    if answer.returncode != 5:
        return [f"{answer.args[1]} exited {answer.returncode}, expected 5 for a planted {kind} at {rel}"]
    message = error_of(answer).get("message", "")
    if str(data / rel) not in message:
        return [f"message does not name the planted path: {message!r}"]
    if kind in LEFT_IN_PLACE:
        kept = (data / rel / "mine" / "notes.txt").exists()
        return [] if kept and "left it in place" in message else [f"{kind} not left in place as said: {message!r}"]
    if "quarantine" not in message:
        return [f"message does not say where it went: {message!r}"]
    if planted not in [_identity(p) for p in quarantined_names(data / "quarantine", label)]:
        return [f"the planted {kind} itself is not in quarantine/ (moved something else, or a copy)"]
    return []


@pytest.mark.parametrize("place", list(PLACES))
def test_a_planted_file_is_moved_aside_itself_or_named_and_next_runs_recover(place: str, baseline: Baseline,
                                                                             tmp_path: Path) -> None:
    """Links, FIFOs, directories and lying names at this path: exit 5, never followed, recovery."""
    found: list[str] = []
    cases = [c for c in _planted_cases() if c[0] == place]
    for i, (p, kind, command) in enumerate(cases):
        found += planted_case(baseline, tmp_path / str(i), p, kind, command)
    TALLY.add("bad_inputs", len(cases), found)
    assert found == []
