"""``watcher open ID``: the comment on dev.to, in the browser (SPEC §16.5: the author posts the
reply there, since dev.to's API cannot post comments).

The person's own: the bridge and the MCP server do not offer it (an agent's server has no browser to
open, and a link is already in every ``inbox`` and ``show`` result).
"""

from __future__ import annotations

from pydantic import Field

from watcher.commands.core import Context
from watcher.commands.results import Result
from watcher.commands.screen import Screen, one_line
from watcher.commands.spec import COMMENT_ID, READ_CODES, Command
from watcher.errors import UsageError
from watcher.pipeline import check_id


class OpenResult(Result):
    id: str
    url: str = Field(description="The comment on dev.to: where the author posts a reply.")
    opened: bool = Field(
        description="A web browser took the link; false where there is none (a server, cron)."
    )


def open_comment(ctx: Context, comment_id: str) -> OpenResult:
    """The comment's dev.to link, handed to the web browser when there is one."""
    check_id(comment_id)
    record = ctx.store.load_record(comment_id)
    if record is None:
        raise UsageError(
            f"no comment {comment_id} in {ctx.store.paths.inbox} — `watcher inbox --all` lists them"
        )
    url = record.comment.url
    return OpenResult(id=comment_id, url=url, opened=_browse(url))


def _browse(url: str) -> bool:
    """Whether a web browser took ``url``: the one webbrowser picks ($BROWSER first), if any."""
    import webbrowser

    try:
        return webbrowser.get().open_new_tab(url)
    except webbrowser.Error:  # no browser here: a server, cron, a bare terminal
        return False


def view(result: OpenResult, screen: Screen) -> None:
    screen.out.print(one_line(result.url))
    if not result.opened:
        screen.err.print("no web browser to open it here: open the link above yourself")


OPEN = Command(
    name="open",
    summary="Open a comment on dev.to in the browser.",
    help="Open a comment on dev.to in the web browser, where you post your reply; its link is "
    "printed as well (the only output where there is no browser).",
    examples=("watcher open 3bkf", "watcher open 3bkf --json"),
    codes=READ_CODES,
    result=OpenResult,
    run=lambda c, a: open_comment(c, a["id"]),
    view="watcher.commands.browse:view",
    params=(COMMENT_ID,),
    bridge=False,
)
