"""``watcher draft ID [--copy]``: a reply draft in the author's voice, under a budget of its own
(SPEC §16.5). dev.to's API cannot post a comment, so the tool drafts and the author posts.

The core (:func:`make_draft`) runs :func:`watcher.pipeline.drafting.draft` — 3 drafts per comment,
ever, each reserved durably before its call under the pipeline and call locks, the breaker and the
cooldown applying — and puts the text on the system clipboard when asked. The MCP tool is the same
core with the same budget, without the clipboard (the server's is not the person's).
"""

from __future__ import annotations

import subprocess

from pydantic import Field

from watcher.commands import tool_text as words
from watcher.commands.core import Context, Partial, batch_run
from watcher.commands.results import Result
from watcher.commands.screen import Screen, as_written, one_line
from watcher.commands.spec import COMMENT_ID, MCP_ID, SPENDS, Command, Mcp, Param
from watcher.errors import UsageError, WatcherError
from watcher.pipeline import check_id
from watcher.state.drafts import DRAFT_CAP, drafts_spent
from watcher.state.drafts_model import DraftError

# The clipboard commands tried in turn: macOS, Wayland, X11 (two), Windows and WSL.
CLIPBOARDS: tuple[tuple[str, ...], ...] = (
    ("pbcopy",),
    ("wl-copy",),
    ("xclip", "-selection", "clipboard"),
    ("xsel", "--clipboard", "--input"),
    ("clip.exe",),
)
NO_CLIPBOARD = (
    "no clipboard command found (pbcopy, wl-copy, xclip, xsel or clip.exe): the draft is printed "
    "above — copy it from there, or install one (wl-clipboard on Wayland, xclip on X11)"
)
_CLIPBOARD_WAIT_S = 5.0


class DraftResult(Result):
    id: str
    url: str = Field(description="The comment on dev.to: where the author posts the reply.")
    n: int = Field(description=f"Which draft this is: 1 to {DRAFT_CAP}, ever, per comment.")
    text: str | None = Field(description="The reply draft to edit and post; null if it failed.")
    offline: bool = Field(
        description="A template from the verdict's reply_hint (provider offline): no model wrote "
        "it; fill in the […]."
    )
    provider: str
    model: str
    drafts_left: int = Field(description=f"Drafts this comment has left of its {DRAFT_CAP}.")
    error: DraftError | None = Field(description="Why this draft has no text, else null.")
    copied: bool = Field(description="On the system clipboard (--copy).")
    interrupted: int | None = Field(
        description="A draft a process left reserved when it died, closed by this run as "
        "interrupted (it counts); else null."
    )


def make_draft(ctx: Context, comment_id: str, *, copy: bool = False) -> Partial[DraftResult]:
    """One reply draft for ``comment_id`` (SPEC §16.5), on the clipboard with ``copy``."""
    check_id(comment_id)
    if copy and ctx.entrypoint != "cli":
        raise UsageError("--copy is for a terminal: the bridge has no clipboard of the person's")
    if ctx.settings.provider == "agent":
        raise UsageError(
            "provider agent: watcher calls no model, so it writes no draft — the agent drafts "
            "replies itself (the MCP prompt reply-session)"
        )
    from watcher.pipeline.drafting import draft

    made = draft(batch_run(ctx, "recheck", limit=1, dry_run=False), comment_id, notice=ctx.notice)
    record, mine = made.record, made.draft
    error: WatcherError | None = made.error
    copied = False
    if copy and mine.text is not None:
        why = to_clipboard(mine.text)
        copied = why is None
        if why is not None and error is None:
            error = UsageError(why)  # exit 2: the setup lacks a clipboard; the draft is printed
    result = DraftResult(
        id=comment_id,
        url=record.comment.url,
        n=mine.n,
        text=mine.text,
        offline=mine.provider == "offline",
        provider=mine.provider,
        model=mine.model,
        drafts_left=max(DRAFT_CAP - drafts_spent(record), 0),
        error=mine.error,
        copied=copied,
        interrupted=made.closed.n if made.closed is not None else None,
    )
    return Partial(result, error)


def to_clipboard(text: str) -> str | None:
    """Put ``text`` on the system clipboard with the first clipboard command found on PATH (the
    operating system's own search); why not (``None``: done)."""
    for argv in CLIPBOARDS:
        try:
            # No pipes but stdin: xclip and wl-copy stay behind to serve the selection, and a pipe
            # they inherited would keep this wait open until they exit.
            done = subprocess.run(
                argv,
                input=text.encode("utf-8"),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=_CLIPBOARD_WAIT_S,
                check=False,
            )
        except FileNotFoundError:
            continue  # not installed here: the next one
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{argv[0]} could not take the draft ({exc}); it is printed above"
        if done.returncode != 0:
            return f"{argv[0]} failed (exit {done.returncode}); the draft is printed above"
        return None
    return NO_CLIPBOARD


def view(result: DraftResult, screen: Screen) -> None:
    """The draft alone on stdout (``watcher draft ID > reply.txt`` holds just the reply); what it
    is and what is left on stderr."""
    by = (
        "an offline template from the verdict's reply hint, no model wrote it: fill in the […]"
        if result.offline
        else f"by {one_line(result.provider)} {one_line(result.model)}"
    )
    if result.text is not None:
        screen.err.print(f"draft {result.n} of {DRAFT_CAP} for {result.id} ({by}):")
        # Not wrapped: the draft goes into dev.to's editor as it is, and a line break added at the
        # terminal's width would go with it.
        screen.out.print(as_written(result.text), soft_wrap=True)
    if result.copied:
        screen.err.print("copied to the clipboard")
    screen.err.print(
        f"{result.drafts_left} of {DRAFT_CAP} drafts left · post it on dev.to: "
        f"`watcher open {result.id}` ({one_line(result.url)})"
    )


DRAFT = Command(
    name="draft",
    summary="Draft a reply to a comment, in your voice (3 drafts per comment).",
    help="Ask the configured provider for a short reply draft to a comment: the article's title, "
    "the comment it answers, the comment, and up to 5 of your own earlier replies as examples "
    "of your voice. [...] marks what only you can fill in. At most 3 drafts per comment, ever, "
    "apart from its 3 verdict attempts; the offline provider writes a template from the "
    "verdict's reply hint.\n\nThe draft is printed alone on stdout; `show ID` prints the newest "
    "again. dev.to cannot take a reply by API: paste it there yourself (`watcher open ID`).",
    examples=(
        "watcher draft 3bkf --copy && watcher open 3bkf",
        "watcher draft 3bkf > reply.txt",
        "watcher draft 3bkf --json",
    ),
    codes="0 drafted · 2 unknown id, gone from dev.to, all 3 drafts made, provider agent or "
    "none chosen, no clipboard for --copy (the draft is still printed) · 3 wait (cooldown, "
    "breaker, WATCHER_MONTHLY_TOKENS reached, or the draft call failed) · 4 a call for it is in "
    "flight, or a batch holds the lock · 5 state error",
    result=DraftResult,
    run=lambda c, a: make_draft(c, a["id"], copy=a.get("copy", False)),
    view="watcher.commands.drafting:view",
    params=(
        COMMENT_ID,
        Param(
            name="copy",
            type=bool,
            default=False,
            flags=("--copy",),
            help="Also put the draft on the system clipboard.",
        ),
    ),
    mcp=Mcp(description=words.DRAFT, hints=SPENDS, args=(MCP_ID,)),
)
