"""The Codex entrypoint: the same watcher commands, answered as one JSON envelope each.

Nothing here decides anything about attempts, locks or state; it only adapts input and output.
"""

import os
import signal
import sys


def leave_quietly(signum: int, _frame: object) -> None:
    """End at once, with the signal's exit code and no traceback: nothing has run yet."""
    os._exit(128 + signum)


# Started as ``watcher-bridge`` (or ``python -m bridge``): a Ctrl-C while the modules load ends
# quietly with 130 (SPEC §15.4, tests/test_redteam_signals.py); bridge.cli.main puts Python's own
# handler back once the commands can answer it themselves.
if os.path.basename(sys.argv[0]) in ("watcher-bridge", "-m") and (
    signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    signal.signal(signal.SIGINT, leave_quietly)
