"""Model calls in flight, outside the pipeline lock (SPEC §15.1).

The locked part reserves an attempt durably, hands the call here and lets go of the lock; a
worker thread makes the one request, and the answer comes back to the batch's own thread, which
takes the lock again to write the outcome. Every decision and every state write stays on that
one thread: workers only call the provider.

Each worker has a provider of its own (:meth:`watcher.pipeline.batch.Batch.new_provider`): one
client, one kept-alive connection, so one call's deadline cuts only that call's socket, never a
sibling's (``watcher/providers/_wire.py``). Workers are daemon threads started once per batch —
a thread start per call is a measurable share of a loopback call (bench/run.py, per call) — and a
worker still waiting on a server when the process ends does not hold the exit up: its attempt is
already closed as interrupted (SPEC §13.6) by then.

One call at a time with nobody to abort it from outside (the CLI, ``--parallel 1``): the call is
made on the batch's own thread instead, with its own provider. A hand-over to a worker and back
cost ~0.6 ms a call of CPU, a third of an instant call's whole cost (bench/run.py, an instant
in-process provider on tmpfs: 2.0 ms/call); a signal then ends the call itself
(:class:`SignalDuringCall` from :meth:`watcher.pipeline.batch.Batch.on_signal`), as it ends a
worker's wait. A parallel batch makes every call on a worker, its slow start's lone ones too.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from watcher.models import AttemptError, InboxRecord, Prompt
from watcher.pipeline.batch import SignalDuringCall
from watcher.providers.base import CallResult, Provider
from watcher.store import CallLock, Reservation
from watcher.util.threads import start_daemon

# How often the waiting thread wakes to let a signal handler run (SIGINT, SIGTERM).
_POLL_S = 0.1


@dataclass(eq=False)
class Flight:
    """One reserved attempt whose call is out: what the outcome write needs when it returns."""

    reservation: Reservation
    call_lock: CallLock
    half_open: bool = False
    answer: CallResult | None = field(default=None, repr=False)
    # The batch's failures when it was sent: its success re-opens parallel calls only if none
    # came after (slow start, SPEC §16.6).
    after_failures: int = 0

    @property
    def record(self) -> InboxRecord:
        return self.reservation.record

    @property
    def comment_id(self) -> str:
        return self.reservation.record.comment.id


class Calls:
    """Up to ``capacity`` calls in flight at once, on as many worker threads."""

    def __init__(
        self,
        capacity: int,
        new_provider: Callable[[], Provider],
        *,
        inline: Callable[[], Provider] | None = None,
        calling: Callable[[], AbstractContextManager[None]] | None = None,
    ) -> None:
        """``inline``: the provider for a call made on this thread when one call at a time is
        allowed (``None``: always on workers); ``calling`` wraps that call (a signal ends it)."""
        self.capacity = capacity
        self._new_provider = new_provider
        self._inline = inline
        self._calling = calling
        self._todo: queue.SimpleQueue[Flight | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[Flight] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._out: list[Flight] = []

    @property
    def in_flight(self) -> list[Flight]:
        """The calls started and not yet collected, oldest first."""
        return list(self._out)

    def start(self, flight: Flight) -> None:
        """Send the call of ``flight`` (its reservation is already durable)."""
        if len(self._out) >= self.capacity:
            raise RuntimeError("no free worker: collect a finished call first")
        if self._inline is not None and self.capacity == 1:
            # In flight while it runs: a signal during it closes it as interrupted, as any call out.
            self._out.append(flight)
            with self._calling() if self._calling is not None else nullcontext():
                flight.answer = _complete(self._inline(), flight.record.prompt)
            self._done.put(flight)
            return
        if len(self._workers) < min(self.capacity, len(self._out) + 1):
            worker = start_daemon(
                self._work,
                args=(self._new_provider(),),
                name=f"watcher-call-{len(self._workers) + 1}",
            )
            self._workers.append(worker)
        self._out.append(flight)
        self._todo.put(flight)

    def next_done(self, aborted: Callable[[], int | None] | None = None) -> Flight:
        """Wait for the next call to finish (in the order they finish) and hand it back.

        ``aborted`` is asked at every wake: a signal number ends the wait
        (:class:`SignalDuringCall`), as a signal handler would on the main thread."""
        if not self._out:
            raise RuntimeError("no call in flight")
        while True:
            try:
                flight = self._done.get(timeout=_POLL_S)
            except queue.Empty:
                # A signal handler ran, or will: it may raise out of this wait. Off the main
                # thread the front end says so through ``aborted``.
                if aborted is not None and (signum := aborted()) is not None:
                    raise SignalDuringCall(signum) from None
                continue
            self._out.remove(flight)
            return flight

    def forget(self, flight: Flight) -> None:
        """Stop waiting for ``flight`` (its attempt was closed without the answer)."""
        if flight in self._out:
            self._out.remove(flight)

    def close(self) -> None:
        """Let the workers end once their current call returns."""
        for _ in self._workers:
            self._todo.put(None)

    def _work(self, provider: Provider) -> None:
        try:
            while (flight := self._todo.get()) is not None:
                flight.answer = _complete(provider, flight.record.prompt)
                self._done.put(flight)
        finally:
            provider.close()


def _complete(provider: Provider, prompt: Prompt) -> CallResult:
    """The provider's one call. It never raises by contract; should it, the attempt still ends
    with a classified error instead of a thread dying with its reservation open."""
    try:
        return provider.complete(prompt)
    except Exception as exc:  # noqa: BLE001 - the worker's boundary: anything becomes the attempt's error
        return CallResult(
            error=AttemptError(
                kind="network",
                message=f"the call failed inside watcher: {type(exc).__name__}: {exc}",
            )
        )
