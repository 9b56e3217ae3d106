"""Figure 5: start-up — ``watcher status --json`` and ``watcher-bridge status`` vs ``python -c pass``;
``watcher-bridge mcp`` until it answers ``initialize`` and ``tools/list`` vs the MCP SDK's own import.

Real processes (the console scripts next to ``sys.executable``) on an empty temp data dir,
runs interleaved, medians compared. Then one ``python -X importtime`` run of each command tells
which modules it loads: httpx, rich and the MCP SDK must not be among them (none of these
commands uses them), and the biggest import costs are listed for the README.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from _common import Row, median, ms, temp_dir, timed

BIN = Path(sys.executable).parent
HEAVY = ("httpx", "rich", "mcp")
WATCH = ("typer", "click", "pydantic", "pydantic_core", "filelock", "watcher.models", "watcher.cli.app",
         "watcher.commands.core", "importlib.metadata")


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


_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
_LIST = [{"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]


def _mcp_answers(env: dict[str, str]) -> tuple[float, float]:
    """Seconds from spawning ``watcher-bridge mcp`` to its ``initialize`` answer, and to its tool list:
    what a client waits before it can offer the tools to its model (docs/agents.md)."""
    began = time.perf_counter()
    proc = subprocess.Popen([str(BIN / "watcher-bridge"), "mcp"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(_INITIALIZE) + "\n")
        proc.stdin.flush()
        if '"id":1' not in proc.stdout.readline().replace(" ", ""):
            raise RuntimeError("watcher-bridge mcp did not answer initialize")
        initialized = time.perf_counter() - began
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in _LIST))
        proc.stdin.flush()
        if '"tools"' not in proc.stdout.readline():
            raise RuntimeError("watcher-bridge mcp did not list its tools")
        return initialized, time.perf_counter() - began
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def _sdk_imported(env: dict[str, str]) -> float:
    """Seconds from spawning a Python that imports the MCP SDK's server to its first line out:
    the same moment as an answer, without the interpreter's teardown a full run would add."""
    began = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", "import mcp.server.mcpserver; print('imported', flush=True)"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    took = time.perf_counter() - began
    proc.wait(timeout=10)
    if line.strip() != "imported":
        raise RuntimeError("the MCP SDK did not import")
    return took


def _mcp_row(env: dict[str, str], reps: int) -> Row:
    _sdk_imported(env)
    _mcp_answers(env)  # warm
    floors, answers = [], []
    for _ in range(reps):
        floors.append(_sdk_imported(env))
        answers.append(_mcp_answers(env))
    floor, init, listed = median(floors), median([a[0] for a in answers]), median([a[1] for a in answers])
    notes = [f"tools/list answered after {ms(listed)} (median)",
             (f"median of {reps} interleaved runs; the floor is the import of the MCP SDK's server alone "
             "(`python -c 'import mcp.server.mcpserver'`), which any server built on it pays")]
    return Row("5c", "`watcher-bridge mcp` spawn to its `initialize` answer", ms(init), ms(floor),
               init / floor, "report the ratio (watcher's own share of a start)", True, notes)


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
        # Only with the mcp extra installed (bench/README.md: `pip install -e '.[test,mcp]'`).
        mcp_row = _mcp_row(env, reps) if importlib.util.find_spec("mcp") is not None else None
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
    return rows if mcp_row is None else [*rows, mcp_row]
