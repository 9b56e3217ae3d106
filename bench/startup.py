"""Figure 5: start-up — ``watcher status --json`` and ``watcher-bridge status`` vs ``python -c pass``.

Real processes (the console scripts next to ``sys.executable``) on an empty temp data dir,
runs interleaved, medians compared. Then one ``python -X importtime`` run of each command tells
which modules it loads: httpx, rich and the MCP SDK must not be among them (none of these
commands uses them), and the biggest import costs are listed for the README.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from _common import Row, median, ms, temp_dir, timed

BIN = Path(sys.executable).parent
HEAVY = ("httpx", "rich", "mcp")
WATCH = ("typer", "click", "pydantic", "pydantic_core", "filelock", "watcher.models", "watcher.cli",
         "watcher.commands", "importlib.metadata")


def _commands(data_dir: Path) -> dict[str, list[str]]:
    return {"python -c pass": [sys.executable, "-c", "pass"],
            "watcher status --json": [str(BIN / "watcher"), "status", "--json"],
            "watcher-bridge status": [str(BIN / "watcher-bridge"), "status"]}


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WATCHER_", "DEVTO_"))}
    env["WATCHER_DATA_DIR"] = str(data_dir)
    env.pop("PYTHONPATH", None)
    return env


def _run(argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")


def imports(argv: list[str], env: dict[str, str]) -> dict[str, int]:
    """Module -> cumulative import time in µs, from one ``-X importtime`` run."""
    script = argv[0]
    done = subprocess.run([sys.executable, "-X", "importtime", script, *argv[1:]], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, text=True)
    found: dict[str, int] = {}
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+(\d+) \|(\s*)(\S+)", line)
        if match:
            found[match.group(3)] = int(match.group(1))
    return found


def run(base: Path | None, *, quick: bool) -> list[Row]:
    reps = 5 if quick else 11
    with temp_dir(base, "startup") as root:
        env = _env(root / "data")
        cmds = _commands(root)
        for argv in cmds.values():
            _run(argv, env)  # warm: .pyc files, page cache
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(reps):
            for name, argv in cmds.items():
                times[name].append(timed(lambda argv=argv: _run(argv, env)))
        loaded = {name: imports(argv, env) for name, argv in cmds.items() if name != "python -c pass"}
    floor = median(times["python -c pass"])
    rows = []
    for i, name in enumerate(("watcher status --json", "watcher-bridge status")):
        took = median(times[name])
        mods = loaded[name]
        heavy = sorted({m.split(".")[0] for m in mods if m.split(".")[0] in HEAVY})
        costs = ", ".join(f"{m} {mods[m] / 1000:.0f} ms" for m in WATCH if m in mods)
        notes = [f"heavy imports loaded: {', '.join(heavy) if heavy else 'none (no httpx, rich or mcp)'}",
                 (f"{len(mods)} modules imported; cumulative import times (-X importtime, inflated by the "
                 f"tracing itself): {costs}"),
                 f"median of {reps} interleaved runs; python -c pass median {ms(floor)}"]
        rows.append(Row(f"5{'ab'[i]}", f"`{name}` process start to exit, empty data dir", ms(took), ms(floor),
                        took / floor, "report the ratio; no httpx/rich/mcp imported", not heavy, notes))
    return rows
