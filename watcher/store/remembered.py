"""The records a store knows its files hold (:class:`watcher.store.files.FileStore`), bounded."""

from __future__ import annotations

from watcher.models import InboxRecord

# Far more than one run's calls (--limit is at most 20) and the records it re-reads around them.
KEPT = 256


class Remembered(dict[str, tuple[str, InboxRecord]]):
    """Comment id -> (its file's stamp, the record it holds), the :data:`KEPT` newest only.

    A first scan writes every comment of the account, and every written record held (its prompt
    too) would be a third of a 20,000-comment first scan's peak memory (bench/memory.py)."""

    def keep(self, comment_id: str, known: tuple[str, InboxRecord]) -> None:
        """Remember a record its file holds; the oldest goes past :data:`KEPT`."""
        self.pop(comment_id, None)
        self[comment_id] = known
        if len(self) > KEPT:
            del self[next(iter(self))]
