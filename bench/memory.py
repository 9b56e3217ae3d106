"""Peak memory of an account's first scan: ``watcher scan`` discovering 20,000 comments.

A first scan meets every comment of the account at once: it creates an inbox file for each and
builds the index of all of them, so whatever it holds per comment is multiplied by the account.
Measured: the peak resident set (``ru_maxrss``) of ``watcher scan --source export.json --json``
as a process of its own, read with ``os.wait4`` for that one child, the offline provider making
its 5 calls. Floor: 107 MiB, the same scan's peak with the last release, 0.2.0 (the red team's
measurement of 2026-12-03); target: at most that (ratio ≤ 1.0).

Setup (not measured): a Forem-format export of 20,000 comments created in the last minutes, all
inside the backlog window (so every one is pending, the most a first scan holds), in a fresh
data dir.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from _common import Row, clean_env, temp_dir, write_export

COMMENTS = 20_000
RELEASED_MIB = 107.0  # 0.2.0's peak for the same scan
SCRIPT = Path(sys.executable).with_name("watcher")


def peak_mib(argv: list[str], env: dict[str, str]) -> float:
    """The peak resident set of ``argv`` run to its end, in MiB (Linux reports KiB)."""
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode() if child.stderr is not None else ""
    if child.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}: {err[-500:]}")
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes
    return usage.ru_maxrss * scale / 2**20


def run(tmp: Path | None, *, quick: bool = False) -> Iterator[Row]:
    n = 2_000 if quick else COMMENTS
    with temp_dir(tmp, "memory") as root:
        export = write_export(root / "export.json", n)
        env = clean_env(root / "data", WATCHER_PROVIDER="offline")
        peak = peak_mib([str(SCRIPT), "scan", "--source", str(export), "--json"], env)
    ratio = peak / RELEASED_MIB
    yield Row(
        "memory.first_scan",
        f"peak memory of a first scan discovering {n:,} comments (offline provider, 5 calls)",
        f"{peak:.1f} MiB",
        f"{RELEASED_MIB:.0f} MiB (0.2.0, {COMMENTS:,} comments)",
        ratio,
        "≤ 1.0×",
        ratio <= 1.0,
        ["--quick: a smaller account than the floor's; only the full size is the figure"]
        if quick
        else [],
    )
