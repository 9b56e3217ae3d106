"""Every benchmark, each figure against its target: ``python bench/run.py`` (bench/README.md).

Each figure is a ratio against a floor measured in the same run, printed with its target and
OK or MISS; nothing here is a test, and nothing fails the suite. Data lives in fresh temp dirs
only (never ./data or the user's data dir), the only network is 127.0.0.1, and the caller's
WATCHER_*, DEVTO_* and provider key variables are cleared first.

    python bench/run.py                    every figure but the slow ones, full sizes
    python bench/run.py --quick            small sizes, a smoke check
    python bench/run.py --only startup mcp some figures only
    python bench/run.py --only reach idle  the slow ones: real rounds of watch (~6.5, ~5 min)
    python bench/run.py --json rows.json   also write the rows as JSON
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The bench's helpers, and the tests' loopback fake provider (tests/_fakes/provider.py).
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

# name -> (module, function, what it guards)
FIGURES = {
    "startup": ("startup", "run_startup", "start-up of the commands a person types"),
    "mcp": (
        "startup",
        "run_mcp",
        "MCP initialize and server/discover: what a client waits for before it has the tools",
    ),
    "batch": ("batch", "run_batch", "a 20-comment scan with --parallel 4, wall time"),
    "lock": ("batch", "run_lock", "pipeline lock holds during a batch: how long others wait"),
    "per-call": ("batch", "run_per_call", "watcher's own cost per model call"),
    "devto": ("devto_requests", "run", "dev.to requests per steady-state scan"),
    "scale": ("state_scale", "run", "status and an idle scan at 10k and 50k stored comments"),
    "signals": ("signals_counter", "run", "the signal counter after a long history"),
    "reach": (
        "reach",
        "run_reach",
        "a new comment reaching the author under watch --every 1m (minutes of wall time)",
    ),
    "reach-model": (
        "reach",
        "run_reach_model",
        "the same with a model answering in 4 s, 4 calls at once (minutes)",
    ),
    "idle": ("reach", "run_idle", "dev.to requests per idle round of watch --every 1m (minutes)"),
    "memory": ("memory", "run", "peak memory of a 20,000-comment first scan"),
}
# Figures that wait on real rounds of `watch --every 1m`: minutes each, so run only when named.
SLOW = ("reach", "reach-model", "idle")
CLEARED = ("WATCHER_", "DEVTO_", "OPENAI_", "ANTHROPIC_")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke check)")
    parser.add_argument("--only", nargs="+", choices=list(FIGURES), help="run only these figures")
    parser.add_argument("--tmp", type=Path, default=None, help="where temp data dirs go")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    for name in [n for n in os.environ if n.startswith(CLEARED)]:
        del os.environ[name]  # the bench configures itself; a user's settings must not leak in

    print(
        f"# watcher bench{' (--quick)' if args.quick else ''}: python "
        f"{platform.python_version()}, {os.cpu_count()} cores, load "
        f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}",
        flush=True,
    )
    rows = []
    started = time.perf_counter()
    chosen = args.only or [name for name in FIGURES if name not in SLOW]
    if not args.only:
        print(f"# not run (minutes each, name them with --only): {', '.join(SLOW)}", flush=True)
    for key in chosen:
        module_name, function, title = FIGURES[key]
        t0 = time.perf_counter()
        print(f"\n## {key}: {title}", flush=True)
        figure = getattr(importlib.import_module(module_name), function)
        for row in figure(args.tmp, quick=args.quick):
            print(row.render(), flush=True)
            rows.append(row)
        print(f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    missed = [r.figure for r in rows if not r.ok]
    print(
        f"\n# {len(rows) - len(missed)}/{len(rows)} on target"
        + (f"; missed: {', '.join(missed)}" if missed else "")
        + f"; total {time.perf_counter() - started:.0f} s"
    )
    if args.json is not None:
        text = json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
