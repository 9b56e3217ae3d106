"""One batch as one object: who runs it, what it found, and where its signals go.

A :class:`Batch` travels down every step of SPEC §7 instead of a run, a result and an emitter
threaded through each function. It also owns the one rule for "the run's error": the first
stop wins (:meth:`Batch.stop`), a lost observation only counts when nothing louder happened.
"""

from __future__ import annotations

import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING

from watcher.commands.results import BatchResult, BatchSignals, ItemResult, ItemVerdict, RunKind
from watcher.config import Paths, Settings
from watcher.errors import LockBusy, LogReplaced, StateError, WatcherError
from watcher.models import ProviderState, build
from watcher.store import Store

if TYPE_CHECKING:
    from watcher.providers.base import Provider
    from watcher.source import Source

DEFAULT_LIMIT = 5
MAX_LIMIT = 20


@dataclass(frozen=True, kw_only=True)
class Hooks:
    """What a front end or a test hands the pipeline: progress callbacks and the three seams'
    factories (STYLE rules 12 and 14).

    ``make_provider``, ``make_store`` and ``make_source`` are the test mode by injection: a test
    passes a provider over an ``httpx.MockTransport``, a store that fails or kills at a write
    (the fault rig's), or a source over a fake, and the whole of §7 — lock, reservation, save —
    runs for real around it. ``None`` is the real one. A caller hands them to the CLI or the
    bridge as :func:`watcher.cli.app.main`'s ``hooks``; every command of that run gets them.
    """

    on_planned: Callable[[int], None] | None = None
    on_call: Callable[[str], None] | None = None  # a comment's model call is about to go out
    on_item: Callable[[ItemResult], None] | None = None
    make_provider: Callable[[Settings], Provider] | None = None
    make_store: Callable[[Paths], Store] | None = None
    make_source: Callable[[str], Source] | None = None
    # A front end that is not the main thread (the MCP server runs batches in worker threads):
    # ``cancelled`` — the client cancelled the call: start no further call, let the calls out finish
    # and be saved; ``aborted`` — the process is going (SIGINT, SIGTERM, stdin closed): the signal
    # number, and every call out is closed as interrupted at once (SPEC §15.4).
    cancelled: Callable[[], bool] | None = None
    aborted: Callable[[], int | None] | None = None
    # "Now" for leases (SPEC §14): when a claim's lease ends, whether one has ended (a batch's,
    # and status's count of claims), cooldowns, the breaker and the 10-minute rule. A test moves
    # the clock past a lease instead of sleeping 15 minutes.
    clock: Callable[[], datetime] | None = None


def open_store(paths: Paths, hooks: Hooks) -> Store:
    """The store a command works on: the hooks' (a test's), else the files of SPEC §4."""
    if hooks.make_store is not None:
        return hooks.make_store(paths)
    from watcher.store.files import FileStore

    return FileStore(paths)


def new_run_id() -> str:
    """A short id for one run: seconds since the epoch in hex, then 6 random hex digits."""
    return f"{int(time.time()):x}{secrets.token_hex(3)}"


@dataclass(frozen=True, kw_only=True)
class Run:
    """Who is running and how: the same for every item of one batch."""

    settings: Settings
    store: Store
    command: RunKind
    entrypoint: str  # "cli" | "bridge"
    run_id: str
    limit: int = DEFAULT_LIMIT
    parallel: int = 1  # model calls in flight at once (SPEC §15.1)
    dry_run: bool = False
    hooks: Hooks = field(default_factory=Hooks)


class SignalDuringCall(BaseException):
    """Raised out of the model call by SIGINT/SIGTERM; the pipeline records the attempt as
    interrupted. A BaseException, so that no ``except Exception`` between here and the socket
    swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def caught_signals(batch: Batch) -> Iterator[None]:
    """SIGINT and SIGTERM during a batch (SPEC §13.6): between steps they only ask the batch to
    stop after the current item — a durable write is never cut in half — and during a model call
    they end the call at once. Only the main thread can take signals (the MCP server runs batches
    in worker threads, where the server's own shutdown applies)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, batch.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # A signal ends a lock wait too (SPEC §16.6); a test's own Store may have no lock to wait for.
    end_waits_on = getattr(batch.store, "end_waits_on", None)
    if end_waits_on is not None:
        end_waits_on(lambda: batch.interrupted)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


class Batch:
    """One run of scan/recheck: its settings (:attr:`run`), its summary (:attr:`result`), its
    signals (:meth:`emit`) and its error (:meth:`stop`, :attr:`error`)."""

    def __init__(self, run: Run, *, notice: Callable[[str], None] = lambda _msg: None) -> None:
        self.run = run
        self.notice = notice
        self.result = BatchResult(
            run.command,
            dry_run=run.dry_run,
            limit=run.limit,
            provider=run.settings.provider,
            model=run.settings.model,
        )
        # A comment that gets no call has its item made under the pipeline lock (locked.no_call):
        # its model is built here, where no other run waits for it (watcher.models.build).
        build(ItemResult, ItemVerdict)
        self._error: WatcherError | None = None
        self._lost_signal: WatcherError | None = None
        self._provider: Provider | None = None
        # SPEC §13.6: the signal the person sent (SIGINT/SIGTERM), and whether a call is out.
        self.interrupted: int | None = None
        self._calling = False
        # The comments the person named (`recheck ID`): theirs to call now, whatever the
        # 10-minute rule or an outage would wait for (SPEC §16.3).
        self.named: frozenset[str] = frozenset()
        # Comments left uncalled because they spent an attempt in this outage (SPEC §16.6).
        self.left_for_outage = 0
        # The provider state an answer left that could not be written (a full disk during a 429):
        # no further call is made, and the run tries to write it once more before it ends.
        self.unsaved_state: ProviderState | None = None

    def provider(self) -> Provider:
        """The run's provider, built once on first use (httpx is imported only by runs that call
        or probe a model); the hooks' factory replaces the real one in tests."""
        if self._provider is None:
            self._provider = self.new_provider()
            self.result.provider, self.result.model = self._provider.name, self._provider.model
        return self._provider

    def new_provider(self) -> Provider:
        """A provider of its own, for one worker of parallel calls (its own client and socket)."""
        factory = self.run.hooks.make_provider
        if factory is None:
            from watcher.providers import make_provider

            factory = make_provider
        return factory(self.settings)

    @contextmanager
    def waiting_for_calls(self) -> Iterator[None]:
        """While calls are out, a signal ends the wait at once (:class:`SignalDuringCall`)."""
        self._calling = True
        try:
            yield
        finally:
            self._calling = False

    def on_signal(self, signum: int, _frame: object) -> None:
        self.interrupted = self.interrupted or signum
        if self._calling:
            self._calling = False
            raise SignalDuringCall(signum)

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()

    @property
    def settings(self) -> Settings:
        return self.run.settings

    @property
    def store(self) -> Store:
        return self.run.store

    @cached_property
    def calls_model(self) -> bool:
        """False for provider agent (SPEC §14): the agent claims and submits; watcher never calls.
        Asked about every comment of the batch; its settings never change during it."""
        from watcher.providers.registry import provider_spec

        return provider_spec(self.settings.provider).calls_model

    def now(self) -> datetime:
        """The time leases are reserved and judged by (the hooks' clock in tests)."""
        from watcher.util.timeutil import utcnow

        return (self.run.hooks.clock or utcnow)()

    @property
    def stopped(self) -> bool:
        return self.result.stopped is not None

    @property
    def error(self) -> WatcherError | None:
        """The error the run exits with: the first stop, else the first failure it met, else a
        lost observation (the outcomes are on disk, but the run must still not say "all well")."""
        return self._error or self._lost_signal

    def add(self, item: ItemResult) -> None:
        self.result.items.append(item)
        if self.run.hooks.on_item is not None:
            self.run.hooks.on_item(item)

    def stop(self, why: str, error: WatcherError, *, comment: str | None = None) -> None:
        """Stop the batch: no further item is acted on; ``why`` names the stop in the summary
        and in the ``batch.stopped.<why>`` signal; the first error is the one the run exits with."""
        if self.result.stopped is None:
            self.result.stopped = why
            self.emit(f"batch.stopped.{why}", comment=comment)
        self.fail(error)

    def fail(self, error: WatcherError) -> None:
        """Remember an error the run must exit with, without stopping the batch (a corrupt inbox
        file skips that comment only)."""
        self._error = self._error or error

    def emit(self, key: str, *, comment: str | None = None) -> None:
        """Append one observation signal. A signal that cannot be written must not stop the batch
        mid-item (the attempt's outcome is already on disk), but the run still ends loudly."""
        if self.run.dry_run:
            return  # a dry run writes nothing, not even an observation
        try:
            self.store.append_signals(
                [
                    {
                        "key": key,
                        "comment": comment,
                        "run": self.run.run_id,
                        "entrypoint": self.run.entrypoint,
                    }
                ]
            )
        except WatcherError as exc:
            self.notice(f"warning: observation {key} not recorded: {exc}")
            self._lost_signal = self._lost_signal or exc


def count_signals(batch: Batch) -> None:
    """SPEC §8 after the lock is released. A replaced log (or a busy signals lock) never fails the
    run (§13.5): it is a warning, so a `scan && recheck` cron goes on; `watcher signals` exits 5.
    A corrupt or unwritable counter file is a state error like any (§4), if nothing louder."""
    try:
        counted = batch.store.count_signals()
    except (LogReplaced, LockBusy) as exc:
        batch.notice(f"warning: observation signals not counted: {exc}")
        batch.result.signals = BatchSignals(warning=str(exc))
        return
    except StateError as exc:
        if batch.error is None:
            batch.fail(exc)
        return
    batch.result.signals = BatchSignals(new_lines=counted.new_lines, invalid=counted.invalid)
