"""seen.json merge-on-save (SPEC §4.2), as properties over arbitrary base/mine/theirs, plus the
file-level save, reconcile and patch_triage."""

from __future__ import annotations

import time
from dataclasses import dataclass

from _fakes.records import entry, error, record, verdict
from hypothesis import given, settings
from hypothesis import strategies as st

from watcher.state import records
from watcher.config import Paths
from watcher.models import InboxRecord, SeenArticle, SeenComment, SeenFile
from watcher.state.seen import _FROM_ONE_READ as ONE_READ
from watcher.state.seen import merge
from watcher.store import _index
from watcher.store.files import FileStore

IDS = ["a", "b", "c", "d"]
STATUSES = ["done", "pending", "failed", "exhausted", "reserved"]
TRIAGES = ["open", "replied", "ignored"]
TIMES = [f"2026-05-14T09:00:0{i}.000000Z" for i in range(6)]

entries = st.builds(
    SeenComment,
    article_id=st.sampled_from([1, 2]),
    status=st.sampled_from(STATUSES),
    attempts=st.integers(0, 4),
    triage=st.sampled_from(TRIAGES),
    first_seen_at=st.sampled_from(TIMES),
    updated_at=st.sampled_from(TIMES),
    inbox_stamp=st.sampled_from([None, "1:1:1", "2:2:2"]),
)
articles = st.builds(SeenArticle, title=st.sampled_from(["t1", "t2"]), comments_count=st.integers(0, 3),
                     checked_at=st.sampled_from(TIMES), url=st.none())
files = st.builds(
    SeenFile,
    comments=st.dictionaries(st.sampled_from(IDS), entries, max_size=4),
    articles=st.dictionaries(st.sampled_from(["1", "2"]), articles, max_size=2),
)
patches = st.dictionaries(st.sampled_from(IDS), st.sampled_from(TRIAGES), max_size=2)
FIELDS = [f for f in SeenComment.model_fields if f != "attempts"]


@given(base=files, mine=files, theirs=files, patch=patches)
def test_attempts_never_decrease(base: SeenFile, mine: SeenFile, theirs: SeenFile, patch: dict[str, str]) -> None:
    """Merged attempts are at least theirs' and at least mine's, for every comment."""
    merged = merge(base, mine, theirs, patch)  # type: ignore[arg-type]
    for side in (mine, theirs):
        for cid, e in side.comments.items():
            assert merged.comments[cid].attempts >= e.attempts


@given(base=files, mine=files, theirs=files, patch=patches)
def test_comments_never_disappear(base: SeenFile, mine: SeenFile, theirs: SeenFile, patch: dict[str, str]) -> None:
    """Every comment in theirs or mine is in the result (even one mine dropped from base)."""
    merged = merge(base, mine, theirs, patch)  # type: ignore[arg-type]
    assert set(merged.comments) == set(theirs.comments) | set(mine.comments)
    assert set(merged.articles) == set(theirs.articles) | set(mine.articles)


@given(base=files, mine=files, theirs=files)
def test_unchanged_fields_keep_theirs_changed_fields_take_mine(base: SeenFile, mine: SeenFile,
                                                               theirs: SeenFile) -> None:
    """Per field: what mine did not change from base keeps theirs; what it changed is mine's — and
    the fields of one read of the inbox file (status, stamp, article, time) go together."""
    merged = merge(base, mine, theirs)
    for cid in set(base.comments) & set(mine.comments) & set(theirs.comments):
        b, m, t, r = base.comments[cid], mine.comments[cid], theirs.comments[cid], merged.comments[cid]
        read_changed = any(getattr(m, name) != getattr(b, name) for name in ONE_READ)
        for name in FIELDS:
            changed = getattr(m, name) != getattr(b, name) or (name in ONE_READ and read_changed)
            expected = getattr(m, name) if changed else getattr(t, name)
            assert getattr(r, name) == expected, name


def test_a_status_never_lands_beside_another_reads_stamp() -> None:
    """Mine moved the status on (a reservation seen) but kept base's stamp, while theirs saved the
    finished file's stamp: the merged entry takes mine's stamp with mine's status. Field by field
    it said "reserved" with the stamp of the file that says "done", and since that stamp matched
    the file, no later reconcile corrected it (tests/reliability/test_rel_soak.py saw it)."""
    base = SeenFile(comments={"c1": entry(status="pending", attempts=1, stamp="1:1:100")})
    mine = SeenFile(comments={"c1": entry(status="reserved", attempts=2, stamp="1:1:100")})
    theirs = SeenFile(comments={"c1": entry(status="done", attempts=2, stamp="9:9:900")})
    got = merge(base, mine, theirs).comments["c1"]
    assert (got.status, got.inbox_stamp) == ("reserved", "1:1:100")


@given(base=files, mine=files, theirs=files)
def test_comments_only_theirs_has_are_kept_as_they_are(base: SeenFile, mine: SeenFile, theirs: SeenFile) -> None:
    """Another writer's entry that mine does not mention is kept exactly."""
    merged = merge(base, mine, theirs)
    for cid in set(theirs.comments) - set(mine.comments):
        assert merged.comments[cid] == theirs.comments[cid]


@given(mine=files, theirs=files)
def test_both_discovered_keeps_theirs_triage(mine: SeenFile, theirs: SeenFile) -> None:
    """A comment new to my base but already in theirs keeps theirs' triage and first_seen_at."""
    merged = merge(SeenFile(), mine, theirs)
    for cid in set(mine.comments) & set(theirs.comments):
        assert merged.comments[cid].triage == theirs.comments[cid].triage
        assert merged.comments[cid].first_seen_at == theirs.comments[cid].first_seen_at


@given(base=files, mine=files, theirs=files, patch=patches)
def test_patch_is_applied_as_given(base: SeenFile, mine: SeenFile, theirs: SeenFile, patch: dict[str, str]) -> None:
    """A triage patch wins over everything for a known comment, even if equal to an older read."""
    merged = merge(base, mine, theirs, patch)  # type: ignore[arg-type]
    for cid, triage in patch.items():
        if cid in merged.comments:
            assert merged.comments[cid].triage == triage


# ---- interleavings of batch saves and marks -------------------------------------------------


@dataclass(frozen=True)
class Read:
    writer: int


@dataclass(frozen=True)
class Save:
    writer: int
    bumps: tuple[tuple[str, int, str], ...]  # (comment, attempts added, new status)


@dataclass(frozen=True)
class Mark:
    cid: str
    triage: str


events = st.lists(
    st.one_of(
        st.builds(Read, st.integers(0, 2)),
        st.builds(Save, st.integers(0, 2), st.lists(
            st.tuples(st.sampled_from(IDS), st.integers(0, 2), st.sampled_from(STATUSES)), max_size=3
        ).map(tuple)),
        st.builds(Mark, st.sampled_from(IDS), st.sampled_from(TRIAGES)),
    ),
    max_size=25,
)


def _batch_edit(base: SeenFile, bumps: tuple[tuple[str, int, str], ...], n: int) -> SeenFile:
    """What a batch does: derived fields only (status, attempts, stamps), never triage."""
    comments = dict(base.comments)
    for cid, more, status in bumps:
        old = comments.get(cid)
        attempts = (old.attempts if old else 0) + more
        fresh = entry(attempts=attempts, status=status, stamp=f"{n}:{n}:{n}", updated_at=TIMES[n % 6])
        comments[cid] = fresh.model_copy(update={"triage": old.triage}) if old else fresh
    return base.model_copy(update={"comments": comments})


@settings(max_examples=300)
@given(script=events)
def test_marks_and_attempts_survive_any_interleaving(script: list[Read | Save | Mark]) -> None:
    """Batch saves with stale bases never undo a mark, lose a comment, or lower attempts."""
    disk = SeenFile()
    bases: dict[int, SeenFile] = {}
    last_mark: dict[str, str] = {}
    most_attempts: dict[str, int] = {}
    for n, ev in enumerate(script):
        if isinstance(ev, Read):
            bases[ev.writer] = disk
        elif isinstance(ev, Save) and ev.writer in bases:
            base = bases.pop(ev.writer)
            mine = _batch_edit(base, ev.bumps, n)
            disk = merge(base, mine, disk)
            for cid, e in mine.comments.items():
                most_attempts[cid] = max(most_attempts.get(cid, 0), e.attempts)
        elif isinstance(ev, Mark):
            # patch_triage: read, reconcile the one comment (it exists in the inbox), save the patch.
            base = disk
            mine = base if ev.cid in base.comments else _batch_edit(base, ((ev.cid, 0, "pending"),), n)
            disk = merge(base, mine, disk, {ev.cid: ev.triage})  # type: ignore[dict-item]
            last_mark[ev.cid] = ev.triage
        for cid, triage in last_mark.items():
            assert disk.comments[cid].triage == triage
        for cid, attempts in most_attempts.items():
            assert disk.comments[cid].attempts >= attempts


def test_patch_equal_to_an_old_read_still_applies() -> None:
    """'open' after 'replied' is applied even though the batch's stale base also said open."""
    base = SeenFile(comments={"a": entry(triage="open")})
    theirs = SeenFile(comments={"a": entry(triage="replied")})
    assert merge(base, base, theirs, {"a": "open"}).comments["a"].triage == "open"


# ---- the file-level operations --------------------------------------------------------------


def test_save_writes_the_merge_under_the_lock_and_returns_it(paths: Paths) -> None:
    """save re-reads theirs, merges, writes, and returns what it wrote; the lock file stays."""
    theirs = SeenFile(comments={"a": entry(triage="replied")})
    FileStore(paths).save_index(SeenFile(), theirs)
    mine = SeenFile(comments={"b": entry(attempts=1, status="failed")})
    result = FileStore(paths).save_index(SeenFile(), mine)
    assert FileStore(paths).load_index() == result
    assert set(result.comments) == {"a", "b"} and result.comments["a"].triage == "replied"
    assert paths.seen_lock_file.exists()


def test_save_without_changes_does_not_rewrite(paths: Paths) -> None:
    """An unchanged index is not rewritten (same inode)."""
    same = SeenFile(comments={"a": entry()})
    FileStore(paths).save_index(SeenFile(), same)
    before = _index.stamp(paths.seen)
    FileStore(paths).save_index(same, same)
    assert _index.stamp(paths.seen) == before


def test_reconcile_adds_missing_and_repairs_moved_on_entries(paths: Paths) -> None:
    """Inbox files missing from the index are added; one whose inbox moved on is repaired."""
    FileStore(paths).save_record(record("a"))
    index, changed = FileStore(paths).reconcile_index(SeenFile())
    assert changed == ["a"] and index.comments["a"].status == "pending"
    index = index.model_copy(update={"comments": {"a": index.comments["a"].model_copy(update={"triage": "ignored"})}})
    reserved = records.reserve(record("a"), command="scan", entrypoint="cli", provider="offline", model="m")
    FileStore(paths).save_record(records.finish(reserved, verdict=verdict(), error=None))
    repaired, changed = FileStore(paths).reconcile_index(index)
    assert changed == ["a"]
    assert (repaired.comments["a"].status, repaired.comments["a"].attempts) == ("done", 1)
    assert repaired.comments["a"].triage == "ignored"


def test_reconcile_reads_only_files_whose_stamp_changed(paths: Paths) -> None:
    """An up-to-date index costs a stat per comment, no reads."""
    FileStore(paths).save_record(record("a"))
    index, _ = FileStore(paths).reconcile_index(SeenFile())

    class NoReads(FileStore):
        def load_record(self, comment_id: str) -> None:
            raise AssertionError("read an unchanged inbox file")

    assert NoReads(paths).reconcile_index(index) == (index, [])


def _full_reconcile(paths: Paths, index: SeenFile, *, later_s: float = 0) -> tuple[SeenFile, list[str]]:
    """A full reconcile as :meth:`FileStore.reconcile_index` makes it, with its clock ``later_s``
    ahead: inbox/ last changed that long ago, as on an idle account."""
    return _index.reconcile(paths, index, None, load_record=FileStore(paths).load_record, written={},
                            now_ns=lambda: time.time_ns() + int(later_s * 1e9))


def _edit_in_place(paths: Paths, rec: InboxRecord) -> None:
    """Rewrite an inbox file in place (same inode, new size): inbox/'s own times do not move, so
    only a stat of the file itself can see the change."""
    with open(paths.inbox_file(rec.comment.id), "r+b") as fh:
        fh.truncate(0)
        fh.write(rec.model_dump_json().encode())


def _reserved(cid: str) -> InboxRecord:
    return records.reserve(record(cid), command="scan", entrypoint="cli", provider="offline", model="m")


def test_a_second_full_reconcile_of_the_same_index_makes_no_stat(paths: Paths) -> None:
    """Reconciling the same index again (a run: before planning, then under the lock) while
    inbox/ is unchanged gives the first result back without a stat per comment."""
    for cid in ("a", "b"):
        FileStore(paths).save_record(record(cid))
    base = SeenFile()
    first = _full_reconcile(paths, base, later_s=10)
    _edit_in_place(paths, _reserved("a"))  # seen only by a stat of a.json
    assert _full_reconcile(paths, base, later_s=10) == first
    again, changed = _full_reconcile(paths, first[0], later_s=10)  # another index: a full pass
    assert changed == ["a"] and again.comments["a"].status == "reserved"


def test_a_write_into_inbox_between_two_reconciles_is_seen(paths: Paths) -> None:
    """Any inbox write (a temp file renamed into inbox/) moves the directory's times, so the
    second reconcile of the same index is a full one and repairs what changed."""
    FileStore(paths).save_record(record("a"))
    base = SeenFile()
    first = _full_reconcile(paths, base, later_s=10)  # kept: a result is remembered only while it is alive
    FileStore(paths).save_record(_reserved("a"))
    FileStore(paths).save_record(record("b"))
    again, changed = _full_reconcile(paths, base, later_s=10)
    assert changed == ["a", "b"] and first[1] == ["a"]
    assert (again.comments["a"].status, again.comments["a"].attempts) == ("reserved", 1)


def test_a_recently_changed_inbox_is_never_trusted(paths: Paths) -> None:
    """inbox/ changed within the last two seconds (a clock tick could hide a further change):
    every full reconcile stats every comment."""
    FileStore(paths).save_record(record("a"))
    base = SeenFile()
    first = _full_reconcile(paths, base)  # kept: a result is remembered only while it is alive
    _edit_in_place(paths, _reserved("a"))
    again, _ = _full_reconcile(paths, base)
    assert first[0].comments["a"].status == "pending" and again.comments["a"].status == "reserved"


def test_a_record_the_store_just_wrote_is_not_read_again(paths: Paths) -> None:
    """A store uses the records it wrote itself while their file keeps the stamp of that write; a
    file written again since (by another writer: another stamp) is read."""
    loaded: list[str] = []

    class Counted(FileStore):
        def load_record(self, comment_id: str) -> InboxRecord | None:
            loaded.append(comment_id)
            return super().load_record(comment_id)

    store = Counted(paths)
    mine = records.reserve(record("a"), command="scan", entrypoint="cli", provider="offline", model="m")
    store.save_record(mine)
    store.save_record(record("b"))
    FileStore(paths).save_record(records.reserve(record("b"), command="scan", entrypoint="cli", provider="offline",
                                                 model="m"))
    index, changed = store.reconcile_index(SeenFile(), ["a", "b"])
    assert loaded == ["b"] and changed == ["a", "b"]
    assert (index.comments["a"].status, index.comments["a"].attempts) == ("reserved", 1)
    assert (index.comments["b"].status, index.comments["b"].attempts) == ("reserved", 1)


def test_reconcile_never_lowers_attempts(paths: Paths) -> None:
    """An index entry with more attempts than the inbox file shows keeps its count."""
    reserved = records.reserve(record("a"), command="scan", entrypoint="cli", provider="offline", model="m")
    FileStore(paths).save_record(records.finish(reserved, verdict=None, error=error()))
    index = SeenFile(comments={"a": entry(attempts=2, status="failed", stamp="stale")})
    fixed, _ = FileStore(paths).reconcile_index(index)
    assert fixed.comments["a"].attempts == 2


def test_patch_triage_marks_a_comment_known_only_to_the_inbox(paths: Paths) -> None:
    """mark reconciles the one comment first, so a comment not yet indexed can be marked."""
    FileStore(paths).save_record(record("a"))
    saved = FileStore(paths).patch_triage("a", "replied")
    assert saved is not None and saved.triage == "replied"
    assert FileStore(paths).load_index().comments["a"].triage == "replied"


def test_patch_triage_of_an_unknown_comment_returns_none_and_writes_nothing(paths: Paths) -> None:
    """No inbox file, no index entry: None, and no seen.json is created."""
    assert FileStore(paths).patch_triage("zzz", "ignored") is None
    assert not paths.seen.exists()


def test_batch_save_after_a_mark_keeps_the_mark(paths: Paths) -> None:
    """A batch that read before the mark and saves after it does not undo it."""
    FileStore(paths).save_record(record("a"))
    batch_base, _ = FileStore(paths).reconcile_index(SeenFile())
    FileStore(paths).save_index(SeenFile(), batch_base)
    batch_base = FileStore(paths).load_index()
    FileStore(paths).patch_triage("a", "ignored")
    reserved = records.reserve(record("a"), command="scan", entrypoint="cli", provider="offline", model="m")
    FileStore(paths).save_record(records.finish(reserved, verdict=verdict(), error=None))
    batch_mine, _ = FileStore(paths).reconcile_index(batch_base)
    result = FileStore(paths).save_index(batch_base, batch_mine)
    assert (result.comments["a"].triage, result.comments["a"].status) == ("ignored", "done")


def test_save_with_nothing_of_ours_to_apply_neither_reads_nor_writes(paths) -> None:  # type: ignore[no-untyped-def]
    """An idle batch's save (mine is base, entry for entry) skips the lock, the re-read and the write."""
    from _fakes.records import entry as make_entry

    store = FileStore(paths)
    base = SeenFile(comments={"abc1": make_entry(attempts=1, status="failed")})
    store.save_index(SeenFile(), base)
    before = paths.seen.stat()
    mine = base.model_copy(update={"comments": dict(base.comments)})  # a copy holding the same entries
    # another writer changes the file meanwhile; an untouched save must not bring base back
    other = base.model_copy(update={"comments": {"abc1": make_entry(attempts=2, status="failed", triage="replied")}})
    store.save_index(base, other)
    after_other = paths.seen.stat()
    assert (after_other.st_ino, after_other.st_mtime_ns) != (before.st_ino, before.st_mtime_ns)
    assert store.save_index(base, mine) is mine
    assert paths.seen.stat().st_ino == after_other.st_ino
    assert store.load_index().comments["abc1"].attempts == 2
