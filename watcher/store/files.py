"""The store over the files of SPEC §4: one inbox file per comment, seen.json, provider.json,
the observation log and its counter, and the lock files.

Every write goes through :meth:`FileStore._write` (the one durable write: temp file, fsync,
rename, fsync of the directory) and every append through :meth:`FileStore._append`, so a
store that fails or kills at a write (the fault rig's) overrides one method and meets every
write there is.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from watcher import models
from watcher.config import Paths
from watcher.errors import SaveConflict
from watcher.models import (
    CronState,
    InboxRecord,
    ProviderState,
    SeenComment,
    SeenFile,
    SignalState,
    Triage,
)
from watcher.state import records, seen
from watcher.state.tokens import TokenTally
from watcher.store import CallLock, Reservation, _index, durable, locks, pids, signals
from watcher.store.dirs import real_directories
from watcher.store.durable import M
from watcher.store.oscalls import OS, OsCalls
from watcher.store.remembered import Remembered
from watcher.util.timeutil import iso

# What a hold of the pipeline lock reads, writes or makes (watcher/state/records.py and
# watcher/pipeline/provider_state.py build the nested ones directly). Built before the first hold:
# tests/test_lock_holds.py runs every command that takes the lock and fails on a build under it.
LOCKED_MODELS: tuple[type[BaseModel], ...] = (
    models.InboxRecord,
    models.Attempt,
    models.AttemptError,
    models.Grant,
    models.Edit,
    models.Gone,
    models.Reply,
    models.Verdict,
    models.Usage,
    models.SeenFile,
    models.SeenComment,
    models.SeenArticle,
    models.ProviderState,
    models.Breaker,
    models.TransientFailure,
    TokenTally,
)


class FileStore:
    """:class:`watcher.store.Store` over one data directory's files."""

    def __init__(
        self,
        paths: Paths,
        *,
        lock_wait: float = locks.PIPELINE_WAIT_S,
        calls: OsCalls | None = None,
    ) -> None:
        """``lock_wait``: what this command may wait for the pipeline lock in all (SPEC §16.3);
        ``calls``: the OS calls of its writes, reads and appends (:mod:`watcher.store.oscalls`;
        tests fail or watch one of them there)."""
        self._paths = paths
        self._calls = calls
        # Records whose file holds exactly them, each with that file's stamp: the read's own
        # fstat, or an lstat right after this store wrote it. Every durable write makes a new
        # inode, so a file that still has that stamp holds that record: a run reads each record
        # when it plans, again under the lock before deciding, and the gate, the outcome's
        # compare-and-swap and the index save look at them too, and one lstat stands for each
        # re-read. The same trust the index puts in its stamps (SPEC §4.2),
        # for one command. A record whose text was mended to be written (a lone surrogate is
        # stored as U+FFFD) is not one: what a later step reads must be what the file holds
        # (tests/reliability/test_rel_regressions.py).
        # The newest only (watcher/store/remembered.py).
        self._known = Remembered()
        self._waits = locks.Waits(lock_wait)
        # provider.json likewise: (its stamp, None when there is no file; the state it holds).
        self._provider_known: tuple[str | None, ProviderState] | None = None
        self._swept = False
        self._built = False

    @property
    def paths(self) -> Paths:
        return self._paths

    def exists(self) -> bool:
        return self._paths.root.exists()

    def state_entries(self) -> list[Path]:
        p = self._paths
        names = [p.inbox, p.seen, p.provider_state, p.cron_state, p.tokens, p.observations]
        names += [p.signals_dir, p.quarantine, p.config_file]
        return [path for path in names if os.path.lexists(path)]

    def holds_state(self) -> bool:
        return os.path.lexists(self._paths.inbox) or os.path.lexists(self._paths.seen)

    def writable(self) -> tuple[Path, OSError | None]:
        existing = self._paths.root
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        try:
            fd, name = tempfile.mkstemp(dir=existing, prefix=".watcher-check-")
            os.close(fd)
            os.unlink(name)
        except OSError as exc:
            return existing, exc
        return existing, None

    # ---- the one read, the one write and the one append ------------------------------------------

    def _read(
        self,
        path: Path,
        model: type[M],
        *,
        check: Callable[[M], str | None] | None = None,
        on_read: Callable[[os.stat_result], None] | None = None,
    ) -> M | None:
        """A record, provider.json or cron.json as :func:`durable.read_model` reads it: a corrupt
        one is quarantined (a wrapper that counts reads overrides this one method)."""
        paths = self._paths
        return durable.read_model(
            path,
            model,
            quarantine_dir=paths.quarantine,
            check=check,
            within=paths.user_part,
            on_read=on_read,
            calls=self._calls or OS,
        )

    def _write(self, path: Path, model: BaseModel) -> bool:
        return durable.write_model(path, model, within=self._paths.user_part, calls=self._calls)

    def _append(self, path: Path, payload: bytes) -> None:
        signals.append_bytes(path, payload, self._calls or OS)

    # ---- the pipeline lock -----------------------------------------------------------------------

    def pipeline_lock(self, *, timeout: float | None = None) -> AbstractContextManager[None]:
        """Held by scan/recheck for each decision and write, never across a model call (SPEC §15.1).

        Every wait draws from the command's one budget (SPEC §16.3): ``timeout`` only shortens a
        wait, never lengthens it past what is left."""
        if not self._built:
            models.build(*LOCKED_MODELS)  # before the lock, where no other run waits for it
            self._built = True
        held = self._waits.pipeline(
            self._paths.pipeline_lock_file, timeout=timeout, within=self._paths.user_part
        )
        return held if self._swept else self._sweeping(held)

    def end_waits_on(self, stopped: Callable[[], int | None]) -> None:
        self._waits.stopped = stopped

    @contextmanager
    def _sweeping(self, held: AbstractContextManager[None]) -> Iterator[None]:
        with held:
            if not self._swept:
                # Left by writers killed mid-write. Once per store (one command): a run takes the
                # lock once per comment and answer (SPEC §15.1), and listing inbox/ each time would
                # make every hold grow with the number of comments.
                paths = self._paths
                for directory in (paths.inbox, paths.root, paths.signals_dir):
                    durable.sweep_stale_temps(directory, within=paths.user_part)
                self._swept = True
            yield

    def call_lock(self, comment_id: str) -> CallLock | None:
        return locks.try_call_lock(
            self._paths.call_lock_file(comment_id), within=self._paths.user_part
        )

    def make_call_locks(self, comment_ids: Iterable[str]) -> None:
        locks.make_call_locks(
            [self._paths.call_lock_file(cid) for cid in comment_ids], within=self._paths.user_part
        )

    def call_in_flight(self, comment_id: str) -> bool:
        return locks.held_elsewhere(
            self._paths.call_lock_file(comment_id), within=self._paths.user_part
        )

    def call_lock_state(self, comment_id: str, token: str) -> locks.CallLockState:
        return locks.call_lock_state(
            self._paths.call_lock_file(comment_id), token, within=self._paths.user_part
        )

    def process_gone(self, pid: int, since: datetime) -> bool:
        return pids.gone(pid, since)

    # ---- records ---------------------------------------------------------------------------------

    def load_record(self, comment_id: str) -> InboxRecord | None:
        """A file whose ``comment.id`` is not its name is corrupt too (SPEC §13.5): a restore
        under the wrong name, or a hard link, would make two names share one budget's
        bookkeeping, the saves of one landing on the other."""

        def named_right(record: InboxRecord) -> str | None:
            if record.comment.id == comment_id:
                return None
            return (
                f"it holds comment {record.comment.id!r}, not {comment_id!r} "
                "(restored under the wrong name?)"
            )

        path, within = self._paths.inbox_file(comment_id), self._paths.user_part
        known = self._known.get(comment_id)
        if known is not None:
            real_directories(path.parent, below=within)  # as the read would: no link planted since
            if _index.stamp(path) == known[0]:
                return known[1]

        read: list[os.stat_result] = []
        record = self._read(path, InboxRecord, check=named_right, on_read=read.append)
        if record is not None and read:
            self._known.keep(comment_id, (_index.stamp_of(read[0]), record))
        return record

    def has_record(self, comment_id: str) -> bool:
        return self._paths.inbox_file(comment_id).exists()

    def record_ids(self) -> list[str]:
        return _index.list_ids(self._paths)

    def save_record(self, record: InboxRecord) -> None:
        path = self._paths.inbox_file(record.comment.id)
        as_is = self._write(path, record)
        token = _index.stamp(path) if as_is else None
        if token is not None:
            self._known.keep(record.comment.id, (token, record))
        else:
            self._known.pop(record.comment.id, None)

    def write_reservation(self, record: InboxRecord) -> Reservation:
        self.save_record(record)
        own = self._known.get(record.comment.id)
        return Reservation(record, own[0] if own is not None and own[1] is record else None)

    def write_outcome(
        self, reservation: Reservation, finish: Callable[[InboxRecord], InboxRecord]
    ) -> InboxRecord:
        finished = finish(self._still_reserved(reservation))
        self.save_record(finished)
        return finished

    def _still_reserved(self, reservation: Reservation) -> InboxRecord:
        """The record as it is now, if the attempt this run reserved is still its open last attempt.

        Every durable write replaces the file with a new inode, so a file whose (inode, mtime,
        size) is still what this run wrote is this run's reservation: one lstat, not a read."""
        reserved = reservation.record
        cid = reserved.comment.id
        path = self._paths.inbox_file(cid)
        if reservation.token is not None and _index.stamp(path) == reservation.token:
            return reserved
        current = self.load_record(cid)
        mine = reserved.attempts[-1]
        if current is None or not records.still_reserved(current, mine):
            raise SaveConflict(
                f"{path}: attempt {mine.n}, reserved by this run, is no longer the file's open "
                "last attempt — another process wrote it without the pipeline lock (was "
                "locks/pipeline.lock deleted, or is inbox/ shared with another data dir?). Nothing "
                "was written; this call's answer is lost and its attempt stays counted"
            )
        return current

    def history_lost(self, comment_id: str, entry: SeenComment | None) -> bool:
        if entry is not None and (entry.attempts > 0 or entry.status != "pending"):
            return True
        return bool(
            durable.quarantined_names(
                self._paths.quarantine, f"inbox-{comment_id}.json", within=self._paths.user_part
            )
        )

    # ---- the index -------------------------------------------------------------------------------

    def load_index(self) -> SeenFile:
        return _index.load(self._paths)

    def reconcile_index(
        self, index: SeenFile, ids: Iterable[str] | None = None
    ) -> tuple[SeenFile, list[str]]:
        return _index.reconcile(
            self._paths, index, ids, load_record=self.load_record, written=self._known
        )

    def save_index(
        self, base: SeenFile, mine: SeenFile, patches: Mapping[str, Triage] | None = None
    ) -> SeenFile:
        if not patches and seen.untouched(base, mine) and self._paths.seen.exists():
            # merge(base, base, theirs) is theirs: nothing to write, so skip the lock and the
            # re-read (an idle scan of a large index would otherwise parse seen.json twice).
            return mine
        return self._update_index(lambda theirs: seen.merge(base, mine, theirs, patches))

    def _update_index(self, change: Callable[[SeenFile], SeenFile]) -> SeenFile:
        """Read the index under its lock, apply ``change``, write it if it changed (SPEC §4.2:
        held for one read-merge-write, never across a model call)."""
        paths = self._paths
        with self._waits.short(paths.seen_lock_file, within=paths.user_part):
            theirs = _index.load(paths)
            changed = change(theirs)
            if changed != theirs or not paths.seen.exists():
                self._write(paths.seen, changed)
            return changed

    def patch_triage(self, comment_id: str, triage: Triage) -> SeenComment | None:
        entries = self.patch_triages([comment_id], triage)
        return entries[comment_id] if entries is not None else None

    def patch_triages(
        self,
        comment_ids: Iterable[str],
        triage: Triage,
        *,
        at: str | None = None,
    ) -> dict[str, SeenComment] | None:
        ids = list(dict.fromkeys(comment_ids))
        base = self.load_index()
        mine, _ = self.reconcile_index(base, ids)
        if any(cid not in mine.comments for cid in ids):
            return None  # one unknown id: nothing is written (SPEC §15.2)
        patches: dict[str, Triage] = dict.fromkeys(ids, triage)
        saved = self._update_index(
            lambda theirs: seen.merge(base, mine, theirs, patches, marked_at=at)
        )
        return {cid: saved.comments[cid] for cid in ids}

    def claim_listed(self, ids: Iterable[str]) -> list[str]:
        wanted = list(ids)
        claimed: list[str] = []

        def change(theirs: SeenFile) -> SeenFile:
            index, found = seen.with_listed(theirs, wanted, now=iso())
            claimed[:] = found
            return index

        self._update_index(change)
        return claimed

    def note_author_replies(
        self, replies: Mapping[str, str], latest: Mapping[str, str] | None = None
    ) -> list[str]:
        if not replies:
            return []
        marked: list[str] = []

        def change(theirs: SeenFile) -> SeenFile:
            index, found = seen.with_author_replies(theirs, replies, latest)
            marked[:] = found
            return index

        self._update_index(change)
        return marked

    # ---- provider state --------------------------------------------------------------------------

    def load_provider_state(self) -> ProviderState:
        """Read after every answer (watcher/pipeline/gate.py ``after_answer``): a file that still
        has the stamp this store read or wrote it with is not read again, as a record is not."""
        paths = self._paths
        path = paths.provider_state
        token = _index.stamp(path)
        known = self._provider_known
        if known is not None and known[0] == token:
            return known[1]
        read: list[os.stat_result] = []
        state = self._read(path, ProviderState, on_read=read.append)
        if state is None:
            state = ProviderState()
            self._provider_known = (None, state) if token is None else None
        else:
            self._provider_known = (_index.stamp_of(read[0]), state) if read else None
        return state

    def save_provider_state(self, state: ProviderState) -> None:
        path = self._paths.provider_state
        as_is = self._write(path, state)
        token = _index.stamp(path) if as_is else None
        self._provider_known = (token, state) if token is not None else None

    # ---- the month's token tally -----------------------------------------------------------------

    def load_token_tally(self) -> TokenTally | None:
        return self._read(self._paths.tokens, TokenTally)

    def save_token_tally(self, tally: TokenTally) -> None:
        self._write(self._paths.tokens, tally)

    def forget_token_tally(self) -> None:
        if os.path.lexists(self._paths.tokens):
            durable.remove_file(
                self._paths.tokens, within=self._paths.user_part, calls=self._calls or OS
            )

    # ---- what cron has said ----------------------------------------------------------------------

    def load_cron_state(self) -> CronState:
        return self._read(self._paths.cron_state, CronState) or CronState()

    def save_cron_state(self, state: CronState) -> None:
        self._write(self._paths.cron_state, state)

    # ---- observation signals ---------------------------------------------------------------------

    def append_signals(self, events: Iterable[Mapping[str, object]]) -> None:
        signals.append(
            self._paths,
            events,
            writer=self._append,
            lock=lambda: self._waits.short(
                self._paths.signals_lock_file, within=self._paths.user_part
            ),
        )

    def count_signals(self, *, reset: bool = False) -> signals.CountResult:
        return signals.run_counter(
            self._paths,
            reset=reset,
            write=self._write,
            lock=lambda: self._waits.short(
                self._paths.signals_lock_file, within=self._paths.user_part
            ),
            calls=self._calls,
        )

    def read_signal_state(self) -> SignalState | None:
        return signals.read_state(self._paths)

    def signal_trouble(self, state: SignalState | None = None) -> str | None:
        return signals.log_trouble(self._paths, state)
