"""The outbox's files (SPEC §16.1): ``outbox/<id>.json`` read, written and removed with §4's rules,
``locks/outbox.lock``, and ``locks/round.lock`` that keeps two ``watch`` rounds apart (§16.2).
What the files mean — when a message is made, sent, given up — is :mod:`watcher.notify`'s; this
is only where they are and how they are touched."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from watcher.notify.models import OutboxMessage
from watcher.paths import Paths
from watcher.store import durable, locks

# A round waits this long for another round's sends (a mail target times out after 15 s).
OUTBOX_WAIT_S = 60.0


class OutboxFiles:
    """The messages of one data dir. Change them only with :meth:`locked` held."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @contextmanager
    def locked(self, *, timeout: float = OUTBOX_WAIT_S) -> Iterator[None]:
        with locks.hold(
            self.paths.outbox_lock_file,
            timeout=timeout,
            what="another watcher round delivering notifications",
            within=self.paths.user_part,
        ):
            directory = self.paths.outbox
            if directory.is_dir():  # a writer killed mid-write left its temp file
                durable.sweep_stale_temps(directory, within=self.paths.user_part)
            yield

    def messages(self) -> list[OutboxMessage]:
        """Every message, oldest first; a corrupt file is quarantined (CorruptState, exit 5)."""
        directory = self.paths.outbox
        if not directory.is_dir():
            return []
        found = []
        for path in sorted(directory.glob("*.json")):
            message = durable.read_model(
                path,
                OutboxMessage,
                quarantine_dir=self.paths.quarantine,
                within=self.paths.user_part,
            )
            if message is not None:
                found.append(message)
        return sorted(found, key=lambda m: (m.created_at, m.id))

    def save(self, message: OutboxMessage) -> None:
        """Durably write ``message`` (SaveFailed, exit 5, when it cannot be)."""
        durable.write_model(
            self.paths.outbox / f"{message.id}.json", message, within=self.paths.user_part
        )

    def remove(self, message: OutboxMessage) -> None:
        durable.remove_file(self.paths.outbox / f"{message.id}.json", within=self.paths.user_part)


def round_lock(paths: Paths) -> AbstractContextManager[None]:
    """``locks/round.lock``, taken without waiting: one ``watch`` round of a data dir at a time
    (SPEC §16.2); :class:`LockBusy` when another holds it."""
    return locks.hold(
        paths.round_lock_file,
        timeout=0.0,
        what="another watcher watch round",
        within=paths.user_part,
    )
