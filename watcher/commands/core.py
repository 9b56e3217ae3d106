"""Every command as one core function, and the one place errors become exit codes.

The CLI (``watcher``) and the bridge (``watcher-bridge``, its MCP server) call :func:`execute`
with the same functions; they differ only in how they render the :class:`Envelope`. Each
command returns its model from :mod:`watcher.commands.results` (or a :class:`Partial` of it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watcher import pipeline
from watcher.commands.envelope import Envelope
from watcher.config import NO_PROVIDER, Settings, load_settings
from watcher.errors import (
    EXIT_OK,
    ConfigError,
    CorruptState,
    Interrupted,
    LockBusy,
    UsageError,
    WatcherError,
    error_kind,
    exit_code_for,
)
from watcher.models import SeenFile, Triage
from watcher.pipeline import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Hooks,
    Partial,
    Run,
    new_run_id,
    open_store,
)
from watcher.store import Store

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "TRIAGE_CHOICES",
    "Context",
    "Envelope",
    "Partial",
    "execute",
]


TRIAGE_CHOICES: tuple[Triage, ...] = ("replied", "ignored", "open")


SAMPLE = "sample"  # --source sample: the bundled demo export


@dataclass(kw_only=True)
class Context:
    """How a front end runs commands: where settings come from, where notices go, and the
    pipeline's hooks (progress callbacks; a provider factory in tests)."""

    entrypoint: str = "cli"
    data_dir: Path | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    notice: Callable[[str], None] = lambda _msg: None
    # How the CLI asks the person a yes/no question (a grant's confirmation); None: nobody to ask.
    ask: Callable[[str], bool] | None = None
    hooks: Hooks = field(default_factory=Hooks)
    _settings: Settings | None = None
    _store: Store | None = None

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(data_dir=self.data_dir, overrides=self.overrides)
            from watcher.commands.unmigrated import refuse_unmigrated  # SPEC §16.3

            try:
                refuse_unmigrated(self._settings, self.store, self.hooks, self.notice)
            except WatcherError:
                self._settings = self._store = None  # refused on every access, not only the first
                raise
        return self._settings

    @property
    def store(self) -> Store:
        """The state of the settings' data dir (the hooks' store in tests)."""
        if self._store is None:
            self._store = open_store(self.settings.paths, self.hooks)
        return self._store


def execute(
    command: str, ctx: Context, fn: Callable[[Context], BaseModel | Partial[Any]]
) -> Envelope[Any]:
    """Run one command; never raises. ``fn`` returns a result, or a :class:`Partial` when it
    produced a result *and* must exit non-zero (a batch stopped by a 429 still has a summary)."""
    result: BaseModel | None = None
    error: BaseException | None = None
    try:
        out = fn(ctx)
        result, error = (out.result, out.error) if isinstance(out, Partial) else (out, None)
    except WatcherError as exc:
        error = exc
        signal_failure(ctx, exc)
    except KeyboardInterrupt:  # Ctrl-C outside a batch's calls (fetching, waiting for the lock)
        import signal

        error = Interrupted(signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - the one place an unexpected error becomes exit 1
        error = exc
    if error is None:
        return Envelope(True, command, EXIT_OK, result, None)
    message = (
        str(error)
        if isinstance(error, WatcherError)
        else f"internal error: {type(error).__name__}: {error}"
    )
    return Envelope(
        False,
        command,
        exit_code_for(error),
        result,
        {"kind": error_kind(error), "message": message},
    )


def signal_failure(ctx: Context, exc: WatcherError) -> None:
    """The observation a failed command leaves (``lock.busy``, ``state.quarantined``, SPEC §8)."""
    key = (
        "lock.busy"
        if isinstance(exc, LockBusy)
        else "state.quarantined"
        if isinstance(exc, CorruptState)
        else None
    )
    if key is None or ctx._settings is None:
        return
    # The failure being reported is louder than a lost observation, and this must never raise:
    # an OSError from a read-only lock would otherwise escape and print no envelope at all.
    with contextlib.suppress(Exception):
        ctx.store.append_signals([{"key": key, "run": new_run_id(), "entrypoint": ctx.entrypoint}])


def since_of(text: str | None) -> datetime | None:
    """``--since 2026-11-01`` (or a full ISO time): baseline comments created then or later are
    queued."""
    if text is None:
        return None
    from watcher.util.timeutil import parse_iso

    try:
        return parse_iso(text.strip())
    except ValueError:
        raise UsageError(
            f"--since takes a date like 2026-11-01 (or 2026-11-01T09:00:00Z), got {text!r}"
        ) from None


def check_parallel(parallel: int | None) -> None:
    if parallel is not None:
        from watcher.config import parse_parallel

        try:
            parse_parallel(parallel)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None


def batch_run(
    ctx: Context,
    command: pipeline.RunKind,
    *,
    limit: int,
    dry_run: bool,
    parallel: int | None = None,
) -> Run:
    """A run that may call the model: the provider choice and the key are checked first (the
    command checked its limit before reading any setting)."""
    settings = ctx.settings
    if settings.provider_defaulted:
        raise ConfigError(f"{NO_PROVIDER}; `watcher check` tests the setup")
    if not dry_run:
        settings.require_key()  # before any work; read-only commands never need a key
    return run_of(
        ctx, command, limit=limit, dry_run=dry_run, parallel=parallel or settings.parallel
    )


def run_of(
    ctx: Context,
    command: pipeline.RunKind,
    *,
    limit: int = DEFAULT_LIMIT,
    dry_run: bool = False,
    parallel: int = 1,
) -> Run:
    return Run(
        settings=ctx.settings,
        store=ctx.store,
        command=command,
        entrypoint=ctx.entrypoint,
        run_id=new_run_id(),
        limit=limit,
        parallel=parallel,
        dry_run=dry_run,
        hooks=ctx.hooks,
    )


def repaired_index(ctx: Context) -> SeenFile:
    """The reconciled index; a repair found here is saved (every command repairs it, SPEC §4.2)."""
    settings, store = ctx.settings, ctx.store
    if not store.exists():
        # `cd /tmp; watcher inbox` said "Nothing needs a reply." about a directory that is not
        # there.
        ctx.notice(
            f"note: data dir {settings.data_dir} does not exist (yet): nothing has been scanned "
            "there — "
            "check --data-dir / WATCHER_DATA_DIR, or run `watcher scan`"
        )
    base = store.load_index()
    index, changed = store.reconcile_index(base)
    if changed:
        index = store.save_index(base, index)
    return index
