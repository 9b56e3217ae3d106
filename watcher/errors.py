"""Every error watcher raises on purpose, and the one mapping from errors to exit codes.

    WatcherError                     exit 1   base; anything unexpected also exits 1
    ├── UsageError                   exit 2   bad option, unknown comment id, bad argument
    │   └── SubmitRefused                     an agent's submit for what is not its open claim
    ├── ConfigError                  exit 2   bad config file/value, no API key, no such dev.to user
    ├── ProviderSetup                exit 2   the provider refused the setup: key, model, request
    ├── ProviderStop                 exit 3   the provider stopped the batch; the user must wait
    │   ├── RateLimited                       provider HTTP 429 (may carry Retry-After)
    │   ├── QuotaExhausted                    provider quota / spend limit
    │   ├── CooldownActive                    provider.json says wait until <time>
    │   └── ProviderUnavailable               unreachable or failing twice in a row; breaker open
    ├── SourceUnavailable            exit 3   dev.to unreachable, 5xx, its edge's 403, its own 429
    ├── BudgetReached                exit 3   WATCHER_MONTHLY_TOKENS: the month's tokens are spent
    ├── LockBusy                     exit 4   another run holds a lock past the wait
    ├── Interrupted                  exit 130 / 143   Ctrl-C (SIGINT) or SIGTERM during a batch
    │   └── Cancelled                         the MCP client cancelled the tool call (SPEC §15.4)
    └── StateError                   exit 5   state on disk cannot be trusted or written
        ├── CorruptState                      file moved to quarantine/ (never deleted)
        ├── NewerSchema                       file written by a newer watcher; left untouched
        ├── SaveFailed                        a state or lock file cannot be saved (read-only, full)
        ├── UnsafePath                        a state path is a directory or unreachable; left as is
        ├── SaveConflict                      the reserved attempt is no longer the file's last one
        └── LogReplaced                       observations.jsonl replaced or truncated

A class exits with its branch's code, and a branch holds only what its name says: a mistake in
what was typed (usage), a setting watcher itself finds unusable (config), a setup only the
provider could refuse (provider setup), the provider or dev.to saying "not now" (exit 3, one
branch each, so that catching a provider stop never catches a dev.to outage).

:data:`EXIT_CODES` says each code's meaning in a few words; :func:`exit_code_legend` renders it
for help texts.

Per-item provider failures (malformed JSON, overload, …) are not exceptions here: they are
classified outcomes recorded on the attempt (see ``watcher.providers``), and a run that meets
them still exits 0. Only the kinds that must stop a batch become a ``ProviderStop`` or
``ProviderSetup`` at the pipeline boundary.
"""

from __future__ import annotations

from pathlib import Path

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_WAIT = 3
EXIT_LOCK_BUSY = 4
EXIT_STATE = 5
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C
EXIT_TERMINATED = 143  # 128 + SIGTERM

# SPEC §9, in its words. The one table the CLI help, the MCP instructions and the README's
# legend are generated from or checked against (tests/test_errors.py).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "ran, item errors in the summary",
    EXIT_INTERNAL: "internal error",
    EXIT_USAGE: "usage or configuration error: fix it (bad option, key, model, request)",
    EXIT_WAIT: "stopped by the provider or dev.to: wait (unreachable, 429, quota, cooldown)",
    EXIT_LOCK_BUSY: "pipeline lock busy",
    EXIT_STATE: "state error",
    EXIT_INTERRUPTED: "interrupted by Ctrl-C (SIGINT); the summary shows what was done",
    EXIT_TERMINATED: "stopped by SIGTERM; the summary shows what was done",
}


def exit_code_legend(sep: str = " · ") -> str:
    """Every exit code with its meaning, in order: ``0 ran, item errors in the summary · 1 …``."""
    return sep.join(f"{code} {meaning}" for code, meaning in sorted(EXIT_CODES.items()))


class WatcherError(Exception):
    """Base of every deliberate watcher error. ``kind`` is a stable machine-readable name."""

    exit_code = EXIT_INTERNAL
    kind = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(WatcherError):
    """What was typed cannot be done: a bad option or argument, an id that names no comment."""

    exit_code = EXIT_USAGE
    kind = "usage"


class SubmitRefused(UsageError):
    """``submit`` for an attempt that is not the open one an agent claimed (SPEC §14): a duplicate,
    a late one (closed as interrupted after its lease), an older attempt, or a reservation made by
    a model call. Nothing was written: the compare of the outcome's compare-and-swap failed."""

    kind = "submit_refused"


class ConfigError(WatcherError):
    """A setting watcher itself finds unusable before any call (SPEC §3): a bad config file or
    value, a missing API key or source, a dev.to user that does not exist."""

    exit_code = EXIT_USAGE
    kind = "config"


class ProviderSetup(WatcherError):
    """The provider refused what every request of this setup sends (key, model, request shape):
    another comment would be refused the same way, so the user must fix the setup (SPEC §13.1)."""

    exit_code = EXIT_USAGE
    kind = "provider_setup"

    def __init__(self, message: str, *, cause: str = "") -> None:
        super().__init__(message)
        # What the provider refused (auth, model_not_found, bad_request): a different cause is a
        # different problem to report, however the message is worded (SPEC §15.3,
        # watcher.commands.cron).
        self.cause = cause


class ProviderStop(WatcherError):
    """The provider cannot answer now (SPEC §6 table, §7.2): the batch stops; waiting fixes it."""

    exit_code = EXIT_WAIT
    kind = "provider_stop"


class RateLimited(ProviderStop):
    kind = "rate_limited"


class QuotaExhausted(ProviderStop):
    kind = "quota_exhausted"


class CooldownActive(ProviderStop):
    kind = "cooldown"

    def __init__(self, until: str, reason: str) -> None:
        super().__init__(f"provider cooldown until {until} ({reason}); no model calls before then")
        self.until = until
        self.reason = reason


class ProviderUnavailable(ProviderStop):
    """No usable answer from the provider for now (unreachable, or failing twice in a row): the
    breaker is open and the next run probes it for free before spending an attempt."""

    kind = "provider_unavailable"


class SourceUnavailable(WatcherError):
    """dev.to cannot answer now (SPEC §5, §13.3): unreachable, a 5xx, its edge's 403, or a 429
    past the wait budget. The scan keeps what it fetched before; waiting fixes it."""

    exit_code = EXIT_WAIT
    kind = "source_unavailable"


class BudgetReached(WatcherError):
    """The next call's worst case does not fit in what is left of the month's
    ``WATCHER_MONTHLY_TOKENS`` (SPEC §16.4): the batch stops, nothing reserved; the next month, or
    a larger budget, fixes it. Neither the provider's stop nor dev.to's: a branch of its own."""

    exit_code = EXIT_WAIT
    kind = "token_budget"

    def __init__(self, used: int, budget: int, month: str, next_month: str) -> None:
        super().__init__(
            f"monthly token budget reached ({used} of {budget}) — raise WATCHER_MONTHLY_TOKENS "
            f"or wait for {next_month}"
        )
        self.used, self.budget, self.month = used, budget, month


class LockBusy(WatcherError):
    exit_code = EXIT_LOCK_BUSY
    kind = "lock_busy"

    def __init__(self, path: Path, waited_s: float, *, what: str = "another watcher run") -> None:
        super().__init__(f"{_lock_name(path)} busy: {what} holds {path} (waited {waited_s:.1f} s)")
        self.path = path
        self.waited_s = waited_s


def _lock_name(path: Path) -> str:
    return f"{path.stem} lock"


class StateError(WatcherError):
    exit_code = EXIT_STATE
    kind = "state"


class CorruptState(StateError):
    kind = "corrupt_state"

    def __init__(self, path: Path, moved_to: Path | None, reason: str) -> None:
        # The reason says why a file was not moved (unreadable, could not be moved, kept changing).
        where = f"moved to {moved_to}" if moved_to else "left in place"
        super().__init__(
            f"corrupt state file {path}: {reason}; {where}. The command did not overwrite it — "
            "inspect it, then re-run (a missing index is rebuilt from inbox/)"
        )
        self.path = path
        self.moved_to = moved_to


class NewerSchema(StateError):
    """A state file in a format newer than this release reads (SPEC §15.5): refused, never
    quarantined or rewritten, so running an older release beside a newer one loses nothing."""

    kind = "newer_schema"

    def __init__(self, path: Path, found: int, known: int) -> None:
        super().__init__(
            f"{path} was written by a newer devto-watcher (schema_version {found}; this one reads "
            f"up to {known}): upgrade devto-watcher (and restart a long-running "
            "`watcher-bridge mcp`); the file was left untouched"
        )
        self.path = path


class SaveFailed(StateError):
    """A durable write or a lock file failed: a read-only mount, permissions, a full disk."""

    kind = "save_failed"

    def __init__(self, path: Path, cause: BaseException) -> None:
        # strerror, not str(exc): "[Errno 13] Permission denied: '/…/pipeline.lock'" repeats the
        # path and reads like a traceback; the user needs the path once and the reason.
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        hint = " — check the data dir's permissions and mount" if _is_read_only(cause) else ""
        super().__init__(f"cannot write {path}: {reason}{hint}")
        self.path = path


def _is_read_only(cause: BaseException) -> bool:
    import errno

    return isinstance(cause, OSError) and cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS)


class UnsafePath(StateError):
    """A state path that watcher must not read, move or write through (SPEC §13.5): a directory
    with files in it, or a name whose directories loop. It is left exactly where it is."""

    kind = "unsafe_path"

    def __init__(self, path: Path, what: str, *, fix: str = "move it out of the data dir") -> None:
        super().__init__(
            f"{path} is {what}: watcher never follows, moves or writes through it and left "
            f"it in place — {fix}, then re-run"
        )
        self.path = path


class SaveConflict(StateError):
    """Compare-and-swap of an outcome failed (SPEC §13.5): the attempt this run reserved is no
    longer the file's last one, so someone wrote it without the pipeline lock."""

    kind = "save_conflict"


class Interrupted(WatcherError):
    """The person stopped a batch (SPEC §13.6): the in-flight attempt is recorded as interrupted.
    Stopped while waiting for a lock (SPEC §16.6), it is ``LockWaitInterrupted``
    (watcher/store/locks.py), a :class:`LockBusy` too: the lock was not taken."""

    exit_code = EXIT_INTERRUPTED
    kind = "interrupted"

    def __init__(self, signum: int) -> None:
        import signal

        name = signal.Signals(signum).name
        super().__init__(
            f"stopped by {name}: the attempt in flight is recorded as interrupted and stays "
            "counted; the summary shows what was done"
        )
        self.exit_code = EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED


class Cancelled(Interrupted):
    """The MCP client cancelled a running ``scan``/``recheck`` (SPEC §15.4): no further call was
    started; the calls already out finished and were saved."""

    kind = "cancelled"

    def __init__(self) -> None:
        import signal

        super().__init__(signal.SIGINT)
        self.message = (
            "cancelled by the client: no further model call was started; the calls already in "
            "flight finished and were saved, the rest are not_started"
        )
        self.args = (self.message,)


class LogReplaced(StateError):
    kind = "log_replaced"


def exit_code_for(exc: BaseException) -> int:
    """The process exit code for ``exc``; anything not ours is an internal error (1)."""
    if isinstance(exc, WatcherError):
        return exc.exit_code
    return EXIT_INTERNAL


def error_kind(exc: BaseException) -> str:
    """Stable name for the JSON envelope's ``error.kind``."""
    if isinstance(exc, WatcherError):
        return exc.kind
    return "internal"
