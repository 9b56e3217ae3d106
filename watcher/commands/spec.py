"""The shape of one registry entry (:mod:`watcher.commands.registry`): a command, its parameters,
and how the MCP server offers it.

Plain frozen dataclasses with no CLI framework and no MCP SDK in them: ``watcher/cli/app.py`` turns
a :class:`Param` into a typer option or argument, ``bridge/mcp_server.py`` turns an :class:`McpArg`
into a tool argument and :class:`Hints` into the tool's annotations, and the envelope's schema
reads :attr:`Command.result`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, Field

from watcher.commands.core import Context
from watcher.models import COMMENT_ID_SHAPE
from watcher.pipeline import DEFAULT_LIMIT, MAX_LIMIT

# What a command's ``run`` gets: its parameters by name, as the CLI parsed them or as the MCP
# client sent them (the tool's arguments, defaults filled in).
Args = Mapping[str, Any]
Run = Callable[[Context, Args], Any]

REQUIRED: Any = ...  # the default of a parameter that has none


def whole_number(value: str) -> int:
    """A CLI parser for counts. Its ``ValueError`` says what was typed (typer's own message does
    not); the CLI reports it as the option's bad value."""
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number") from None


@dataclass(frozen=True, kw_only=True)
class Param:
    """One CLI parameter: an option when it has ``flags``, else a positional argument.

    ``name`` is the key ``run`` reads it by; ``type`` its Python type as typer reads it
    (``list[str] | None`` for a repeated argument); ``parser`` turns the typed text into it."""

    name: str
    type: Any
    default: Any = REQUIRED
    flags: tuple[str, ...] = ()
    help: str | None = None
    metavar: str | None = None
    parser: Callable[[str], Any] | None = None
    show_default: bool | None = None

    @property
    def is_option(self) -> bool:
        return bool(self.flags)


@dataclass(frozen=True)
class Hints:
    """The MCP tool annotations (what a client may assume of a call); ``None``: not said."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@dataclass(frozen=True)
class McpArg:
    """One MCP tool argument: its name, its type with the schema the client sees (a pydantic
    ``Annotated[..., Field(...)]``), and its default (:data:`REQUIRED` when it has none)."""

    name: str
    type: Any
    default: Any = REQUIRED


@dataclass(frozen=True, kw_only=True)
class Mcp:
    """How the MCP server offers a command.

    ``run`` replaces the command's own when the tool's arguments are not the CLI's (``mark``'s
    ``more_ids``). ``progress``: the tool reports a batch's progress to a client that asks.
    ``listed=False``: no tool is listed, but a call by that name is answered by the command
    itself (``grant``, whose refusal in the core says why an agent may not)."""

    description: str
    hints: Hints
    args: tuple[McpArg, ...] = ()
    run: Run | None = None
    progress: bool = False
    listed: bool = True


@dataclass(frozen=True, kw_only=True)
class Command:
    """One command, read by the CLI, the envelope's schema, the renderer and the MCP server.

    ``summary``: the line ``watcher --help`` lists (click cuts a longer one with "…"); ``help``:
    the command's own help, paragraphs as written; ``examples`` and ``codes``: its epilog.
    ``view``: ``"module:function"`` of the human view, imported on first use (so start-up and
    ``--json`` never load rich, and the views stay out of the layers below); it is called with
    the result and a :class:`~watcher.commands.screen.Screen`. ``batch``: a person sees a
    progress display while it runs, after ``fetching`` says what it waits for first.
    ``own_errors``: the view prints the command's errors itself (``cron``: each problem once).
    ``bridge``: ``watcher-bridge`` offers it; ``mcp``: the MCP server does (``None``: no tool)."""

    name: str
    summary: str
    help: str
    examples: tuple[str, ...]
    codes: str
    result: type[BaseModel]
    run: Run
    view: str
    params: tuple[Param, ...] = ()
    batch: bool = False
    fetching: str | None = None
    own_errors: bool = False
    bridge: bool = True
    mcp: Mcp | None = None


# ---- parameters several commands share -----------------------------------------------------------

LIMIT = Param(
    name="limit",
    type=int,
    default=DEFAULT_LIMIT,
    flags=("--limit",),
    help=f"Most model calls this run (1–{MAX_LIMIT}).",
    show_default=True,
    parser=whole_number,
    metavar="N",
)
PARALLEL = Param(
    name="parallel",
    type=int | None,
    default=None,
    flags=("--parallel",),
    metavar="N",
    help="Model calls in flight at once (1–8); default WATCHER_PARALLEL, else 4 for the "
    "providers' own endpoints and 1 for another WATCHER_BASE_URL.",
    parser=whole_number,
    show_default=False,
)
DRY_RUN = Param(
    name="dry_run",
    type=bool,
    default=False,
    flags=("--dry-run",),
    help="Plan and print what would be called; take no lock, write nothing, call nothing.",
)
COMMENT_ID = Param(name="id", type=str, metavar="ID")

# ---- exit-code lines of the epilogs --------------------------------------------------------------

BATCH_CODES = (
    "0 ran (per-comment errors are in the table) · 2 fix the setup (no source or provider, key, "
    "model, request) · 3 wait (provider or dev.to unreachable, 429, quota, cooldown, breaker) · "
    "4 another run holds the lock · 5 state error · 130/143 stopped by Ctrl-C/SIGTERM"
)
READ_CODES = "0 ok · 2 bad argument or unknown id · 5 corrupt state file (moved to quarantine/)"
VIEW_CODES = "0 ok · 2 bad option · 5 corrupt state file (moved to quarantine/)"  # no id taken

# ---- MCP: annotations and arguments several tools share ------------------------------------------
# Value checks (limit range, triage choice, id shape) are advertised in the schema but enforced by
# the same core functions as the CLI, so a bad value comes back as the core's usage envelope
# (exit_code 2, reworded for MCP by bridge.wording) rather than as a second validator's error.

SPENDS = Hints(read_only=False, destructive=False, idempotent=False, open_world=True)
LOCAL = Hints(read_only=True, open_world=False)
PROBES = Hints(read_only=True, open_world=True)  # check asks the provider and dev.to
MARKS = Hints(read_only=False, destructive=False, idempotent=True, open_world=False)
# claim spends an attempt per comment and submit closes one: local writes that add (never
# remove), and never the same twice (a second submit is refused), with no network at all.
AGENT = Hints(read_only=False, destructive=False, idempotent=False, open_world=False)

ID_PATTERN = f"^{COMMENT_ID_SHAPE}$"
IdItem = Annotated[str, Field(json_schema_extra={"pattern": ID_PATTERN})]
MCP_ID = McpArg(
    "id",
    Annotated[
        str,
        Field(
            description="Comment id, as inbox lists it.",
            json_schema_extra={"pattern": ID_PATTERN},
        ),
    ],
)
MCP_LIMIT = McpArg(
    "limit",
    Annotated[
        int,
        Field(
            description="Most model calls this run, each one attempt spent.",
            json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
        ),
    ],
    DEFAULT_LIMIT,
)
MCP_DRY_RUN = McpArg(
    "dry_run",
    Annotated[
        bool,
        Field(description="Only plan: no lock, no write, no call."),
    ],
    False,
)
