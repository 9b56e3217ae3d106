"""``watcher-bridge mcp``: the watcher commands as MCP tools over stdio (SPEC §10).

Codex and Claude Code start this server themselves, with the environment the user grants it
(Codex's shell sandbox strips ``*KEY*`` variables and has no network, so calling the bridge as a
shell command cannot reach a real provider). Every tool hands the same core function the CLI
uses to :func:`watcher.commands.execute` and returns its envelope; nothing here decides anything
about attempts, locks or state.

The MCP SDK is an optional extra (``pip install 'devto-watcher[mcp]'``). This module is imported
only by ``watcher-bridge mcp``; ``watcher`` and the plain bridge never load the SDK.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, ValidationError

from watcher import commands
from watcher.commands import Context, Envelope
from watcher.errors import EXIT_USAGE, exit_code_legend
from watcher.pipeline import DEFAULT_LIMIT, MAX_LIMIT

MIN_SDK = (2, 3)
INSTALL_HINT = ("watcher-bridge mcp needs the MCP Python SDK (mcp >= {need}), an optional extra:\n"
                "    pip install 'devto-watcher[mcp]'      # from PyPI\n"
                "    pip install '.[mcp]'                  # from a checkout of devto-watcher\n")

try:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent, ToolAnnotations
except ImportError as exc:  # the extra is missing, or an mcp 1.x without MCPServer
    _SDK_MISSING: ImportError | None = exc
else:
    _SDK_MISSING = None

log = logging.getLogger("bridge.mcp")

# What an agent should do with each non-zero exit code (the meanings come from watcher.errors).
AGENT_ADVICE = {
    2: "fix the argument or the setup the message names; never retry the same call as it is.",
    3: "wait: the provider or dev.to stopped the batch (the message says until when); do not retry at once.",
    4: "another run holds the pipeline lock; try again later, do not loop.",
    5: "a state file is corrupt or could not be saved; tell the user, who must look at the named path.",
}

INSTRUCTIONS = """devto-watcher triages the comments on a dev.to author's articles with a language model,
under a hard budget of 3 model attempts per comment (the first included), ever.

Start with `status` (free). `scan` fetches new comments and makes their first attempt; `recheck`
retries failed ones; both spend model attempts and share one pipeline lock with every other
watcher run on this data directory (the CLI included). `inbox` lists what needs a reply, `show`
one comment in full, `mark` records that the author replied or chose to ignore it.

Every tool returns the envelope {{ok, command, exit_code, result, error: {{kind, message}} | null}}.
exit_code: {legend}.
{advice}
A non-zero exit_code comes back as a tool error that still carries the envelope.""".format(
    legend=exit_code_legend(), advice="\n".join(f"On {code}: {what}" for code, what in AGENT_ADVICE.items()))


# ---- the envelope as the tools' output schema -----------------------------------------------------


class EnvelopeError(BaseModel):
    kind: str = Field(description="Stable error kind, e.g. usage, config, lock_busy, rate_limited.")
    message: str = Field(description="What went wrong and what to do next.")


class EnvelopeOut(BaseModel):
    """SPEC §10: the same JSON document ``watcher-bridge <command>`` prints."""

    ok: bool = Field(description="True when the command ran (exit_code 0).")
    command: str
    exit_code: int = Field(description=exit_code_legend())
    result: Any = Field(default=None, description="The command's result (a batch keeps its summary even "
                                                  "when it stopped).")
    error: EnvelopeError | None = None


# ---- parameters -------------------------------------------------------------------------------------
# Value checks (limit range, triage choice, id shape) are advertised in the schema but enforced by
# the same core functions as the CLI, so a bad value comes back as the CLI's usage envelope
# (exit_code 2, the CLI's message) rather than as a second, differently worded validator's error.

Limit = Annotated[int, Field(
    description=f"Most model calls this run (1–{MAX_LIMIT}). Each call spends one of a comment's 3 attempts.",
    json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})]
DryRun = Annotated[bool, Field(
    description="Only plan: list what would be called. Takes no lock, writes nothing, calls no model.")]
Source = Annotated[str | None, Field(
    description="'devto' (needs DEVTO_USERNAME), or the path of a Forem-format export file on this machine. "
                "Omitted: dev.to when DEVTO_USERNAME is set, else the bundled sample comments.")]
Ids = Annotated[list[str] | None, Field(
    description="Only these comment ids. Omitted: every failed or interrupted comment, oldest first.")]
CommentId = Annotated[str, Field(
    description="Comment id (the dev.to id_code), as listed by inbox.",
    json_schema_extra={"pattern": "^[a-z0-9]{1,16}$"})]
Triage = Annotated[str, Field(
    description="replied: you answered it · ignored: it needs no answer · open: back on the to-do list.",
    json_schema_extra={"enum": list(commands.TRIAGE_CHOICES)})]
ShowAll = Annotated[bool, Field(description="List every known comment with its state, not only those "
                                            "needing a reply.")]
Reset = Annotated[bool, Field(description="Recount the whole observation log from the start on purpose "
                                          "(only after the log was replaced or truncated).")]

SCAN = f"""Fetch new comments from dev.to (or an export file) and make the FIRST model attempt for each
comment never attempted before — at most `limit` model calls this run (default {DEFAULT_LIMIT}, max
{MAX_LIMIT}); comments beyond the limit are left pending for the next scan (`remaining`). Spends model
attempts (3 per comment in total, ever; scan makes only the first). Never retries failures: that is
`recheck`. Waits at most 5 s for the pipeline lock; if another scan/recheck holds it, returns exit_code
4 (try later, do not loop). A setup failure (unreachable server, rejected key, unknown model, refused
request) or a rate limit stops the batch at once: exit_code 2 means the user must fix the setup (never
retry as is), 3 means wait (the message says until when; a broken provider is then probed for free
before any attempt is spent). Use dry_run to see what would be called without spending anything."""

RECHECK = f"""Retry comments whose verdict failed (malformed answer, overload, timeout, …) with their cached
prompt. Spends model attempts: at most `limit` calls this run (default {DEFAULT_LIMIT}, max {MAX_LIMIT}),
one per comment per run, and never more than 3 attempts per comment in total, the scan's first attempt
included — an exhausted comment is never called again. Does not fetch new comments (that is `scan`).
Waits at most 5 s for the pipeline lock (exit_code 4 if busy; try later). A setup failure or a rate
limit stops the batch: exit_code 2 = the user must fix the setup, 3 = wait. Never call recheck in a
loop: a comment that failed three times is exhausted and only the user can grant it more attempts
(`watcher grant`, not available to agents). Use dry_run to see what would be called."""

STATUS = """Free: no model call, no network, no lock wait. Counts comments by state (done, pending,
failed, exhausted, reserved) and triage, shows any provider cooldown, observation signal counts, the
configured provider and model, and the data paths. Call this first."""

INBOX = """Free: the comments that need a reply (their verdict says so and they are not marked replied or
ignored), highest priority first, with the verdict's summary and reply hint. all=true lists every known
comment with its state instead."""

SHOW = """Free: one comment in full — its text, verdict, triage and every model attempt (outcome, error,
raw answer)."""

MARK = """Set a comment's triage: replied, ignored, or open again. No model call. Takes only the short
seen.json lock, never the pipeline lock, so it answers at once even while a scan or recheck runs, and
that batch will not overwrite the mark."""

CHECK = """Free: checks the setup without spending an attempt or a token — config, API key present, the
provider's models endpoint (does the model exist?), the dev.to user, the data dir. Each failed check
says its fix. exit_code 0 only if all pass. Use it after a scan or recheck stopped with exit_code 2 or 3."""

SIGNALS = """Count the new lines of the observation log (each exactly once, across crashes) and return
the totals per key. No model call."""


# ---- running one command ------------------------------------------------------------------------------


def _notice(message: str) -> None:
    # stdout is the protocol channel: every human-readable word goes to stderr.
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def _tool_result(envelope: Envelope) -> CallToolResult:
    doc = envelope.to_json()
    text = json.dumps(doc, ensure_ascii=False)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=doc,
                          is_error=not envelope.ok)


class _Runner:
    """Runs one command per tool call, in a worker thread, with a fresh :class:`Context`."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir

    async def __call__(self, command: str, fn: Callable[[Context], Any]) -> CallToolResult:
        # A fresh Context per call: settings (provider, keys, data dir) are re-read every time, as
        # a new CLI process would. The batch blocks on the lock and on model calls for minutes, so
        # it runs in a worker thread and the server keeps answering (mark, status) meanwhile. The
        # thread is not abandoned on cancellation: a batch always finishes and releases its lock.
        ctx = Context(entrypoint="bridge", data_dir=self.data_dir, notice=_notice)
        envelope = await anyio.to_thread.run_sync(functools.partial(commands.execute, command, ctx, fn))
        if not envelope.ok:
            log.info("%s exited %s: %s", command, envelope.exit_code, (envelope.error or {}).get("message"))
        return _tool_result(envelope)


def _argument_error(tool: str, message: str) -> CallToolResult:
    """A bad argument answers like the CLI's bad option: a usage envelope, exit_code 2."""
    return _tool_result(Envelope(False, tool, EXIT_USAGE, None, {"kind": "usage", "message": message}))


if _SDK_MISSING is None:

    class WatcherServer(MCPServer):
        """MCPServer whose argument errors are usage envelopes, like every other failure.

        The SDK rejects a wrongly typed argument with bare text; and it silently drops an unknown
        one, so a misspelt ``dryrun`` would spend real attempts. Both become a usage envelope.
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.parameters: dict[str, frozenset[str]] = {}

        def add_watcher_tool(self, fn: Callable[..., Any], *, description: str, annotations: ToolAnnotations) -> None:
            self.parameters[fn.__name__] = frozenset(inspect.signature(fn).parameters)
            self.add_tool(fn, name=fn.__name__, description=description, annotations=annotations)

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            known = self.parameters.get(name)
            unknown = sorted(set(arguments) - known) if known is not None else []
            if unknown:
                return _argument_error(name, f"{name} has no argument {', '.join(unknown)} "
                                             f"(it takes: {', '.join(sorted(known or ())) or 'none'})")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if known is None or not isinstance(exc.__cause__, ValidationError):
                    raise
                problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                                     for e in exc.__cause__.errors())
                return _argument_error(name, f"bad arguments for {name}: {problems}")


@asynccontextmanager
async def _stdout_kept_for_protocol(_server: Any) -> AsyncIterator[dict[str, Any]]:
    """While serving, Python's ``sys.stdout`` is stderr.

    The SDK points fd 1 at stderr while it serves, but a ``print`` lands in ``sys.stdout``'s buffer
    first, and with a pipe (no tty, no PYTHONUNBUFFERED: how Codex starts us) that buffer is only
    flushed at exit — after the SDK has pointed fd 1 back at the protocol pipe, corrupting it.
    """
    sys.stdout.flush()  # anything already buffered goes out now, while fd 1 is still diverted
    saved, sys.stdout = sys.stdout, sys.stderr
    try:
        yield {}
    finally:
        sys.stdout = saved


def build_server(*, data_dir: Path | None = None, verbose: bool = False) -> WatcherServer:
    """The MCP server with the eight watcher tools (no grant: SPEC §13.2). Requires the SDK (see :func:`serve`)."""
    server = WatcherServer("devto-watcher", instructions=INSTRUCTIONS, log_level="INFO" if verbose else "WARNING",
                           lifespan=_stdout_kept_for_protocol)
    run = _Runner(data_dir)
    spends = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                             open_world_hint=True)
    free = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    local = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

    async def scan(limit: Limit = DEFAULT_LIMIT, dry_run: DryRun = False,
                   source: Source = None) -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("scan", lambda c: commands.scan(c, limit=limit, dry_run=dry_run, source=source))

    async def recheck(limit: Limit = DEFAULT_LIMIT, dry_run: DryRun = False,
                      ids: Ids = None) -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("recheck", lambda c: commands.recheck(c, limit=limit, dry_run=dry_run, ids=ids or ()))

    async def status() -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("status", commands.status)

    async def inbox(all: ShowAll = False) -> Annotated[CallToolResult, EnvelopeOut]:  # named like the CLI's --all
        return await run("inbox", lambda c: commands.inbox_view(c, show_all=all))

    async def show(id: CommentId) -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("show", lambda c: commands.show(c, id))

    async def mark(id: CommentId, triage: Triage) -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("mark", lambda c: commands.mark(c, id, triage))

    async def check() -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("check", commands.check)

    async def signals(reset: Reset = False) -> Annotated[CallToolResult, EnvelopeOut]:
        return await run("signals", lambda c: commands.signals_cmd(c, reset=reset))

    for fn, description, hints in ((scan, SCAN, spends), (recheck, RECHECK, spends), (status, STATUS, free),
                                   (inbox, INBOX, free), (show, SHOW, free), (check, CHECK, free), (mark, MARK, local),
                                   (signals, SIGNALS, local)):
        server.add_watcher_tool(fn, description=description, annotations=hints)
    return server


# ---- entry point -------------------------------------------------------------------------------------


def _parse(args: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="watcher-bridge mcp",
        description="Serve the watcher commands as MCP tools over stdio (for Codex and Claude Code).")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="Data directory [env WATCHER_DATA_DIR; default ./data].")
    parser.add_argument("--verbose", "-v", action="store_true", help="Log each request on stderr.")
    return parser.parse_args(list(args))


def _sdk_problem() -> str | None:
    """Why the SDK cannot serve, as the message to print; None when it can."""
    if _SDK_MISSING is None:
        return None
    # An mcp 1.x has no mcp.server.mcpserver: the same hint (the extra pins >= 2.3) upgrades it.
    return INSTALL_HINT.format(need=".".join(map(str, MIN_SDK))) + f"({_SDK_MISSING})\n"


def serve(args: list[str]) -> None:
    """Run ``watcher-bridge mcp [--data-dir DIR] [--verbose]`` until the client closes stdin.

    Raises ``SystemExit(2)`` with an install hint on stderr when the ``mcp`` extra is missing.
    """
    problem = _sdk_problem()
    if problem is not None:
        sys.stderr.write(problem)
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)
    options = _parse(args)
    # Logs go to stderr, plainly; configured before the SDK's own setup, which then keeps it.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO if options.verbose else logging.WARNING,
                        format="watcher-bridge mcp: %(levelname)s %(name)s: %(message)s")
    server = build_server(data_dir=options.data_dir, verbose=options.verbose)
    # The SDK's stdio transport writes protocol frames to a private duplicate of fd 1 and points
    # fd 1 itself at stderr while serving; the server's lifespan also keeps sys.stdout on stderr
    # (see _stdout_kept_for_protocol). A stray print anywhere cannot corrupt the protocol.
    server.run("stdio")
