"""``watcher forget ID… | --demo``: comments out of every view, their budget kept (SPEC §16.3).

A comment is never removed from the index (SPEC §4.2): forgetting sets its state to ``forgotten``
in ``seen.json`` and leaves its inbox file and attempt count as they are, so when dev.to sends it
again the store already knows it and no call is bought for it. ``--demo`` forgets the bundled
sample's comments (their ids, from ``data/sample/``), which a store moved by hand from ``./data``
may hold. The person's command: the bridge and the MCP server do not offer it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pydantic import Field

from watcher.commands.core import Context
from watcher.commands.results import Result
from watcher.commands.screen import Screen
from watcher.commands.spec import READ_CODES, Args, Command, Param
from watcher.errors import UsageError
from watcher.pipeline import check_id


class ForgetResult(Result):
    forgotten: list[str] = Field(description="The comments forgotten by this command.")
    already: list[str] = Field(description="Asked for, and already forgotten.")
    attempts: dict[str, int] = Field(description="The attempts each comment keeps, by id.")


# The ids the bundled sample's comments had in the first release (data/sample/export.json at
# e0b6a47), before some were renamed: a store that release made in ./data holds these.
FIRST_RELEASE_SAMPLE_IDS = frozenset(
    {"2ab8m", "2ac3t", "2ad9q", "2aeh2", "2af0x", "2ag7w", "3bkm", "3bnx"}
    | {"3bq7", "3brc", "3bt9", "3bvw", "3bx2", "4cd8", "4cdz", "4ckq"}
)


@functools.cache
def _sample() -> tuple[frozenset[str], frozenset[int]]:
    from watcher.config import demo_settings
    from watcher.source import bundled_sample, read_export

    fetched = read_export(bundled_sample(), demo_settings())
    ids = {comment.id for comment in fetched.comments} | FIRST_RELEASE_SAMPLE_IDS
    return frozenset(ids), frozenset(comment.article_id for comment in fetched.comments)


def sample_ids() -> list[str]:
    """The ids of the bundled sample's comments (``data/sample/``), replies included, and the ids
    they had in the first release."""
    return sorted(_sample()[0])


def is_sample(comment_id: str, article_id: int) -> bool:
    """Whether a comment is one of the bundled sample's: its id and its article both are (an id
    alone is a short code a real dev.to comment may also have)."""
    ids, articles = _sample()
    return comment_id in ids and article_id in articles


def sample_articles() -> frozenset[int]:
    """The bundled sample's articles' ids."""
    return _sample()[1]


def forget(ctx: Context, comment_ids: Sequence[str], *, demo: bool = False) -> ForgetResult:
    """Set each comment's state to ``forgotten`` under the seen lock, as ``mark`` writes a triage.

    Named ids are all checked before anything is written: one unknown id forgets nothing. With
    ``demo``, the sample's ids this store holds (none: nothing to do, and no error)."""
    ids = list(dict.fromkeys(comment_ids))
    if demo == bool(ids):
        raise UsageError("forget takes comment ids, or --demo (the bundled sample's comments)")
    for cid in ids:
        check_id(cid)
    store = ctx.store
    base = store.load_index()
    wanted = sample_ids() if demo else ids
    mine, _ = store.reconcile_index(base, [c for c in wanted if store.has_record(c)])
    missing = [cid for cid in wanted if cid not in mine.comments]
    if missing and not demo:
        raise UsageError(
            f"no comment {', '.join(missing)} — nothing was forgotten; "
            "`watcher inbox --all` lists the known ones"
        )
    known = [
        cid
        for cid in wanted
        if cid in mine.comments and (not demo or is_sample(cid, mine.comments[cid].article_id))
    ]
    already = [cid for cid in known if mine.comments[cid].status == "forgotten"]
    fresh = [cid for cid in known if cid not in already]
    comments = dict(mine.comments)
    for cid in fresh:
        comments[cid] = comments[cid].model_copy(update={"status": "forgotten"})
    saved = store.save_index(base, mine.model_copy(update={"comments": comments}))
    return ForgetResult(
        forgotten=fresh,
        already=already,
        attempts={cid: saved.comments[cid].attempts for cid in known},
    )


def view(result: ForgetResult, screen: Screen) -> None:
    if not result.forgotten and not result.already:
        screen.out.print("nothing to forget")
        return
    if result.forgotten:
        screen.out.print(
            f"forgot {len(result.forgotten)} comment(s): {', '.join(result.forgotten)} — out of "
            "every view; their attempts are kept, so dev.to sending them again costs no call"
        )
    if result.already:
        screen.out.print(f"already forgotten: {', '.join(result.already)}")


def _run(c: Context, a: Args) -> ForgetResult:
    return forget(c, a.get("ids") or (), demo=bool(a.get("demo")))


FORGET = Command(
    name="forget",
    summary="Take comments out of every view, keeping their attempts.",
    help="Take comments out of every view (state forgotten). Their inbox files and attempt "
    "counts stay,\nso dev.to sending them again buys no call. --demo forgets the bundled "
    "sample's comments\n(a store moved by hand from ./data may hold them). Every id is checked "
    "first: one unknown\nid forgets nothing.",
    examples=("watcher forget 3bkf 3bkg", "watcher forget --demo"),
    codes=READ_CODES,
    result=ForgetResult,
    run=_run,
    view="watcher.commands.forget:view",
    params=(
        Param(name="ids", type=list[str] | None, default=None, metavar="ID"),
        Param(
            name="demo",
            type=bool,
            default=False,
            flags=("--demo",),
            help="The bundled sample's comments (data/sample/).",
        ),
    ),
    bridge=False,
)
