"""Run every benchmark and print each figure against its target: ``python bench/run.py``.

Each figure is a ratio against a floor measured in the same run (see bench/README.md). Data
lives in fresh temp dirs only (never ./data), and the only network is 127.0.0.1.

    python bench/run.py                 full sizes (about 3–5 minutes on 2 shared cores)
    python bench/run.py --quick         small sizes, for a smoke check (well under a minute)
    python bench/run.py --only 1 4      some figures only
    python bench/run.py --json out.json also write the rows as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]  # bench helpers, and the loopback fake provider

FIGURES = {
    "1": ("bookkeeping", "bookkeeping per model call"),
    "2": ("devto_requests", "dev.to requests per steady-state scan"),
    "3": ("state_scale", "state at scale"),
    "4": ("signals_counter", "signal counter"),
    "5": ("startup", "start-up"),
    "6": ("concurrency", "parallel calls, and the pipeline lock held for decisions only (figures 6–8)"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke check, not the recorded figures)")
    parser.add_argument("--only", nargs="+", choices=sorted(FIGURES), help="run only these figures")
    parser.add_argument("--tmp", type=Path, default=None, help="where temp data dirs go (default: system temp dir)")
    parser.add_argument("--json", type=Path, default=None, help="also write the result rows to this file")
    args = parser.parse_args(argv)
    for name in [n for n in os.environ if n.startswith(("WATCHER_", "DEVTO_"))]:
        del os.environ[name]  # the bench configures itself; a user's settings must not leak in

    import importlib

    print(f"# watcher benchmarks{' (--quick)' if args.quick else ''}: python {platform.python_version()}, "
          f"{os.cpu_count()} cores, {platform.platform()}", flush=True)
    rows = []
    started = time.perf_counter()
    for key in args.only or sorted(FIGURES):
        module_name, title = FIGURES[key]
        t0 = time.perf_counter()
        print(f"\n## {key}. {title}", flush=True)
        module = importlib.import_module(module_name)
        for row in module.run(args.tmp, quick=args.quick):
            print(row.render(), flush=True)
            rows.append(row)
        print(f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    missed = [r.figure for r in rows if not r.ok]
    print(f"\n# {len(rows) - len(missed)}/{len(rows)} on target"
          + (f"; missed: {', '.join(missed)}" if missed else "")
          + f"; total {time.perf_counter() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_json() for r in rows], indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
