"""The store is the one seam for state (SPEC §4, STYLE rule 14): no module of ``watcher/`` outside
``watcher/store/`` opens, writes, renames, syncs or removes a file, and the pipeline reaches state
only through the run's store."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WATCHER = Path(__file__).resolve().parent.parent / "watcher"
BRIDGE = WATCHER.parent / "bridge"

# ``os.<name>(…)`` calls that touch the file system's state.
OS_CALLS = frozenset({"open", "replace", "rename", "renames", "fsync", "fdatasync", "sync", "unlink", "remove",
                      "rmdir", "removedirs", "link", "symlink", "mkdir", "makedirs", "truncate", "ftruncate",
                      "write", "pwrite", "utime", "chmod"})
# Method calls that only a path has (``str.replace`` is why ``replace`` is not here: ``os.replace`` is).
PATH_METHODS = frozenset({"write_text", "write_bytes", "read_text", "read_bytes", "unlink", "mkdir", "rmdir",
                          "touch", "rename", "symlink_to", "hardlink_to", "open"})
MODULES = frozenset({"tempfile", "shutil"})

# The reads outside the store, each of a file that is no state of the data dir.
ALLOWED = {
    ("watcher/config.py", "read_bytes"): "config.toml: the user's settings, read once, never written",
    ("watcher/source/_export.py", "read_bytes"): "--source FILE: the user's Forem export, read only",
    ("watcher/providers/prompts.py", "read_bytes"): "the prompt template shipped with the package",
    ("watcher/cli/frontend.py", "os.open"): "/dev/null over a closed stdout (SPEC §13.6), no file of the data dir",
    ("watcher/commands/labelled.py", "read_bytes"): "the labelled set's labels.json (SPEC §15.6), read only",
    ("bridge/mcp_handshake.py", "os.write"): "the initialize answer on fd 1, the MCP protocol pipe, no file",
}


def _touches(path: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(node.lineno, f"import {n}") for n in names if n.split(".")[0] in MODULES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.append((node.lineno, "open"))
        elif isinstance(func, ast.Attribute):
            owner = func.value.id if isinstance(func.value, ast.Name) else None
            if owner == "os" and func.attr in OS_CALLS:
                found.append((node.lineno, f"os.{func.attr}"))
            elif owner in MODULES:
                found.append((node.lineno, f"{owner}.{func.attr}"))
            elif owner != "os" and func.attr in PATH_METHODS:
                found.append((node.lineno, func.attr))
    return found


def _sources() -> list[Path]:
    return sorted([*WATCHER.rglob("*.py"), *BRIDGE.rglob("*.py")])


def test_only_the_store_touches_files() -> None:
    """Every open, write, rename, sync and removal in watcher/ and bridge/ is the store's."""
    offenders = []
    for path in _sources():
        rel = path.relative_to(WATCHER.parent).as_posix()
        if rel.startswith("watcher/store/"):
            continue
        for line, call in _touches(path):
            if (rel, call) not in ALLOWED:
                offenders.append(f"{rel}:{line}: {call}")
    assert offenders == [], "state I/O outside watcher/store/:\n" + "\n".join(offenders)


def test_the_scan_catches_what_it_is_for(tmp_path: Path) -> None:
    """The scan itself finds each kind of file access (so the test above cannot pass by seeing nothing)."""
    probe = tmp_path / "probe.py"
    probe.write_text("import os, tempfile\nopen('x')\nos.replace('a', 'b')\nos.fsync(3)\n"
                     "p.write_bytes(b'')\n'a'.replace('a', 'b')\n", encoding="utf-8")
    assert [call for _, call in _touches(probe)] == ["import tempfile", "open", "os.replace", "os.fsync",
                                                     "write_bytes"]


@pytest.mark.parametrize("module", ["durable", "locks", "signals"])
def test_the_state_io_modules_live_in_the_store(module: str) -> None:
    """The durable write, the locks and the signal log are the file store's parts, not the package's."""
    assert not (WATCHER / f"{module}.py").exists()
    assert (WATCHER / "store" / f"{module}.py").exists()


def test_the_pipeline_and_commands_never_import_the_store_internals() -> None:
    """Above the store, code names only the seam: ``watcher.store`` (Store, Reservation, CallLock), the one
    implementation, ``watcher.store.files.FileStore``, the scratch data dir of ``eval --set`` (SPEC §15.6) and the
    outbox's files (SPEC §16.1)."""
    offenders = []
    for path in _sources():
        rel = path.relative_to(WATCHER.parent).as_posix()
        if rel.startswith("watcher/store/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("watcher.store"):
                continue
            allowed = {"watcher.store": {"Store", "Reservation", "CallLock"}, "watcher.store.files": {"FileStore"},
                       "watcher.store.scratch": {"ScratchStore", "scratch_data_dir"},
                       "watcher.store.outbox": {"OutboxFiles", "round_lock"},
                       "watcher.store.places": {"overlapping", "begin_migration", "finish_migration",
                                                "unfinished_migration"},
                       "watcher.store.migrating": {"read_log", "log_head", "end_log_line", "sync_log",
                                                   "read_regular", "write_settings"}}
            if node.module not in allowed:
                offenders.append(f"{rel}:{node.lineno}: from {node.module}")
            else:
                extra = {a.name for a in node.names} - allowed[node.module]
                offenders += [f"{rel}:{node.lineno}: from watcher.store import {n}" for n in sorted(extra)]
    assert offenders == []
