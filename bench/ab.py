"""This tree against another commit, on the same bench and in the same minutes: ``python bench/ab.py REV``.

A figure-1 ratio on this machine's disk moves by as much as its margin from one few-minute
period to the next, and the run made second in a pair tends to come out worse (bench/README.md,
"Same bench, two trees"). So a run of ``bench/run.py`` on each tree at different times cannot
tell a regression from the disk. This runs **this tree's** bench against both trees, alternately
in ABBA order (this, other, other, this per round), and prints each run's ratios and the median
per tree.

    python bench/ab.py 2c5e689                 figure 1, one round (four runs, about 3 minutes)
    python bench/ab.py HEAD~5 --rounds 2       two rounds
    python bench/ab.py 2c5e689 --tmp /dev/shm  on tmpfs: no disk, so what is left is CPU
    python bench/ab.py 2c5e689 --instructions  instructions per recheck call, counted (valgrind)

``--instructions`` counts instead of timing: a recheck of 300 failed comments less a recheck of
100 over the same 300, under ``valgrind --tool=cachegrind`` on tmpfs with a fixed hash seed, per
call. The same command repeats its count to a few hundredths of a per cent, where times here
move by a third; a change to what ran before the recheck can move it by ~1 % (where the garbage
collector runs shifts), so differences under ~2 % are none. It counts user space only, not
what the system calls cost in the kernel.

The other tree is ``git archive``d into a temp dir and put first on ``PYTHONPATH``, so the bench's
``import watcher`` loads it; the bench itself, the fake provider and the interpreter stay this
tree's. Only the in-process figures (1–4) can be compared so: 5–8 start console scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
IN_PROCESS = ("1", "2", "3", "4")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def _extract(rev: str, into: Path) -> None:
    """The other tree as committed at ``rev`` (its package reads files beside it, e.g. ``prompts/``)."""
    archive = into / "tree.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], check=True, stdout=out)
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python 3.11.4+: refuse links and paths out of ``into``
            tar.extractall(into, filter="data")
        else:
            tar.extractall(into)  # our own repository's archive
    archive.unlink()


def _run(tree: Path, figures: list[str], tmp: Path | None, quick: bool, rows_file: Path) -> dict[str, float]:
    """One run of this tree's bench against ``tree``'s watcher; the ratio of each figure row."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *filter(None, [os.environ.get("PYTHONPATH")])])}
    command = [sys.executable, str(HERE / "run.py"), "--only", *figures, "--json", str(rows_file)]
    command += ["--tmp", str(tmp)] if tmp is not None else []
    command += ["--quick"] if quick else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not rows_file.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        raise SystemExit(f"this tree's bench did not run against {tree}:\n{tail}")
    rows = json.loads(rows_file.read_text())
    rows_file.unlink()
    return {row["figure"]: row["ratio"] for row in rows if row["ratio"] is not None}


# One recheck under cachegrind: ``python -c INSTRUCTIONS SEEDED CALLS`` (bench helpers on sys.path).
INSTRUCTIONS = """
import sys
from pathlib import Path
from bookkeeping import INSTANT, _recheck, _seed_failed
from _common import settings, temp_dir
import watcher
print(watcher.__file__)
with temp_dir(Path(sys.argv[1]), "ir") as root:
    s = settings(root)
    _seed_failed(s, int(sys.argv[2]))
    _recheck(s, int(sys.argv[3]), INSTANT)
"""


def _instructions(tree: Path, tmp: Path, seeded: int, calls: int) -> int:
    """User-space instructions of one process that rechecks ``calls`` of ``seeded`` failed comments."""
    env = {**os.environ, "PYTHONHASHSEED": "0",
           "PYTHONPATH": os.pathsep.join([str(tree), str(HERE), str(ROOT / "tests")])}
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               sys.executable, "-c", INSTRUCTIONS, str(tmp), str(seeded), str(calls)]
    # cwd: ``-c`` puts the working directory first on sys.path, ahead of PYTHONPATH, and from the
    # repository's root that would import this tree's watcher for both.
    done = subprocess.run(command, env=env, cwd=tmp, capture_output=True, text=True, check=False)
    counts = [line for line in done.stderr.splitlines() if "I   refs:" in line or "I refs:" in line]
    if done.returncode != 0 or not counts:
        tail = "\n".join(done.stderr.splitlines()[-15:])
        raise SystemExit(f"the recheck under valgrind did not run against {tree}:\n{tail}")
    if not Path(done.stdout.strip()).is_relative_to(tree):
        raise SystemExit(f"the recheck imported {done.stdout.strip()}, not the watcher of {tree}")
    return int(counts[-1].split(":")[1].replace(",", "").strip())


def _count(trees: dict[str, Path], tmp: Path | None) -> None:
    """Instructions per recheck call in each tree (``--instructions``)."""
    where = tmp or Path("/dev/shm")
    for name, tree in trees.items():
        small, large = (_instructions(tree, where, 300, calls) for calls in (100, 300))
        print(f"{name:<{max(map(len, trees))}}  {(large - small) / 200 / 1e6:.3f} M instructions per call "
              "(a recheck of 300 less one of 100)", flush=True)


def _timed(trees: dict[str, Path], args: argparse.Namespace, rows_file: Path) -> None:
    """ABBA rounds of this tree's bench against both trees; each run's ratios, then the median per tree."""
    this_name, other_name = trees
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for round_no in range(1, args.rounds + 1):
        for name in (this_name, other_name, other_name, this_name):
            ratios = _run(trees[name], args.only, args.tmp, args.quick, rows_file)
            results[name].append(ratios)
            shown = "  ".join(f"{fig} {ratio:.2f}×" for fig, ratio in ratios.items())
            print(f"round {round_no}  {name:<{max(map(len, trees))}}  {shown}", flush=True)
    print("\n# median per tree")
    for name, runs in results.items():
        figures = sorted({fig for run in runs for fig in run})
        medians = "  ".join(f"{fig} {statistics.median(run[fig] for run in runs if fig in run):.2f}×"
                            for fig in figures)
        print(f"{name:<{max(map(len, results))}}  {medians}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rev", help="the commit to compare this tree with (anything git rev-parse takes)")
    parser.add_argument("--only", nargs="+", choices=IN_PROCESS, default=["1"], help="figures (default: 1)")
    parser.add_argument("--rounds", type=int, default=1, help="ABBA rounds, four runs each (default: 1)")
    parser.add_argument("--tmp", type=Path, default=None, help="where the bench's temp data dirs go")
    parser.add_argument("--quick", action="store_true", help="the bench's small sizes (a smoke check)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per recheck call under valgrind instead of timing; --only, --rounds "
                             "and --quick do not apply (default --tmp: /dev/shm)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    try:
        commit = _git("rev-parse", "--verify", f"{args.rev}^{{commit}}")
    except subprocess.CalledProcessError:
        parser.error(f"not a commit here: {args.rev}")
    dirty = " (with uncommitted changes)" if _git("status", "--porcelain", "--", "watcher") else ""
    this_name = f"this tree{dirty}"
    other_name = args.rev if commit.startswith(args.rev) else f"{args.rev} ({commit[:7]})"
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="watcher-bench-ab-") as scratch:
        other_tree = Path(scratch) / "other"
        other_tree.mkdir()
        _extract(commit, other_tree)
        trees = {this_name: ROOT, other_name: other_tree}
        if args.instructions:
            print(f"# instructions per recheck call: {this_name} against {other_name}", flush=True)
            _count(trees, args.tmp)
        else:
            print(f"# A/B of figure(s) {' '.join(args.only)}: {this_name} against {other_name}, "
                  f"{args.rounds} ABBA round(s){', --quick' if args.quick else ''}", flush=True)
            _timed(trees, args, Path(scratch) / "rows.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
