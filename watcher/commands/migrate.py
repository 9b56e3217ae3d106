"""``watcher migrate SRC``: a store from another data dir — ``./data``, the default of releases
before 0.2.0 — brought into the data dir, losing no mark and no attempt (SPEC §16.3).

Comment by comment, under both stores' pipeline locks: a comment only SRC has is copied; one both
have keeps the inbox file with more attempts, with the reply drafts of both (§16.5: drafts, like
attempts, never go down), the larger attempt count of the two indexes (§4.2, §13.5: attempts never
go down), and the later of the two triages (marks latest-wins, §15.2). The
bundled sample's comments are left out and counted. Then the provider state, what cron said, the
signal log and the settings (:mod:`watcher.commands.migrate_state`). SRC is only read: it stays in
place, and the summary says which of its files are watcher state.

Safe to rerun after a crash at any point: a marker (:mod:`watcher.store.places`) is written in the
data dir before the first comment and removed once everything is brought; while it is there every
command that opens the data dir refuses to run (exit 2) and names the command that finishes the
migration, so no scan ever sees half a store and buys a call for a comment still to be moved.
Rerun, every step gives the same result (the merge is idempotent).
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from watcher.commands.core import Context
from watcher.commands.results import Result
from watcher.commands.screen import Screen
from watcher.commands.spec import READ_CODES, Args, Command, Param
from watcher.config import Paths, load_settings
from watcher.errors import UsageError
from watcher.models import InboxRecord, SeenComment, SeenFile
from watcher.pipeline.batch import open_store
from watcher.state.drafts_model import Draft
from watcher.store import Store


class MigrateResult(Result):
    source: str = Field(description="The data dir migrated from; left in place.")
    data_dir: str = Field(description="The data dir migrated into.")
    copied: int = Field(description="Comments only the source had, copied.")
    merged: int = Field(description="Comments both had, merged (attempts the larger, latest mark).")
    sample_left_out: int = Field(description="Comments of the bundled sample, not migrated.")
    config: str = Field(
        default="none",
        description="The source's config.toml: copied (the data dir had none), same, kept (the "
        "data dir has its own, different one, left as it is), or none.",
    )
    removable: list[str] = Field(
        default_factory=list,
        description="The source's watcher state, which may be removed once checked.",
    )
    not_state: list[str] = Field(
        default_factory=list,
        description="What else the source holds (a clone's data/sample/, data/eval/): keep it.",
    )


def migrate(ctx: Context, source: str) -> MigrateResult:
    from watcher.commands import migrate_state
    from watcher.store.places import begin_migration, finish_migration, overlapping
    from watcher.util.datadir import named_data_dir

    # Not ctx.settings: that refuses the very state this command is here to move.
    settings = load_settings(data_dir=ctx.data_dir, overrides=ctx.overrides)
    src_root = named_data_dir(source, "SRC")
    dst_root = settings.data_dir
    how = overlapping(src_root, dst_root)
    if how is not None:
        raise UsageError(f"{src_root} {how} the data dir {dst_root}: nothing to migrate")
    src = open_store(Paths(src_root), ctx.hooks)
    if not src.holds_state():
        raise UsageError(f"{src_root} holds no watcher state (no seen.json, no inbox/)")
    dst = open_store(settings.paths, ctx.hooks)
    with dst.pipeline_lock(), src.pipeline_lock():
        src_index, _ = src.reconcile_index(src.load_index())  # in memory: SRC is only read
        moving, left_out = _split(src, src_index)
        begin_migration(
            dst_root, source=src_root, comments=len(moving), within=settings.paths.user_part
        )
        base = dst.load_index()
        merged = sum(_bring(src, dst, cid) for cid in moving)
        mine, _ = dst.reconcile_index(base, [c for c in moving if dst.has_record(c)])
        # Two saves: the comments indexed as their inbox files say, then the source's marks as a
        # change to those entries. A read command that indexed the same files meanwhile makes
        # its entries "discovered by both", where its triage would stand (SPEC §4.2): as changes
        # to entries both saw, the marks apply over it (tests/test_migrate_races.py).
        indexed = dst.save_index(base, mine)
        dst.save_index(indexed, _merged_index(src_index, indexed, moving))
        sample = set(left_out)
        migrate_state.bring_provider(src, dst, sample)
        migrate_state.bring_cron(src, dst, sample)
        migrate_state.bring_signals(src, dst, sample)
        config = migrate_state.bring_config(src, dst)
        migrate_state.recount_tokens(dst)
        finish_migration(dst_root)
    removable, not_state = _left_behind(src, config)
    return MigrateResult(
        source=str(src_root),
        data_dir=str(dst_root),
        copied=len(moving) - merged,
        merged=merged,
        sample_left_out=len(left_out),
        config=config,
        removable=removable,
        not_state=not_state,
    )


def _left_behind(src: Store, config: str) -> tuple[list[str], list[str]]:
    """What of the source is watcher state (may go once checked) and what is not (``./data`` of a
    clone also holds the bundled sample and the labelled set: ``rm -rf data`` would delete them
    from the checkout). A config.toml that was not brought stays out of the first list."""
    root = src.paths.root
    keep = {src.paths.config_file} if config == "kept" else set()
    state = [p for p in src.state_entries() if p not in keep] + [src.paths.locks]
    names = {p.name for p in state}
    removable = sorted(_shown(p) for p in state if os.path.lexists(p))
    others = sorted(_shown(root / n) for n in os.listdir(root) if n not in names)
    return removable, others


def _shown(path: Path) -> str:
    return f"{path.name}/" if path.is_dir() and not path.is_symlink() else path.name


def _split(src: Store, index: SeenFile) -> tuple[list[str], list[str]]:
    """The source's comments to bring, and those of the bundled sample (left out)."""
    from watcher.commands.forget import is_sample

    moving: list[str] = []
    left_out: list[str] = []
    for cid in sorted(set(index.comments) | set(src.record_ids())):
        entry = index.comments.get(cid)
        record = src.load_record(cid) if entry is None else None
        article = entry.article_id if entry else record.comment.article_id if record else 0
        (left_out if is_sample(cid, article) else moving).append(cid)
    return moving, left_out


def _bring(src: Store, dst: Store, cid: str) -> bool:
    """One comment's inbox file into the data dir (see :func:`_merged_record`); whether the data
    dir had one already."""
    record, was_there = _merged_record(src.load_record(cid), dst.load_record(cid))
    if record is not None:
        dst.save_record(record)
    return was_there


def _merged_index(src: SeenFile, mine: SeenFile, moving: list[str]) -> SeenFile:
    """The data dir's index with the source's entries merged in (:func:`_merged_entry`), and the
    source's articles it lacks (not the sample's: its comments stay out)."""
    from watcher.commands.forget import sample_articles

    comments = dict(mine.comments)
    for cid in moving:
        entry = _merged_entry(src.comments.get(cid), comments.get(cid))
        if entry is not None:
            comments[cid] = entry
    wanted = {str(entry.article_id) for entry in comments.values()}
    sample = {str(a) for a in sample_articles()} - wanted
    articles = {k: v for k, v in src.articles.items() if k not in sample}
    return SeenFile(comments=comments, articles={**articles, **mine.articles})


def _merged_record(
    src: InboxRecord | None, dst: InboxRecord | None
) -> tuple[InboxRecord | None, bool]:
    """The inbox record to keep, and whether the data dir had one: the one with more attempts,
    the data dir's on a tie or when it has a verdict the source lacks (the index keeps the larger
    attempt count either way), with the drafts of both (:func:`_merged_drafts`); ``None``: keep
    what the data dir has (nothing to write)."""
    if dst is None:
        return src, False
    if src is None:
        return None, True
    keep_dst = len(dst.attempts) >= len(src.attempts) or (
        dst.verdict is not None and src.verdict is None
    )
    kept = dst if keep_dst else src
    drafts = _merged_drafts(src.drafts, dst.drafts)
    if keep_dst and drafts == dst.drafts:
        return None, True
    return kept.model_copy(update={"drafts": drafts}), True


def _merged_drafts(src: list[Draft], dst: list[Draft]) -> list[Draft]:
    """The reply drafts of both stores, each once: a draft is who reserved it when (its process
    and time), the data dir's copy kept unless only the source's has an outcome; oldest first,
    numbered again 1, 2, … . So a comment has at least the drafts either store gave it, and the
    budget of 3 is not reset by a migration (SPEC §16.5); rerun, the same list."""
    found = {_draft_id(d): d for d in dst}
    for d in src:
        mine = found.get(_draft_id(d))
        if mine is None or (mine.outcome is None and d.outcome is not None):
            found[_draft_id(d)] = d
    ordered = sorted(found.values(), key=lambda d: (d.reserved_at, d.n))
    return [d if d.n == n else d.model_copy(update={"n": n}) for n, d in enumerate(ordered, 1)]


def _draft_id(draft: Draft) -> tuple[str, int, str]:
    return draft.reserved_at, draft.pid, draft.entrypoint


def _merged_entry(src: SeenComment | None, dst: SeenComment | None) -> SeenComment | None:
    """The data dir's entry with the larger attempt count of the two and the later triage."""
    if src is None:
        return None
    if dst is None:
        return src
    update: dict[str, object] = {"attempts": max(src.attempts, dst.attempts)}
    if _triage_wins(src, dst):
        for name in ("triage", "triage_by", "triage_at", "replied_at", "last_reply_at"):
            update[name] = getattr(src, name)
    if "forgotten" in (src.status, dst.status):
        update["status"] = "forgotten"
    update["first_seen_at"] = min(src.first_seen_at, dst.first_seen_at)
    if dst.listed_at is None and src.listed_at is not None and dst.attempts <= src.attempts:
        # Listed by the source's `inbox --new` (mailed by its cron), and not judged again since
        # in the data dir (a new verdict clears listed_at to be listed again): listed once.
        update["listed_at"] = src.listed_at
    return dst.model_copy(update=update)


def _triage_wins(src: SeenComment, dst: SeenComment) -> bool:
    """Latest wins; a triage without a time (an older release's) loses to one with a time, and an
    open one never replaces a mark of the same age (a mark is never dropped for want of a time)."""
    if src.triage == dst.triage:
        return False
    src_at, dst_at = _triage_time(src), _triage_time(dst)
    if src_at and dst_at:
        return src_at > dst_at
    if src_at or dst_at:
        return bool(src_at)
    return dst.triage == "open"


def _triage_time(entry: SeenComment) -> str:
    if entry.triage == "open" and entry.triage_at is None:
        return ""
    if entry.triage_by == "person":
        return entry.triage_at or ""
    return entry.last_reply_at or entry.replied_at or ""


def view(result: MigrateResult, screen: Screen) -> None:
    screen.out.print(
        f"migrated {result.source} into {result.data_dir}: {result.copied} comment(s) copied, "
        f"{result.merged} merged (attempts the larger, the latest mark); "
        f"{result.sample_left_out} of the bundled sample left out"
    )
    if result.config == "copied":
        screen.out.print(f"its config.toml was copied (the data dir {result.data_dir} had none)")
    elif result.config == "kept":
        screen.out.print(
            f"the data dir's own config.toml was kept; {result.source}/config.toml differs: "
            "compare them"
        )
    removable = " ".join(result.removable)
    if not result.not_state:
        screen.out.print(
            f"{result.source} was left in place: once you have checked `watcher inbox --all`, it "
            f"may be removed ({removable})"
        )
        return
    screen.out.print(
        f"{result.source} was left in place: once you have checked `watcher inbox --all`, its "
        f"watcher state may be removed: {removable} — not the rest of it "
        f"({' '.join(result.not_state)}), which is not watcher state"
    )


def _run(c: Context, a: Args) -> MigrateResult:
    return migrate(c, a["source"])


MIGRATE = Command(
    name="migrate",
    summary="Bring another data dir's comments, marks and attempts into the data dir.",
    help="Bring a store from another data dir (./data, the default before 0.2.0) into the data "
    "dir,\ncomment by comment: attempts the larger, marks latest-wins; then its provider state, "
    "what\ncron said, its signals and, if the data dir has none, its config.toml. The bundled "
    "sample's\ncomments are left out. SRC is left in place. Safe to rerun, also after a crash.",
    examples=("watcher migrate ./data", "watcher migrate ~/old-watcher-data --json"),
    codes=READ_CODES,
    result=MigrateResult,
    run=_run,
    view="watcher.commands.migrate:view",
    params=(Param(name="source", type=str, metavar="SRC"),),
    bridge=False,
)
