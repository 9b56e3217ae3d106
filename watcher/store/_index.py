"""seen.json on disk: the guarded read and the stamp-driven reconcile (SPEC §4.2).

The merge rules are :mod:`watcher.state.seen`'s (pure); this module is the file half: which inbox
files changed since the index last saw them (their *stamp*, see :func:`stamp`).
"""

from __future__ import annotations

import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from watcher.config import Paths
from watcher.errors import UnsafePath
from watcher.models import COMMENT_ID_SHAPE, InboxRecord, SeenComment, SeenFile
from watcher.state import records, seen
from watcher.store.dirs import real_directories
from watcher.store.durable import read_model

LoadRecord = Callable[[str], "InboxRecord | None"]


def load(paths: Paths) -> SeenFile:
    """The index as on disk; an empty one if it does not exist yet.

    The one reading of seen.json every view shares, so what is checked here holds for all of
    them: its articles are keyed by the article's id, a whole number (:func:`seen.record_article`
    writes ``str(article_id)``); an entry under any other key (a hand edit) is left out, and the
    next save drops it (tests/test_redteam_seen.py)."""
    index = (
        read_model(paths.seen, SeenFile, quarantine_dir=paths.quarantine, within=paths.user_part)
        or SeenFile()
    )
    if all(_ARTICLE_KEY.fullmatch(key) for key in index.articles):
        return index
    kept = {key: a for key, a in index.articles.items() if _ARTICLE_KEY.fullmatch(key)}
    return index.model_copy(update={"articles": kept})


_ARTICLE_KEY = re.compile(r"[0-9]{1,19}")


def stamp(path: str | Path) -> str | None:
    """Identity of the file's current version: every durable write makes a new inode.

    The name's own identity (lstat): a symlink is never followed — a loop made ``stat`` raise
    ELOOP. Anything odd gets a stamp no index holds, so the caller loads it and the guarded
    read quarantines it or says why not.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"unreadable:{exc.errno}"
    return stamp_of(st)


def stamp_of(st: os.stat_result) -> str:
    """The stamp of a file from its ``stat`` (see :func:`stamp`)."""
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def list_ids(paths: Paths) -> list[str]:
    """Ids of every inbox file (temp files and stray names are ignored)."""
    real_directories(paths.inbox, below=paths.user_part)  # a linked inbox/ is never listed
    try:
        names = os.listdir(paths.inbox)
    except FileNotFoundError:
        return []
    except OSError as exc:  # a loop, a file where inbox/ belongs: exit 5 naming it, not exit 1
        raise UnsafePath(
            paths.inbox,
            f"not a directory watcher can list ({exc.strerror or exc})",
            fix="make it a plain directory again",
        ) from exc
    return sorted(n[:-5] for n in names if n.endswith(".json") and records.is_valid_id(n[:-5]))


def reconcile(
    paths: Paths,
    index: SeenFile,
    ids: Iterable[str] | None,
    *,
    load_record: LoadRecord,
    written: Mapping[str, tuple[str, InboxRecord]],
    now_ns: Callable[[], int] = time.time_ns,
) -> tuple[SeenFile, list[str]]:
    """Bring the index up to the inbox files, without any model call.

    Returns the new index and the ids whose entry was added or repaired (``index`` itself when
    nothing changed). Only files whose stamp changed are read, so an idle index costs one
    ``stat`` per comment. ``written``: records the store knows its files hold (it read them,
    or wrote them as they are), each with its file's stamp; a file that still has that stamp
    holds that record and is not read again (a batch's index save would otherwise re-read every
    file it had just written).

    A full reconcile (no ``ids``) of an index this process already reconciled in full is not
    repeated while ``inbox/`` has had no entry created, replaced or removed since: a run
    reconciles before planning and again under the pipeline lock, and on an idle account the
    second pass was a second ``stat`` of every comment. Every write of
    an inbox file — any watcher's, any process's — is a temp file renamed into ``inbox/``, which
    moves the directory's mtime and ctime; see :func:`_inbox_key` for why a coarse clock cannot
    hide one. A file edited in place by some other tool between the two passes is repaired
    by the next command, as the index may lag (SPEC §4.2). ``now_ns``: the clock that times
    ``inbox/``'s last change (tests/test_seen_merge.py runs it later).
    """
    key = _inbox_key(paths, now_ns()) if ids is None else None
    if key is not None:
        remembered = _remembered(key, index)
        if remembered is not None:
            return remembered
    result, changed = _reconcile(paths, index, ids, load_record, written)
    if key is not None:
        _remember(key, index, result, changed)
    return result, changed


def _reconcile(
    paths: Paths,
    index: SeenFile,
    ids: Iterable[str] | None,
    load_record: LoadRecord,
    written: Mapping[str, tuple[str, InboxRecord]],
) -> tuple[SeenFile, list[str]]:
    comments = index.comments
    known = comments.get
    stale: list[tuple[str, str]] = []
    # One plain string per stat: building a Path per comment cost more than the stat itself
    # (10k comments, reconciled twice per scan).
    directory = os.path.join(paths.inbox, "")
    for cid in _listed_ids(paths) if ids is None else ids:
        found = stamp(f"{directory}{cid}.json")
        if found is None:
            continue
        old = known(cid)
        if old is None or old.inbox_stamp != found:
            stale.append((cid, found))
    if not stale:
        # The very object back: the save's "untouched" check is then one identity compare.
        return index, []
    if ids is None:
        stale.sort()  # listing order is arbitrary; new entries and ``changed`` stay in id order
    updated = dict(comments)
    changed: list[str] = []
    for cid, found in stale:
        own = written.get(cid)
        record = own[1] if own is not None and own[0] == found else load_record(cid)
        if record is None:  # removed between stat and read
            continue
        old = updated.get(cid)
        fresh = seen.entry_from(record, old, found)
        if old is None or _derived(old) != _derived(fresh):
            changed.append(cid)
        updated[cid] = fresh
    return index.model_copy(update={"comments": updated}), changed


# The directory's identity and times, and the last full reconcile made while they held (weak
# references: a long-lived process, the MCP server, must not keep an index alive for this).
_InboxKey = tuple[str, int, int, int, int]
_last: tuple[_InboxKey, weakref.ref[SeenFile], weakref.ref[SeenFile], tuple[str, ...]] | None = None
# A directory changed this recently may change again within the same tick of its filesystem's
# clock and keep its times (a tick is a few ms on Linux, 2 s for FAT mtimes); older than
# this, any later change gives it new ones.
_QUIET_NS = 3_000_000_000


def _inbox_key(paths: Paths, now_ns: int) -> _InboxKey | None:
    """``inbox/``'s identity and times, if it has been left alone for :data:`_QUIET_NS`.

    A filesystem stamps times from a clock that ticks every few milliseconds (or seconds), so a
    change made in the same tick as an earlier one can leave the times as they were. Only a
    directory whose last change is older than any such tick is trusted: every change after we
    look then lands on a later tick and gives it new times."""
    try:
        st = os.stat(paths.inbox)
    except OSError:
        return None
    if now_ns - max(st.st_mtime_ns, st.st_ctime_ns) < _QUIET_NS:
        return None
    return (os.fspath(paths.inbox), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _remembered(key: _InboxKey, index: SeenFile) -> tuple[SeenFile, list[str]] | None:
    last = _last
    if last is None or last[0] != key or last[1]() is not index:
        return None
    result = last[2]()
    return None if result is None else (result, list(last[3]))


def _remember(key: _InboxKey, index: SeenFile, result: SeenFile, changed: list[str]) -> None:
    global _last
    # Times read before the pass: a change during it moves them past the key kept here.
    _last = (key, weakref.ref(index), weakref.ref(result), tuple(changed))


# ``<id>.json`` for every valid comment id, one name per line of a listing (names never hold a
# newline when this is used, so ``^``/``$`` are exactly the name's start and end).
_INBOX_NAME = re.compile(rf"^({COMMENT_ID_SHAPE})\.json$", re.MULTILINE)


def _listed_ids(paths: Paths) -> list[str]:
    """The ids :func:`list_ids` gives, unsorted: the same rule applied in one regex pass over the
    whole listing. Per-name matching and the sort were 40 % of an idle reconcile of 10k
    comments, reconciled twice per scan."""
    real_directories(paths.inbox, below=paths.user_part)  # a linked inbox/ is never listed
    try:
        names = os.listdir(paths.inbox)
    except OSError:
        return list_ids(paths)  # missing, or not listable: list_ids says which (UnsafePath)
    if not names:
        return []
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1:
        return list_ids(paths)  # a name with a newline in it: only per-name matching is exact
    return _INBOX_NAME.findall(joined)


def _derived(entry: SeenComment) -> tuple[object, ...]:
    return (entry.article_id, entry.status, entry.attempts)
