"""seen.json's rules, as pure functions: the index entry a record implies and the merge (SPEC §4.2).

The index may lag the inbox files but never leads them. Saving is a three-way merge: the
caller's *base* (what it read) and *mine* (its edit) against *theirs* (the index as stored now),
so two writers never erase each other's work. The store (:mod:`watcher.store`) runs the merge
under its index lock; nothing here touches a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from watcher.models import InboxRecord, SeenArticle, SeenComment, SeenFile, Triage
from watcher.state import records
from watcher.util.timeutil import iso, parse_iso


def later(a: str, b: str) -> bool:
    """Whether time ``a`` is after time ``b`` (an unreadable one is never later)."""
    try:
        return parse_iso(a) > parse_iso(b)
    except ValueError:
        return False


def entry_from(record: InboxRecord, old: SeenComment | None, stamp: str | None) -> SeenComment:
    """The index entry the inbox record implies; keeps the old entry's triage, first_seen_at and
    listed_at (what the person decided or was told is not derived from the inbox file)."""
    now = iso()
    return SeenComment(
        article_id=record.comment.article_id,
        # Forgotten is the person's, like triage: no inbox file says it (SPEC §16.3).
        status="forgotten" if old and old.status == "forgotten" else records.state_of(record),
        attempts=max(records.spent(record), old.attempts if old else 0),
        triage=old.triage if old else "open",
        first_seen_at=old.first_seen_at if old else now,
        updated_at=now,
        inbox_stamp=stamp,
        listed_at=old.listed_at if old else None,
        triage_by=old.triage_by if old else None,
        replied_at=old.replied_at if old else record.replied_at,
        triage_at=old.triage_at if old else None,
        last_reply_at=old.last_reply_at if old else None,
    )


def merge(
    base: SeenFile,
    mine: SeenFile,
    theirs: SeenFile,
    patches: Mapping[str, Triage] | None = None,
    marked_at: str | None = None,
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
            # save of a large index proportional to what changed.
            continue
        comments[cid] = _merge_entry(old, entry, current)
    marked_at = (marked_at or iso()) if patches else None
    for cid, triage in (patches or {}).items():
        if cid in comments:
            comments[cid] = comments[cid].model_copy(
                update={"triage": triage, "triage_by": "person", "triage_at": marked_at}
            )
    articles = dict(theirs.articles)
    for aid, article in mine.articles.items():
        if base.articles.get(aid) != article or aid not in articles:
            articles[aid] = article
    return SeenFile(comments=comments, articles=articles)


# The fields :func:`entry_from` derives from one read of the inbox file, and that read's stamp.
_FROM_ONE_READ = frozenset({"article_id", "status", "inbox_stamp", "updated_at"})
# The fields no inbox file says: the person's triage and when, the author's replies, the listing.
_NOT_FROM_THE_INBOX = (
    "triage",
    "first_seen_at",
    "triage_by",
    "triage_at",
    "listed_at",
    "replied_at",
    "last_reply_at",
)


def _merge_entry(
    base: SeenComment | None, mine: SeenComment, theirs: SeenComment | None
) -> SeenComment:
    if theirs is None:
        return mine
    attempts = max(theirs.attempts, mine.attempts)
    # Forgotten is the person's and nothing undoes it (SPEC §16.3): no save of a run that read
    # the index before `watcher forget` brings the comment back (tests/test_migrate_races.py).
    forgotten = {"status": "forgotten"} if theirs.status == "forgotten" else {}
    if base is None:
        # Both sides discovered it: the derived fields are mine (I read the inbox just now), but
        # what the person decided or was told is never derived from it (entry_from keeps it from
        # the old entry): theirs stands where it has it.
        kept = {name: getattr(theirs, name) for name in _NOT_FROM_THE_INBOX}
        kept = {name: value for name, value in kept.items() if value is not None}
        return mine.model_copy(update={**kept, "attempts": attempts, **forgotten})
    # A model's fields are its __dict__: one pass over it instead of two getattr per field
    # (a batch merges every comment it touched).
    was = base.__dict__
    update = {name: value for name, value in mine.__dict__.items() if value != was[name]}
    if update.keys() & _FROM_ONE_READ:
        # What one read of the inbox file gave goes whole: a status from mine beside the stamp
        # of theirs claimed that the file on disk said "reserved" when it said "done", and no
        # reconcile looks again at a file whose stamp matches (tests/test_seen_merge.py).
        update.update({name: getattr(mine, name) for name in _FROM_ONE_READ})
    update["attempts"] = attempts
    return theirs.model_copy(update={**update, **forgotten})


def untouched(base: SeenFile, mine: SeenFile) -> bool:
    # Identity, not equality: reconcile/record_article build a new entry for every change and keep
    # the same object otherwise, so this is exact and costs one pointer compare per comment.
    if mine is base:
        return True
    if mine.articles != base.articles or len(mine.comments) != len(base.comments):
        return False
    old = base.comments
    return all(old.get(cid) is entry for cid, entry in mine.comments.items())


def record_article(
    seen: SeenFile,
    article_id: int,
    *,
    title: str,
    url: str | None,
    comments_count: int,
    last_comment_at: str | None = None,
) -> SeenFile:
    articles = dict(seen.articles)
    articles[str(article_id)] = SeenArticle(
        title=title,
        url=url,
        comments_count=comments_count,
        last_comment_at=last_comment_at,
        checked_at=iso(),
    )
    return seen.model_copy(update={"articles": articles})


def with_listed(theirs: SeenFile, ids: Iterable[str], *, now: str) -> tuple[SeenFile, list[str]]:
    """``ids`` marked as listed by ``inbox --new``, and which of them no earlier ``--new`` had
    listed (so a cron that mails the output mails each comment once)."""
    claimed = [
        cid for cid in ids if cid in theirs.comments and theirs.comments[cid].listed_at is None
    ]
    if not claimed:
        return theirs, []
    comments = dict(theirs.comments)
    for cid in claimed:
        comments[cid] = comments[cid].model_copy(update={"listed_at": now})
    return theirs.model_copy(update={"comments": comments}), claimed


def with_author_replies(
    theirs: SeenFile, replies: Mapping[str, str], latest: Mapping[str, str] | None = None
) -> tuple[SeenFile, list[str]]:
    """The author answered these comments on dev.to (id -> first reply; ``latest``: id -> latest
    reply): marked replied, recorded as by ``devto`` — unless a person marked them after the
    author's latest reply (the latest of the author's actions wins, SPEC §15.2: `mark open` after a
    reply reopens it, a reply after that mark closes it again). A mark older releases made has no
    time and always wins (SPEC §13.3). Returns the index and the ids newly marked replied."""
    comments = dict(theirs.comments)
    marked = []
    for cid, when in replies.items():
        entry = comments.get(cid)
        if entry is None:
            continue
        last = (latest or {}).get(cid, when)
        update: dict[str, object] = {} if entry.replied_at else {"replied_at": when}
        if entry.last_reply_at is None or later(last, entry.last_reply_at):
            update["last_reply_at"] = last
        undecided = entry.triage_by is None and entry.triage == "open"
        answered_after_mark = (
            entry.triage_by == "person"
            and entry.triage != "replied"
            and entry.triage_at is not None
            and later(last, entry.triage_at)
        )
        if undecided or answered_after_mark:
            update.update(triage="replied", triage_by="devto")
            marked.append(cid)
        if update:
            comments[cid] = entry.model_copy(update=update)
    if comments == theirs.comments:
        return theirs, marked
    return theirs.model_copy(update={"comments": comments}), marked
