"""Whether the process that wrote a reservation still runs, from its pid and when it wrote it.

Only for a reservation whose call lock cannot tell (SPEC §15.1; watcher/pipeline/in_flight.py):
the lock file was removed or replaced after it was taken. A pid says "gone" for certain only when
no process has it, or when the one that has it started after the reservation was written (the pid
was reused: after a restart of the machine every pid is). Anything it cannot read is "may still
run": the caller then waits for the reservation's age bound instead.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime, timedelta

# /proc's start times are clock ticks after a boot time in whole seconds: a process started this
# long after the reservation's stamp may still be the one that wrote it.
_START_SLACK = timedelta(seconds=2)


def gone(pid: int, since: datetime) -> bool:
    """Whether the process ``pid`` that wrote something at ``since`` has certainly ended."""
    if pid <= 0 or sys.platform == "win32":  # os.kill(pid, 0) would end the process there
        return pid <= 0
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another account has that pid
    except OSError:
        return False
    started = _started(pid)
    if started is None:
        return False
    state, at = started
    return state in ("Z", "X") or at > since + _START_SLACK


def _started(pid: int) -> tuple[str, datetime] | None:
    """The state letter and start time of ``pid`` from Linux's /proc; ``None`` elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        with open("/proc/stat", "rb") as f:
            boot = next(
                int(line.split()[1])
                for line in f.read().decode().splitlines()
                if line.startswith("btime ")
            )
        # proc(5): the command name (field 2) may hold spaces and ")": it ends at the last ")".
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22, starttime, in clock ticks after boot
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return fields[0], datetime.fromtimestamp(boot + ticks / hz, UTC)
