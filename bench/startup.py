"""Start-up: what a person waits for before a command answers, and what an MCP client waits for.

``startup``: ``watcher --help``, ``watcher status``, ``watcher inbox`` and ``watcher-bridge
status`` as processes (the console scripts next to ``sys.executable``) on a small populated temp
data dir (20 comments triaged by the offline provider), against ``python -c pass``; runs
interleaved, medians compared. One ``python -X importtime`` run per command names the heavy
packages it loads, for the notes.

``mcp``: ``watcher-bridge mcp`` spawned, ``initialize`` written on stdin, the time its answer's
line arrives, against ``python -c pass``; beside it the same for ``server/discover``, the opening
of the 2026-07-28 revision (Claude Code 2.1.332). The server answers both before it imports the
MCP SDK (bridge/mcp_handshake.py); the notes add the ``tools/list`` answer (after the SDK is
loaded) and the time a Python takes to import the SDK's server alone.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from _common import BIN, Row, clean_env, median, ms, process, temp_dir, timed, write_export

HEAVY = ("httpx", "rich", "mcp", "typer", "pydantic")
# None of these commands makes a request or serves MCP: loading either package is start-up
# spent on nothing (the commands that need them import them when they run).
NEVER = ("httpx", "mcp")
# The ratio to ``python -c pass`` at the median: 20-27x on this 2-core machine under load 4-6
# (bench/README.md); the targets leave room for the floor's own noise.
COMMANDS = (  # (figure, what a person types, argv after the script, target ratio)
    ("startup.help", "watcher --help", ["watcher", "--help"], 30.0),
    ("startup.status", "watcher status", ["watcher", "status"], 35.0),
    ("startup.inbox", "watcher inbox", ["watcher", "inbox"], 35.0),
    ("startup.bridge", "watcher-bridge status", ["watcher-bridge", "status"], 30.0),
)
# initialize and server/discover are answered before the SDK is imported
# (bridge/mcp_handshake.py), so the floor is a bare Python: 25x is ~0.5 s on a quiet machine, well
# inside the 5 s Claude Code gives an alwaysLoad server; initialize measured 19.9x (543 ms) under
# load 10, where importing the SDK alone took 1.97 s.
MCP_TARGET = 25.0


def _commands() -> dict[str, list[str]]:
    found = {"python -c pass": [sys.executable, "-c", "pass"]}
    found.update({name: [str(BIN / argv[0]), *argv[1:]] for _, name, argv, _ in COMMANDS})
    return found


def populate(root: Path) -> dict[str, str]:
    """A data dir with 20 triaged comments (offline provider); returns the env that points at it."""
    env = clean_env(root / "data")
    export = write_export(root / "export.json", 20)
    scan = [str(BIN / "watcher"), "scan", "--source", str(export), "--limit", "20"]
    process(scan, {**env, "WATCHER_PROVIDER": "offline"})
    return env


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The packages of :data:`HEAVY` one ``-X importtime`` run of ``argv`` loads."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        text=True,
    )
    found = set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)", line)
        if match and match.group(1).split(".")[0] in HEAVY:
            found.add(match.group(1).split(".")[0])
    return sorted(found)


_INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
_LIST: list[dict[str, Any]] = [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]
# The 2026-07-28 opening: every request carries this envelope, no initialize.
_ENVELOPE = {
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
}
_DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": _ENVELOPE}
_DISCOVER_LIST = [{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": _ENVELOPE}]
OPENINGS: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {
    "initialize": (_INITIALIZE, _LIST),
    "server/discover": (_DISCOVER, _DISCOVER_LIST),
}


def mcp_answers(env: dict[str, str], opening: str = "initialize") -> tuple[float, float]:
    """Seconds from spawning ``watcher-bridge mcp`` to its answer to the ``opening`` request
    (:data:`OPENINGS`), and to its tool list: what a client waits before it can offer the tools
    to its model."""
    first, listing = OPENINGS[opening]
    began = time.perf_counter()
    proc = subprocess.Popen(
        [str(BIN / "watcher-bridge"), "mcp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(first) + "\n")
        proc.stdin.flush()
        if '"id":1' not in proc.stdout.readline().replace(" ", ""):
            raise RuntimeError(f"watcher-bridge mcp did not answer {opening}")
        initialized = time.perf_counter() - began
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in listing))
        proc.stdin.flush()
        if '"tools"' not in proc.stdout.readline():
            raise RuntimeError("watcher-bridge mcp did not list its tools")
        return initialized, time.perf_counter() - began
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def _sdk_import(env: dict[str, str]) -> float:
    """Seconds from spawning a Python that imports the MCP SDK's server to its first line out."""
    code = "import mcp.server.mcpserver; print('imported', flush=True)"
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    took = time.perf_counter() - began
    proc.wait(timeout=10)
    return took if line.strip() == "imported" else float("nan")


def run_startup(base: Path | None, *, quick: bool) -> list[Row]:
    reps = 3 if quick else 11
    with temp_dir(base, "startup") as root:
        env = populate(root)
        cmds = _commands()
        for argv in cmds.values():
            process(argv, env)  # warm: .pyc files, page cache
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(reps):
            for name, argv in cmds.items():
                times[name].append(timed(partial(process, argv, env)))
        heavy = {
            name: heavy_imports(argv, env)
            for name, argv in cmds.items()
            if name != "python -c pass"
        }
    floor = median(times["python -c pass"])
    rows = []
    for figure, name, _, target in COMMANDS:
        took = median(times[name])
        ratio = took / floor
        wasted = [p for p in heavy[name] if p in NEVER]
        notes = [
            f"loads {', '.join(heavy[name]) or 'none'} of {', '.join(HEAVY)} (-X importtime)",
            f"median of {reps} interleaved runs",
        ]
        rows.append(
            Row(
                figure,
                f"`{name}` process start to exit, 20 comments in the data dir",
                ms(took),
                f"{ms(floor)} (python -c pass)",
                ratio,
                f"≤ {target:.0f}×, no {' or '.join(NEVER)} imported",
                ratio <= target and not wasted,
                notes,
            )
        )
    return rows


def run_mcp(base: Path | None, *, quick: bool) -> list[Row]:
    reps = 3 if quick else 11
    with temp_dir(base, "mcp") as root:
        env = clean_env(root / "data")
        pass_argv = [sys.executable, "-c", "pass"]
        mcp_answers(env)  # warm
        floors, sdk = [], []
        answers: dict[str, list[tuple[float, float]]] = {opening: [] for opening in OPENINGS}
        for _ in range(reps):
            floors.append(timed(lambda: process(pass_argv, env)))
            for opening, times in answers.items():
                times.append(mcp_answers(env, opening))
            sdk.append(_sdk_import(env))
    floor = median(floors)
    rows = []
    for opening, times in answers.items():
        first, listed = median([a[0] for a in times]), median([a[1] for a in times])
        ratio = first / floor
        notes = [
            f"tools/list answered {ms(listed)} after the spawn (median): the SDK loaded by then",
            f"importing the MCP SDK's server alone: {ms(median(sdk))} ({first / median(sdk):.2f}×)",
            f"median of {reps} interleaved runs",
        ]
        rows.append(
            Row(
                "mcp." + opening.removeprefix("server/"),
                f"`watcher-bridge mcp` spawn to its `{opening}` answer over stdio",
                ms(first),
                f"{ms(floor)} (python -c pass)",
                ratio,
                f"≤ {MCP_TARGET:.0f}×",
                ratio <= MCP_TARGET,
                notes,
            )
        )
    return rows
