"""Test-only fault injection, loaded into a watcher subprocess via PYTHONPATH.

``WATCHER_TEST_FAULT`` names the fault; product code has no switches for any of this.
"""

from __future__ import annotations

import os
import signal

FAULT = os.environ.get("WATCHER_TEST_FAULT", "")


def _install() -> None:
    from watcher import inbox, seen
    from watcher.errors import SaveFailed

    if FAULT == "save_outcome":
        real_save = inbox.save

        def save(paths, record):  # type: ignore[no-untyped-def]
            if record.attempts and record.attempts[-1].outcome is not None:
                raise SaveFailed(paths.inbox_file(record.comment.id), OSError(28, "No space left on device (injected)"))
            real_save(paths, record)

        inbox.save = save
    elif FAULT == "kill_before_seen_save":
        def save(*args, **kwargs):  # type: ignore[no-untyped-def]
            os.kill(os.getpid(), signal.SIGKILL)

        seen.save = save


if FAULT:
    _install()
