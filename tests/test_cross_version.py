"""SPEC §15.5: the first release, really installed, run beside this one on one data dir.

The first release quarantines any file that holds a field it does not know (``triage_by``,
``tail_start``…), and the user's marks go with it; it refuses a ``schema_version`` above 1 untouched,
so this release writes 2 for every file whose format grew since. Here both run as real processes:
the first release must exit 5 saying the file is newer and change nothing — no quarantine, no byte
of any file — and what this release wrote, marks included, survives; the other way round, this
release reads what the first one wrote without rewriting it.

Building the first release (``git archive``, a venv, ``pip install --no-deps``) costs ~10 s once per
session, so this lane is opt-in: ``WATCHER_CROSS_VERSION=1 .venv/bin/python -m pytest -q
tests/test_cross_version.py`` (the long reliability lane, ``WATCHER_RELIABILITY=long``, runs it too,
and the soak then runs the first release beside its workers). ``tests/test_formats.py`` pins the
version logic in the quick lane.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import _first_release
import pytest
from _proc import run_main, write_export

from watcher.models import SeenFile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _first_release.LANE,
                       reason="opt-in lane: WATCHER_CROSS_VERSION=1 (builds the first release, ~10 s)"),
]

LABELS = ["a1", "a2", "a3"]
OFFLINE = {"WATCHER_PROVIDER": "offline"}


@pytest.fixture(scope="session")
def first_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first release's bin/, built once per session (shared by xdist workers)."""
    return _first_release.for_session(tmp_path_factory)


def old(bin_dir: Path, *args: str, data_dir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``watcher *args`` of the first release, as a process of its own."""
    return subprocess.run([str(bin_dir / "watcher"), *args], env=_first_release.env(data_dir, **OFFLINE),
                          cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def tree(data_dir: Path) -> dict[str, str]:
    """Every file under the data dir with a hash of its bytes (lock files are never state)."""
    return {str(p.relative_to(data_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(data_dir.rglob("*")) if p.is_file() and "locks" not in p.relative_to(data_dir).parts}


def triage(data_dir: Path) -> dict[str, str]:
    done = run_main("cli", "inbox", "--all", "--json", data_dir=data_dir, env=OFFLINE)
    assert done.returncode == 0, done.stderr
    return {c["id"]: c["triage"] for c in json.loads(done.stdout)["result"]["comments"]}


def test_the_first_release_refuses_this_releases_files_and_changes_nothing(
        first_release: Path, data_dir: Path, tmp_path: Path) -> None:
    """After this release scanned, marked and counted: every first-release command exits 5 with
    "has schema_version N … upgrade devto-watcher … left untouched", no file changes, nothing is
    quarantined, and both marks are still there for this release."""
    export = write_export(tmp_path / "export.json", LABELS)
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=OFFLINE).returncode == 0
    assert run_main("cli", "mark", "a1", "replied", data_dir=data_dir, env=OFFLINE).returncode == 0
    assert run_main("cli", "mark", "a2", "ignored", data_dir=data_dir, env=OFFLINE).returncode == 0
    assert run_main("cli", "signals", data_dir=data_dir, env=OFFLINE).returncode == 0
    before = tree(data_dir)
    for args in (["status"], ["inbox"], ["inbox", "--all"], ["show", "a1"], ["mark", "a3", "replied"],
                 ["scan", "--source", str(export)], ["recheck"], ["recheck", "a1"], ["signals"]):
        done = old(first_release, *args, data_dir=data_dir, cwd=tmp_path)
        said = done.stdout + done.stderr
        assert done.returncode == 5, (args, said)
        # 3: inbox files, provider.json and seen.json are all version 3 (SPEC §16.3, §16.6).
        assert "has schema_version " in said and "upgrade devto-watcher" in said and "left untouched" in said, said
        assert tree(data_dir) == before, args
    assert not (data_dir / "quarantine").exists()
    assert triage(data_dir) == {"a1": "replied", "a2": "ignored", "a3": "open"}


def test_this_release_reads_the_first_releases_files_and_writes_its_own_version_only_when_it_writes(
        first_release: Path, data_dir: Path, tmp_path: Path) -> None:
    """The first release scans and marks; this one reads (status, inbox, show) without changing a
    byte, and its first mark writes seen.json in its own version — which the first release then refuses,
    untouched — while both releases' marks stand."""
    export = write_export(tmp_path / "export.json", LABELS)
    for args in (["scan", "--source", str(export)], ["mark", "a1", "replied"], ["signals"]):
        done = old(first_release, *args, data_dir=data_dir, cwd=tmp_path)
        assert done.returncode == 0, (args, done.stdout + done.stderr)
    written = tree(data_dir)
    for args in (["status"], ["inbox", "--all"], ["show", "a1"]):
        assert run_main("cli", *args, data_dir=data_dir, env=OFFLINE).returncode == 0, args
    assert tree(data_dir) == written
    assert run_main("cli", "mark", "a2", "ignored", data_dir=data_dir, env=OFFLINE).returncode == 0
    assert json.loads((data_dir / "seen.json").read_bytes())["schema_version"] == SeenFile.SCHEMA_VERSION
    assert {json.loads(p.read_bytes())["schema_version"] for p in (data_dir / "inbox").iterdir()} == {1}
    after = tree(data_dir)
    refused = old(first_release, "mark", "a3", "ignored", data_dir=data_dir, cwd=tmp_path)
    assert refused.returncode == 5 and f"has schema_version {SeenFile.SCHEMA_VERSION}" in refused.stderr, \
        refused.stderr
    assert tree(data_dir) == after and not (data_dir / "quarantine").exists()
    assert triage(data_dir) == {"a1": "replied", "a2": "ignored", "a3": "open"}
