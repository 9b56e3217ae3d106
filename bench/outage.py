"""What an 8-hour provider outage costs, by kind (SPEC §16.6): a count, not a time.

Each kind of outage of tests/_outage.py is played against the loopback recording fake (its models
endpoint saying yes all along) with an injected clock: cron every 30 minutes (``scan`` then
``recheck``), ``--parallel 4``, 30 comments waiting, for 8 hours; then an hour of rounds with the
provider answering. The table: the requests the chat endpoint received during the outage, the
attempts counted (a refused connection sends nothing and counts none, SPEC §16.3), the most any
one comment spent in the outage, and whether every comment had its verdict an hour after it.

    python bench/outage.py                 # every kind, --parallel 4
    python bench/outage.py --parallel 1 8  # other widths
    python bench/outage.py --kinds 500 401

Nothing here runs in the suite; tests/test_outage.py holds the invariant itself.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]  # the loopback fake provider and the outage kinds

from _fakes.provider import running_fake
from _outage import KINDS, cron, play

HOURS = 8.0
COMMENTS = 30


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--parallel", type=int, nargs="+", default=[4])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--tmp", type=Path, default=None, help="where the data dirs go")
    args = parser.parse_args(argv)
    outage = timedelta(hours=HOURS)
    # Then two rounds with the provider answering: the first half-open call is due within them.
    schedule = [*cron(HOURS + 1.0)]
    print(f"{HOURS:g} h outage, cron every 30 min (scan + recheck), {COMMENTS} comments waiting")
    print("| kind | --parallel | requests | attempts counted | most on one comment | "
          "judged an hour after | seconds |")
    print("|---|---|---|---|---|---|---|")
    for parallel in args.parallel:
        for kind in args.kinds:
            with running_fake() as fake, tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
                began = time.monotonic()
                played = play(Path(tmp), fake, kind, parallel=parallel, schedule=schedule,
                              outage_until=outage, comments=COMMENTS)
                took = time.monotonic() - began
            during = [r for r in played.rounds if r.at < outage]
            requests = sum(len(r.requests) for r in during)
            counted = sum(played.in_outage.values())
            most = max(played.in_outage.values(), default=0)
            print(f"| {kind} | {parallel} | {requests} | {counted} | {most} | "
                  f"{'yes' if played.verdicts == COMMENTS else 'no'} | {took:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
