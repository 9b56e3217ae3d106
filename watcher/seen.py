"""seen.json: the shared index and the triage marks (SPEC §4.2).

The index may lag the inbox files but never leads them. Saving is a three-way merge under
``locks/seen.lock``: the caller's *base* (what it read) and *mine* (its edit) against *theirs*
(the file now), so two writers never erase each other's work.
"""

from __future__ import annotations

import os
import re
import time
import weakref
from collections.abc import Iterable, Mapping

from watcher import inbox
from watcher.config import Paths
from watcher.durable import read_model, write_model
from watcher.locks import seen_lock
from watcher.models import COMMENT_ID_SHAPE, InboxRecord, SeenArticle, SeenComment, SeenFile, Triage
from watcher.timeutil import iso


def load(paths: Paths) -> SeenFile:
    """The index as on disk; an empty one if it does not exist yet."""
    return read_model(paths.seen, SeenFile, quarantine_dir=paths.quarantine) or SeenFile()


def entry_from(record: InboxRecord, old: SeenComment | None, stamp: str | None) -> SeenComment:
    """The index entry the inbox record implies; keeps the old entry's triage, first_seen_at and
    listed_at (what the person decided or was told is not derived from the inbox file)."""
    now = iso()
    return SeenComment(
        article_id=record.comment.article_id,
        status=inbox.state_of(record),
        attempts=max(len(record.attempts), old.attempts if old else 0),
        triage=old.triage if old else "open",
        first_seen_at=old.first_seen_at if old else now,
        updated_at=now,
        inbox_stamp=stamp,
        listed_at=old.listed_at if old else None,
        triage_by=old.triage_by if old else None,
        replied_at=old.replied_at if old else record.replied_at,
    )


def reconcile(paths: Paths, seen: SeenFile, ids: Iterable[str] | None = None, *,
              written: Mapping[str, tuple[str, InboxRecord]] | None = None) -> tuple[SeenFile, list[str]]:
    """Bring the index up to the inbox files, without any model call.

    Returns the new index and the ids whose entry was added or repaired (``seen`` itself when
    nothing changed). Only files whose stamp changed are read, so an idle index costs one
    ``stat`` per comment. ``written``: records the caller wrote itself, each with its file's
    stamp right after the write; a file that still has that stamp holds that record and is not
    read again (a batch's index save re-read every file it had just written: one more read
    per model call).

    A full reconcile (no ``ids``) of an index this process already reconciled in full is not
    repeated while ``inbox/`` has had no entry created, replaced or removed since: a run
    reconciles before planning and again under the pipeline lock, and on an idle account the
    second pass was a second ``stat`` of every comment (bench/ figure 3). Every write of an
    inbox file — any watcher's, any process's — is a temp file renamed into ``inbox/``, which
    moves the directory's mtime and ctime; see :func:`_inbox_key` for why a coarse clock cannot
    hide one. A file edited in place by some other tool between the two passes is repaired
    by the next command, as the index may lag (SPEC §4.2).
    """
    key = _inbox_key(paths) if ids is None else None
    if key is not None:
        remembered = _remembered(key, seen)
        if remembered is not None:
            return remembered
    index, changed = _reconcile(paths, seen, ids, written or {})
    if key is not None:
        _remember(key, seen, index, changed)
    return index, changed


def _reconcile(paths: Paths, seen: SeenFile, ids: Iterable[str] | None,
               written: Mapping[str, tuple[str, InboxRecord]]) -> tuple[SeenFile, list[str]]:
    comments = seen.comments
    known = comments.get
    stamp_of = inbox.stamp
    stale: list[tuple[str, str]] = []
    # One plain string per stat: building a Path per comment cost more than the stat itself
    # (bench/ figure 3: 10k comments, twice per scan).
    directory = os.path.join(paths.inbox, "")
    for cid in _listed_ids(paths) if ids is None else ids:
        stamp = stamp_of(f"{directory}{cid}.json")
        if stamp is None:
            continue
        old = known(cid)
        if old is None or old.inbox_stamp != stamp:
            stale.append((cid, stamp))
    if not stale:
        # The very object back: seen.save's "untouched" check is then one identity compare.
        return seen, []
    if ids is None:
        stale.sort()  # listing order is arbitrary; new entries and ``changed`` stay in id order
    updated = dict(comments)
    changed: list[str] = []
    for cid, stamp in stale:
        own = written.get(cid)
        record = own[1] if own is not None and own[0] == stamp else inbox.load(paths, cid)
        if record is None:  # removed between stat and read
            continue
        old = updated.get(cid)
        fresh = entry_from(record, old, stamp)
        if old is None or _derived(old) != _derived(fresh):
            changed.append(cid)
        updated[cid] = fresh
    return seen.model_copy(update={"comments": updated}), changed


# The directory's identity and times, and the last full reconcile made while they held (weak
# references: a long-lived process, the MCP server, must not keep an index alive for this).
_InboxKey = tuple[str, int, int, int, int]
_last: tuple[_InboxKey, weakref.ref[SeenFile], weakref.ref[SeenFile], tuple[str, ...]] | None = None
# A directory changed this recently may change again within the same tick of its filesystem's
# clock and keep its times (a tick is a few ms on Linux, 2 s for FAT mtimes); older than
# this, any later change gives it new ones.
_QUIET_NS = 3_000_000_000


def _inbox_key(paths: Paths) -> _InboxKey | None:
    """``inbox/``'s identity and times, if it has been left alone for :data:`_QUIET_NS`.

    A filesystem stamps times from a clock that ticks every few milliseconds (or seconds), so a
    change made in the same tick as an earlier one can leave the times as they were. Only a
    directory whose last change is older than any such tick is trusted: every change after we
    look then lands on a later tick and gives it new times."""
    try:
        st = os.stat(paths.inbox)
    except OSError:
        return None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < _QUIET_NS:
        return None
    return (os.fspath(paths.inbox), st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def _remembered(key: _InboxKey, seen: SeenFile) -> tuple[SeenFile, list[str]] | None:
    last = _last
    if last is None or last[0] != key or last[1]() is not seen:
        return None
    index = last[2]()
    return None if index is None else (index, list(last[3]))


def _remember(key: _InboxKey, seen: SeenFile, index: SeenFile, changed: list[str]) -> None:
    global _last
    # Times read before the pass: a change during it moves them past the key kept here.
    _last = (key, weakref.ref(seen), weakref.ref(index), tuple(changed))


# ``<id>.json`` for every valid comment id, one name per line of a listing (names never hold a
# newline when this is used, so ``^``/``$`` are exactly the name's start and end).
_INBOX_NAME = re.compile(rf"^({COMMENT_ID_SHAPE})\.json$", re.MULTILINE)


def _listed_ids(paths: Paths) -> list[str]:
    """The ids :func:`watcher.inbox.list_ids` gives, unsorted: the same rule applied in one regex
    pass over the whole listing. Per-name matching and the sort were 40 % of an idle reconcile
    (bench/ figure 3: 10k comments, reconciled twice per scan)."""
    try:
        names = os.listdir(paths.inbox)
    except OSError:
        return inbox.list_ids(paths)  # missing, or not listable: list_ids says which (UnsafePath)
    if not names:
        return []
    joined = "\n".join(names)
    if joined.count("\n") != len(names) - 1:
        return inbox.list_ids(paths)  # a name with a newline in it: only per-name matching is exact
    return _INBOX_NAME.findall(joined)


def _derived(entry: SeenComment) -> tuple[object, ...]:
    return (entry.article_id, entry.status, entry.attempts)


def merge(
    base: SeenFile, mine: SeenFile, theirs: SeenFile, patches: Mapping[str, Triage] | None = None
) -> SeenFile:
    """Apply what changed from ``base`` to ``mine`` onto ``theirs``; then the triage patches.

    Per comment and per field: a field ``mine`` did not change keeps ``theirs``' value. Attempts
    are ``max(theirs, mine)``; comments are never removed; a patch is applied as given.
    """
    comments = dict(theirs.comments)
    for cid, entry in mine.comments.items():
        old, current = base.comments.get(cid), theirs.comments.get(cid)
        if entry is old and current is not None and current.attempts >= entry.attempts:
            # Untouched since base: the merge would give theirs exactly. Skipping it keeps a
            # save of a large index proportional to what changed (bench/ figure 3).
            continue
        comments[cid] = _merge_entry(old, entry, current)
    for cid, triage in (patches or {}).items():
        if cid in comments:
            comments[cid] = comments[cid].model_copy(update={"triage": triage, "triage_by": "person"})
    articles = dict(theirs.articles)
    for aid, article in mine.articles.items():
        if base.articles.get(aid) != article or aid not in articles:
            articles[aid] = article
    return SeenFile(comments=comments, articles=articles)


def _merge_entry(base: SeenComment | None, mine: SeenComment, theirs: SeenComment | None) -> SeenComment:
    if theirs is None:
        return mine
    if base is None:
        # Both sides discovered it: the derived fields are mine (I read the inbox just now),
        # but triage is only ever set by a patch, so theirs stands.
        merged = mine.model_copy(update={"triage": theirs.triage, "first_seen_at": theirs.first_seen_at})
    else:
        update = {
            name: getattr(mine, name)
            for name in SeenComment.model_fields
            if getattr(mine, name) != getattr(base, name)
        }
        merged = theirs.model_copy(update=update)
    return merged.model_copy(update={"attempts": max(theirs.attempts, mine.attempts)})


def save(paths: Paths, base: SeenFile, mine: SeenFile, patches: Mapping[str, Triage] | None = None) -> SeenFile:
    """Merge-on-save under the seen lock; writes only if the result differs. Returns the result
    (``mine`` itself when it holds no change of ours: then the file is not even read)."""
    if not patches and _untouched(base, mine) and paths.seen.exists():
        # merge(base, base, theirs) is theirs: nothing to write, so skip the lock and the re-read
        # (an idle scan of a large index would otherwise parse seen.json twice).
        return mine
    with seen_lock(paths):
        theirs = load(paths)
        merged = merge(base, mine, theirs, patches)
        if merged != theirs or not paths.seen.exists():
            write_model(paths.seen, merged)
        return merged


def _untouched(base: SeenFile, mine: SeenFile) -> bool:
    # Identity, not equality: reconcile/record_article build a new entry for every change and keep
    # the same object otherwise, so this is exact and costs one pointer compare per comment.
    if mine is base:
        return True
    if mine.articles != base.articles or len(mine.comments) != len(base.comments):
        return False
    old = base.comments
    return all(old.get(cid) is entry for cid, entry in mine.comments.items())


def record_article(seen: SeenFile, article_id: int, *, title: str, url: str | None, comments_count: int,
                   last_comment_at: str | None = None) -> SeenFile:
    articles = dict(seen.articles)
    articles[str(article_id)] = SeenArticle(title=title, url=url, comments_count=comments_count,
                                            last_comment_at=last_comment_at, checked_at=iso())
    return seen.model_copy(update={"articles": articles})


def patch_triage(paths: Paths, comment_id: str, triage: Triage) -> SeenComment | None:
    """Apply an explicit triage mark (``watcher mark``). Reconciles that one comment first.

    Returns the entry as saved, or ``None`` if watcher knows no such comment.
    """
    base = load(paths)
    mine, _ = reconcile(paths, base, [comment_id])
    if comment_id not in mine.comments:
        return None
    merged = save(paths, base, mine, {comment_id: triage})
    return merged.comments[comment_id]


def claim_listed(paths: Paths, ids: Iterable[str]) -> list[str]:
    """Mark ``ids`` as listed by ``inbox --new``, under the seen lock; return those no earlier (or
    concurrent) ``--new`` had listed, so a cron that mails the output mails each comment once."""
    with seen_lock(paths):
        theirs = load(paths)
        now = iso()
        claimed = [cid for cid in ids if cid in theirs.comments and theirs.comments[cid].listed_at is None]
        if claimed:
            comments = dict(theirs.comments)
            for cid in claimed:
                comments[cid] = comments[cid].model_copy(update={"listed_at": now})
            write_model(paths.seen, theirs.model_copy(update={"comments": comments}))
    return claimed


def note_author_replies(paths: Paths, replies: Mapping[str, str]) -> list[str]:
    """The author answered these comments on dev.to (id -> when): mark them replied, recorded as
    by ``devto`` — unless a person ever marked them (``watcher mark`` always wins, ``open``
    included). Under the seen lock; returns the ids newly marked replied."""
    if not replies:
        return []
    with seen_lock(paths):
        theirs = load(paths)
        comments = dict(theirs.comments)
        marked = []
        for cid, when in replies.items():
            entry = comments.get(cid)
            if entry is None:
                continue
            update: dict[str, object] = {} if entry.replied_at else {"replied_at": when}
            if entry.triage_by is None and entry.triage == "open":  # nobody decided yet
                update.update(triage="replied", triage_by="devto")
                marked.append(cid)
            if update:
                comments[cid] = entry.model_copy(update=update)
        if comments != theirs.comments:
            write_model(paths.seen, theirs.model_copy(update={"comments": comments}))
    return marked
