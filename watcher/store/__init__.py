"""The state seam: everything a command does to a data directory's state goes through a
:class:`Store`.

The pipeline, claim and submit, grant, mark and the read views ask a store to take the pipeline
lock, read and write one comment's record, reserve an attempt and write its outcome (the
compare-and-swap of SPEC §13.5), read and merge the index, read and write the provider state,
and append and count observation signals. They never see a file.

:class:`watcher.store.files.FileStore` is the one implementation, over the files of SPEC §4:
durable writes (:mod:`watcher.store.durable`) and guarded reads (:mod:`watcher.store.guarded`)
through one set of OS calls (:mod:`watcher.store.oscalls`), the cooperative locks
(:mod:`watcher.store.locks`), the signal log (:mod:`watcher.store.signal_log`) and its counter
(:mod:`watcher.store.signals`). It is the only code in
``watcher/`` that opens, writes, renames or syncs a state file (``tests/test_store_seam.py``
checks that).

Tests and the fault rig hand the pipeline another store through ``Hooks.make_store``: a wrapper
that fails or kills at a step boundary wraps a :class:`FileStore` instead of rebinding module
attributes (STYLE rule 14).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from watcher.models import (
    CronState,
    InboxRecord,
    ProviderState,
    SeenComment,
    SeenFile,
    SignalState,
    Triage,
)

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

    from watcher.config import Paths
    from watcher.state.tokens import TokenTally
    from watcher.store.locks import CallLockState
    from watcher.store.signals import CountResult

__all__ = ["CallLock", "Reservation", "Store"]


class CallLock(Protocol):
    """A comment's call lock, held by this run (SPEC §15.1): the mark of a call in flight."""

    def release(self) -> None:
        """Let go once the attempt's outcome is durable (or its call will never be made)."""

    def stamp(self, token: str) -> None:
        """Mark the lock as the one the reservation named by ``token`` is made under, before that
        reservation is written (:meth:`Store.call_lock_state` then trusts it). Never fails."""


@dataclass(frozen=True)
class Reservation:
    """An attempt this run reserved, as written: the record, and the store's token for that
    version (what the outcome's compare-and-swap compares against; ``None``: compare by reading)."""

    record: InboxRecord
    token: str | None


class Store(Protocol):
    """What commands do to state. Every method raises :class:`watcher.errors.StateError`
    subclasses for state that cannot be read or written (exit 5), :class:`LockBusy` (exit 4)
    for a lock held past its wait."""

    @property
    def paths(self) -> Paths:
        """Where things are, for messages and ``status`` only: no caller opens these."""

    def exists(self) -> bool:
        """Whether the data directory exists at all (a read view on a missing one says so)."""

    def state_entries(self) -> list[Path]:
        """The files and directories of SPEC §4 present in the data directory, lock files aside
        (what moving a data dir moves); empty where it holds no watcher state."""

    def holds_state(self) -> bool:
        """Whether the data directory holds an index or an inbox (someone's comments and marks)."""

    def writable(self) -> tuple[Path, OSError | None]:
        """The data directory, or its nearest existing parent, and why nothing can be created there
        (``None``: it can) — ``watcher check``'s free test, which writes no state."""

    # ---- the pipeline lock (SPEC §7 step 2) ------------------------------------------------------

    def pipeline_lock(self, *, timeout: float | None = None) -> AbstractContextManager[None]:
        """Exclusive for decisions and writes, never held across a model call (SPEC §15.1). All
        the waits of one store (one command) share one 5 s budget (SPEC §16.3); ``timeout`` only
        shortens a wait. Leftovers of writers killed mid-write are cleared on entry."""

    def end_waits_on(self, stopped: Callable[[], int | None]) -> None:
        """From now on, a lock wait of this store ends as soon as ``stopped()`` names a signal, and
        a busy lock is not waited for at all (SPEC §16.6): :class:`LockBusy` that is also an
        :class:`watcher.errors.Interrupted` (exit 130 / 143)."""

    def call_lock(self, comment_id: str) -> CallLock | None:
        """The comment's call lock, taken without waiting before its reservation and released once
        the outcome is durable (SPEC §15.1); ``None`` when a call for it is in flight elsewhere."""

    def make_call_locks(self, comment_ids: Iterable[str]) -> None:
        """Create these comments' call-lock files ahead of taking them, all at once (a speed-up
        only: nothing is locked, and a failure is left for :meth:`call_lock` to report)."""

    def call_in_flight(self, comment_id: str) -> bool:
        """Whether another run holds the comment's call lock now: its open reservation is a live
        call, not an orphan (the kernel drops the lock of a process that died)."""

    def call_lock_state(self, comment_id: str, token: str) -> CallLockState:
        """What the comment's call lock says of its open reservation named by ``token``
        (:func:`watcher.store.locks.call_lock_state`): ``held`` (in flight), ``free`` (the lock it
        was made under, released: its process died) or ``not_its`` (removed or replaced since:
        the lock cannot tell)."""

    def process_gone(self, pid: int, since: datetime) -> bool:
        """Whether the process ``pid`` that wrote a reservation at ``since`` has certainly ended
        (no such pid, or one that started later): :func:`watcher.store.pids.gone`."""

    # ---- one comment's record (SPEC §4.1) --------------------------------------------------------

    def load_record(self, comment_id: str) -> InboxRecord | None:
        """The record, ``None`` if there is none; a corrupt one is quarantined (CorruptState)."""

    def has_record(self, comment_id: str) -> bool:
        """Whether a record exists under that id (a cheap check; no read)."""

    def record_ids(self) -> list[str]:
        """Every comment id with a record, sorted."""

    def save_record(self, record: InboxRecord) -> None:
        """Durably replace the record (create one, close an orphan, add a grant)."""

    def write_reservation(self, record: InboxRecord) -> Reservation:
        """Durably write ``record``, whose last attempt is the one just reserved (before the
        call)."""

    def write_outcome(
        self, reservation: Reservation, finish: Callable[[InboxRecord], InboxRecord]
    ) -> InboxRecord:
        """Write ``finish(current)`` if the reserved attempt is still the record's open last
        attempt, else write nothing and raise :class:`SaveConflict` (SPEC §13.5)."""

    def history_lost(self, comment_id: str, entry: SeenComment | None) -> bool:
        """Whether a comment with no record had one (its index entry counts attempts, or a copy
        was quarantined): a fresh record would restart its budget, so none is made."""

    # ---- the index (SPEC §4.2) -------------------------------------------------------------------

    def load_index(self) -> SeenFile:
        """The index as stored; an empty one before the first save."""

    def reconcile_index(
        self, index: SeenFile, ids: Iterable[str] | None = None
    ) -> tuple[SeenFile, list[str]]:
        """``index`` brought up to the records (all, or ``ids``), and the ids added or repaired."""

    def save_index(
        self, base: SeenFile, mine: SeenFile, patches: Mapping[str, Triage] | None = None
    ) -> SeenFile:
        """The three-way merge-on-save of :func:`watcher.state.seen.merge`; returns what was
        saved."""

    def patch_triage(self, comment_id: str, triage: Triage) -> SeenComment | None:
        """A person's mark, applied as given (``None``: no such comment)."""

    def patch_triages(
        self,
        comment_ids: Iterable[str],
        triage: Triage,
        *,
        at: str | None = None,
    ) -> dict[str, SeenComment] | None:
        """The same mark for several comments in one save, made at ``at`` (now); ``None`` (nothing
        written) if any is unknown."""

    def claim_listed(self, ids: Iterable[str]) -> list[str]:
        """Mark ``ids`` listed by ``inbox --new``; return those no earlier listing had."""

    def note_author_replies(
        self, replies: Mapping[str, str], latest: Mapping[str, str] | None = None
    ) -> list[str]:
        """Mark the comments the author answered on dev.to replied; return those newly marked."""

    # ---- the provider state (SPEC §7.2, §13.1) ---------------------------------------------------

    def load_provider_state(self) -> ProviderState:
        """Cooldown and breaker as stored; an empty state before the first write."""

    def save_provider_state(self, state: ProviderState) -> None:
        """Durably replace the provider state (callers hold the pipeline lock, or take it)."""

    # ---- the month's token tally (SPEC §16.4) ----------------------------------------------------

    def load_token_tally(self) -> TokenTally | None:
        """tokens.json; ``None`` where there is none (the pipeline builds it from the attempts)."""

    def save_token_tally(self, tally: TokenTally) -> None:
        """Durably replace it (callers hold the pipeline lock)."""

    def forget_token_tally(self) -> None:
        """Remove tokens.json, durably, if there is one: a run without a budget does not keep it,
        so a run with one counts it again from the attempts (watcher/pipeline/budget.py)."""

    # ---- what cron has said (SPEC §15.3) ---------------------------------------------------------

    def load_cron_state(self) -> CronState:
        """What ``watcher cron`` last reported; an empty state before its first round."""

    def save_cron_state(self, state: CronState) -> None:
        """Durably replace it (one cron round at a time: a lost race repeats a line, never hides
        one)."""

    # ---- observation signals (SPEC §8) -----------------------------------------------------------

    def append_signals(self, events: Iterable[Mapping[str, object]]) -> None:
        """Append one line per event, whole lines, never interleaved with another writer's."""

    def count_signals(self, *, reset: bool = False) -> CountResult:
        """Count every line not counted yet, exactly once (``reset``: recount from zero)."""

    def read_signal_state(self) -> SignalState | None:
        """The saved counts, ``None`` before the first count."""

    def signal_trouble(self, state: SignalState | None = None) -> str | None:
        """Why the counter would stop (log replaced, truncated, removed), else ``None``; never
        raises."""
