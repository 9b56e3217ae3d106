"""Subprocess worker for test_seen_processes: one writer of seen.json.

    python _seen_worker.py DATA_DIR START_FILE mark K      -> marks via seen.patch_triage
    python _seen_worker.py DATA_DIR START_FILE batch K     -> batch saves via FileStore(base).save_index(mine)

Every worker waits for START_FILE so they all hit the seen lock together. What each one writes is
a pure function of its role and K (see the plan functions), so the test can compute the result.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _fakes.records import entry

from watcher.state import seen
from watcher.config import Paths
from watcher.models import SeenFile
from watcher.store.files import FileStore

SHARED = [f"c{i}" for i in range(8)]  # comments every writer touches
ROUNDS = 6
TRIAGE_SEQUENCE = ["replied", "open", "ignored", "replied", "ignored"]


def marked_by(k: int) -> list[str]:
    """Each marker owns two shared comments."""
    return SHARED[2 * k: 2 * k + 2]


def final_mark(k: int) -> str:
    return TRIAGE_SEQUENCE[-1 - (k % 2)]


def marks_of(k: int) -> list[str]:
    return TRIAGE_SEQUENCE[: len(TRIAGE_SEQUENCE) - (k % 2)]


def attempts_of(k: int, rnd: int) -> int:
    return k * 10 + rnd


def discovered(k: int, rnd: int) -> str:
    return f"n{k}r{rnd}"


def _wait(start: Path, name: str) -> None:
    # Say "imported and ready", then spin: the parent releases everyone at once.
    start.with_name(f"{start.name}.ready.{name}").touch()
    deadline = time.monotonic() + 30
    while not start.exists():
        if time.monotonic() > deadline:
            raise SystemExit("start file never appeared")
        time.sleep(0.002)


def run_marker(paths: Paths, k: int) -> None:
    for triage in marks_of(k):
        for cid in marked_by(k):
            if FileStore(paths).patch_triage(cid, triage) is None:  # type: ignore[arg-type]
                raise SystemExit(f"marker {k}: {cid} unknown")


def run_batch(paths: Paths, k: int) -> None:
    for rnd in range(ROUNDS):
        base = FileStore(paths).load_index()
        comments = dict(base.comments)
        for cid in SHARED:
            old = comments[cid]
            comments[cid] = old.model_copy(update={"attempts": attempts_of(k, rnd), "status": "failed"})
        comments[discovered(k, rnd)] = entry(attempts=1, status="failed", article_id=k)
        mine = SeenFile(comments=comments, articles=base.articles)
        mine = seen.record_article(mine, 100 + k * ROUNDS + rnd, title=f"a{k}", url=None, comments_count=rnd)
        time.sleep(0.001 * (k % 3))  # let other writers move theirs on: base goes stale
        FileStore(paths).save_index(base, mine)


def main() -> None:
    data, start, role, k = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    paths = Paths(data)
    _wait(start, f"{role}{k}")
    (run_marker if role == "mark" else run_batch)(paths, k)


if __name__ == "__main__":
    main()
