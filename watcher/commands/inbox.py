"""What needs a reply (SPEC §15.2): the inbox, and one comment in full."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import (
    Context,
    repaired_index,
)
from watcher.commands.results import (
    CommentRecord,
    InboxEntry,
    InboxResult,
    Parent,
)
from watcher.commands.spec import (
    COMMENT_ID,
    LOCAL,
    MCP_ID,
    READ_CODES,
    VIEW_CODES,
    Command,
    Mcp,
    McpArg,
    Param,
    whole_number,
)
from watcher.errors import UsageError, WatcherError
from watcher.models import CAP, InboxRecord, SeenComment, State
from watcher.notify.message import excerpt
from watcher.pipeline import check_id, next_due
from watcher.state import records
from watcher.state.drafts import newest_text
from watcher.store import Store

VIEWS = "watcher.cli.views"
PRIORITY_ORDER = {"high": 0, "normal": 1, "low": 2}


Priority = Literal["high", "normal", "low"]


def inbox_view(
    ctx: Context,
    *,
    show_all: bool = False,
    new: bool = False,
    claim: bool = True,
    article: int | None = None,
    priority: Priority | None = None,
    oneline: bool = False,
) -> InboxResult:
    """What needs a reply (``show_all``: every comment). ``new``: only what no earlier ``--new``
    listed, and remember these as listed — for a cron line that mails its output. ``claim=False``:
    not remembered yet (cron marks them once its notification holds them, SPEC §16.1).
    ``article`` and ``priority`` keep only the comments on that article, of that priority (SPEC
    §16.4); a comment without a verdict has no priority. ``oneline``: the view prints one line per
    comment."""
    if show_all and new:
        raise UsageError(
            "--new lists only comments needing a reply; it cannot be combined with --all"
        )
    store = ctx.store
    index = repaired_index(ctx)
    rows: list[InboxEntry] = []
    for cid, entry in index.comments.items():
        if entry.status == "forgotten" or (
            not show_all and (entry.status not in LISTABLE or entry.triage != "open")
        ):
            continue  # forgotten: out of every view, --all too (SPEC §16.3)
        if new and entry.listed_at is not None:
            continue
        record = store.load_record(cid)
        if record is None or (article is not None and record.comment.article_id != article):
            continue
        if not show_all and not needs_reply(record, entry):
            continue
        verdict = record.verdict or (record.edits[-1].verdict if entry.status == "edited" else None)
        if priority is not None and (verdict is None or verdict.priority != priority):
            continue
        rows.append(
            InboxEntry(
                id=cid,
                state=entry.status,
                triage=entry.triage,
                attempts=entry.attempts,
                author=record.comment.author,
                article=record.comment.article_title,
                url=record.comment.url,
                created_at=record.comment.created_at,
                verdict=verdict,
                verdict_by=records.verdict_by(record),
                hint=_hint(cid, entry.status, record),
                answers_you=record.comment.answers_author,
                next_due=next_due(record) if entry.status == "failed" else None,
                edited=len(record.edits) if _judged_again(record) else None,
                excerpt=excerpt(record.comment.text) if new else None,
            )
        )
    if new and rows and claim:
        claimed = set(store.claim_listed([r.id for r in rows]))
        rows = [r for r in rows if r.id in claimed]
    rows.sort(
        key=lambda r: (PRIORITY_ORDER[r.verdict.priority if r.verdict else "low"], r.created_at)
    )
    # Not "edited": those are listed (their new text unread), with the grant hint.
    unresolved: dict[State, int] = dict.fromkeys(
        ("pending", "failed", "reserved", "exhausted", "baseline"), 0
    )
    for entry in index.comments.values():
        if entry.status in unresolved:
            unresolved[entry.status] += 1
    return InboxResult(
        all=show_all,
        new=new,
        count=len(rows),
        comments=rows,
        unresolved=unresolved,
        oneline=oneline or None,
    )


# What `watcher inbox` may list (SPEC §15.2): a verdict that says reply, an edited comment whose new
# text no attempt is left for, or one the person reopened with `mark open` after the author
# answered.
LISTABLE = frozenset({"done", "edited", "answered"})


def needs_reply(record: InboxRecord, entry: SeenComment) -> bool:
    """Whether ``watcher inbox`` lists the comment: open, on dev.to, and its verdict says reply — or
    it was edited and cannot be judged again (its new text is unread), or the person reopened it
    (``mark open``; a person's mark wins over the verdict and over dev.to's reply until a later
    one)."""
    if entry.triage != "open" or entry.status not in LISTABLE:
        return False
    if entry.status == "edited":
        return True
    if entry.triage_by == "person":
        return True
    return record.verdict is not None and record.verdict.needs_reply


def _judged_again(record: InboxRecord) -> bool:
    """Its verdict is of a text edited on dev.to after an earlier attempt (SPEC §15.2)."""
    return record.verdict is not None and bool(record.edits) and record.edits[-1].judged


def _hint(comment_id: str, state: str, record: InboxRecord) -> str | None:
    if state in ("deleted", "hidden") and record.gone is not None:
        return (
            f"{state} on dev.to ({record.gone.why}), first seen so at {record.gone.seen_at}: "
            "never called again"
        )
    if state == "edited":
        return (
            "edited on dev.to after its verdict, and no attempt is left for the new text: the "
            "verdict shown is "
            f"the old text's — read it with `watcher show {comment_id}`; `watcher grant "
            f"{comment_id}` lets the "
            "next scan judge it (your decision; agents cannot)"
        )
    if records.edit_on_hold(record) or (record.edits and not record.edits[-1].judged):
        return (
            "edited on dev.to after you replied or marked it: the new text is shown, not judged "
            "again "
            f"(`watcher show {comment_id}` has both)"
        )
    if state == "exhausted" and records.grant_refusal(record, 1) is not None:
        return (
            f"all attempts spent without a verdict, {CAP} + {records.MAX_GRANTED} granted: the "
            "most a "
            "comment gets — read it with `watcher show`"
        )
    if state == "exhausted":
        return (
            f"all attempts spent without a verdict — `watcher grant {comment_id}` gives it another "
            "try "
            "(your decision; agents cannot)"
        )
    if state == "baseline":
        return (
            "baseline: older than the first scan's backlog window (WATCHER_BACKLOG_DAYS), so never "
            "sent to "
            "the model — `watcher scan --since DATE` queues the ones created since DATE"
        )
    if state == "answered":
        return "you had already replied on dev.to before it was checked: no model call was needed"
    return None


def show(ctx: Context, comment_id: str, *, prompt: bool = True) -> CommentRecord:
    """One comment in full; ``prompt=False`` leaves out the cached prompt (about 2 KB an agent
    rarely needs)."""
    check_id(comment_id)
    store = ctx.store
    record = store.load_record(comment_id)
    if record is None:
        raise UsageError(
            f"no comment {comment_id} in {store.paths.inbox} — `watcher inbox --all` lists them"
        )
    index = repaired_index(ctx)
    entry = index.comments.get(comment_id)
    state = records.state_of(record)
    lease = records.open_lease(record)
    # The file leaves this release's fields out while unused (models._unset); the result has them
    # all.
    return CommentRecord(
        schema_version=record.schema_version,
        comment=record.comment,
        prompt=record.prompt if prompt else None,
        cap=records.cap_of(record),
        attempts=record.attempts,
        verdict=record.verdict,
        grants=record.grants,
        baseline=record.baseline,
        state=state,
        verdict_by=records.verdict_by(record),
        hint=(
            f"attempt {len(record.attempts)} is claimed by an agent until {lease}: its verdict "
            "comes by "
            "submit; after that time the next run closes it as interrupted"
            if lease
            else _hint(comment_id, state, record)
        ),
        triage=entry.triage if entry else "open",
        triage_by=entry.triage_by if entry else None,
        replied_at=(entry.replied_at if entry else None) or record.replied_at,
        parent=_parent_of(store, record),
        your_replies=record.author_replies,
        edits=record.edits,
        gone=record.gone,
        next_due=next_due(record) if state == "failed" else None,
        draft=newest_text(record),
    )


def _parent_of(store: Store, record: InboxRecord) -> Parent | None:
    """The comment it replies to: as the thread showed it at discovery, else from its own inbox
    file."""
    c = record.comment
    if c.parent_id is None:
        return None
    author, excerpt = c.parent_author, c.parent_excerpt
    if author is None or excerpt is None:
        try:
            parent = store.load_record(c.parent_id)
        except WatcherError:
            parent = None  # a broken parent file must not break show
        if parent is not None:
            from watcher.source._parse import excerpt as first_lines

            author, excerpt = (
                author or parent.comment.author,
                excerpt or first_lines(parent.comment.text),
            )
    return Parent(id=c.parent_id, author=author, excerpt=excerpt, yours=c.answers_author)


def _priority(value: str) -> str:
    """The CLI parser of ``--priority``: its ``ValueError`` names the three it accepts."""
    if value not in PRIORITY_ORDER:
        raise ValueError(f"{value!r} is not one of high, normal, low")
    return value


INBOX = Command(
    name="inbox",
    summary="The comments that need a reply.",
    help="Comments that need a reply (the verdict says so and you have not marked them).",
    examples=(
        "watcher inbox",
        "watcher inbox --all",
        "watcher inbox --new   (each new comment once; `watcher cron` runs it for cron)",
        "watcher inbox --oneline --priority high",
        "watcher inbox --article 1201",
    ),
    codes=VIEW_CODES,
    result=InboxResult,
    run=lambda c, a: inbox_view(
        c,
        show_all=a["all"],
        new=a.get("new", False),
        article=a.get("article"),
        priority=a.get("priority"),
        oneline=a.get("oneline", False),
    ),
    view=f"{VIEWS}.reading:inbox",
    params=(
        Param(
            name="all",
            type=bool,
            default=False,
            flags=("--all",),
            help="Every known comment, not only those needing a reply.",
        ),
        Param(
            name="new",
            type=bool,
            default=False,
            flags=("--new",),
            help="Only those no earlier --new listed, and remember them; prints nothing when "
            "there are none.",
        ),
        Param(
            name="oneline",
            type=bool,
            default=False,
            flags=("--oneline",),
            help="One line per comment.",
        ),
        Param(
            name="article",
            type=int | None,
            default=None,
            flags=("--article",),
            help="Only the comments on this article (its id: `watcher articles`).",
            metavar="ID",
            parser=whole_number,
        ),
        Param(
            name="priority",
            type=str | None,
            default=None,
            flags=("--priority",),
            help="Only the comments of this priority: high, normal or low.",
            metavar="high|normal|low",
            parser=_priority,
        ),
    ),
    mcp=Mcp(
        description=words.INBOX,
        hints=LOCAL,
        args=(
            McpArg(
                "all",
                Annotated[
                    bool,
                    Field(
                        description="List every known comment with its state, not only "
                        "those needing a reply."
                    ),
                ],
                False,
            ),
            McpArg(
                "article",
                Annotated[
                    int | None,
                    Field(description="Only this article id's comments."),
                ],
                None,
            ),
            McpArg(
                "priority",
                Annotated[
                    Priority | None,
                    Field(description="Only this priority."),
                ],
                None,
            ),
        ),
    ),
)


SHOW = Command(
    name="show",
    summary="One comment: its text, thread, verdict and every attempt.",
    help="One comment: its text, verdict and every attempt.",
    examples=("watcher show 3bkf", "watcher show 3bkf --json"),
    codes=READ_CODES,
    result=CommentRecord,
    run=lambda c, a: show(c, a["id"], prompt=a.get("prompt", True)),
    view=f"{VIEWS}.reading:show",
    params=(COMMENT_ID,),
    mcp=Mcp(
        description=words.SHOW,
        hints=LOCAL,
        args=(
            MCP_ID,
            McpArg(
                "prompt",
                Annotated[
                    bool,
                    Field(description="Include the cached prompt (about 2 KB)."),
                ],
                False,
            ),
        ),
    ),
)
