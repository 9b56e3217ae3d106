"""``watcher-bridge mcp``: the watcher commands as MCP tools over stdio (SPEC §10).

Codex and Claude Code start this server themselves, with the environment the user grants it
(Codex's shell sandbox strips ``*KEY*`` variables and has no network, so calling the bridge as a
shell command cannot reach a real provider). Every tool hands the same core function the CLI
uses to :func:`watcher.commands.core.execute` and returns its envelope; nothing here decides anything
about attempts, locks or state.

What the server adds for agents (SPEC §10, "MCP, for agents"), all of it adaptation: progress
notifications from the pipeline's hooks (:class:`_Progress`), a typed ``result`` in each output
schema (generated from the models the commands return, :mod:`watcher.commands.envelope`), messages
reworded for MCP (:mod:`bridge.wording`), the resources ``watcher://inbox`` and
``watcher://comment/{id}``, and the ``reply-session`` prompt (:mod:`bridge.mcp_text`, with every
word an agent reads).

With ``WATCHER_PROVIDER=agent`` the agent is the model (SPEC §14): ``claim`` and ``submit`` hand
its arguments to :func:`watcher.commands.core.claim` / :func:`watcher.commands.core.submit`, which reserve,
lease, validate and compare-and-swap under the pipeline lock; this module only passes them on.

The MCP SDK is an optional extra (``pip install 'devto-watcher[mcp]'``). This module is imported
only by ``watcher-bridge mcp``; ``watcher`` and the plain bridge never load the SDK.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import inspect
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

import watcher
from bridge import mcp_text
from bridge.wording import for_agents
from watcher.commands import core as commands
from watcher.commands.core import Context, Envelope
from watcher.commands.envelope import RESULTS, envelope_schema
from watcher.commands.results import CommentRecord
from watcher.errors import EXIT_USAGE
from watcher.models import COMMENT_ID_SHAPE
from watcher.pipeline import DEFAULT_LIMIT, MAX_LIMIT, Hooks, ItemResult
from watcher.util.visible import json_safe, visible

MIN_SDK = (2, 3)
INSTALL_HINT = (
    "watcher-bridge mcp needs the MCP Python SDK (mcp >= {need}), an optional extra:\n"
    "    pip install 'devto-watcher[mcp]'      # from PyPI\n"
    "    pip install '.[mcp]'                  # from a checkout of devto-watcher\n"
)

try:
    import anyio
    import anyio.from_thread
    import anyio.to_thread
    from mcp.server.mcpserver import Context as ToolContext
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import (
        ResourceError,
        ResourceNotFoundError,
        ToolError,
        UnexpectedToolError,
    )
    from mcp.server.mcpserver.utilities.context_injection import find_context_parameter
    from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations
except ImportError as exc:  # the extra is missing, or an mcp 1.x without MCPServer
    _SDK_MISSING: ImportError | None = exc
else:
    _SDK_MISSING = None

log = logging.getLogger("bridge.mcp")
INSTRUCTIONS = mcp_text.INSTRUCTIONS
AGENT_ADVICE = mcp_text.AGENT_ADVICE
ID_PATTERN = f"^{COMMENT_ID_SHAPE}$"

# ---- parameters -------------------------------------------------------------------------------------
# Value checks (limit range, triage choice, id shape) are advertised in the schema but enforced by
# the same core functions as the CLI, so a bad value comes back as the core's usage envelope
# (exit_code 2, reworded for MCP by bridge.wording) rather than as a second validator's error.

Limit = Annotated[
    int,
    Field(
        description=f"Most model calls this run (1–{MAX_LIMIT}). Each call spends one of a comment's 3 attempts.",
        json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
    ),
]
DryRun = Annotated[
    bool,
    Field(
        description="Only plan: list what would be called. Takes no lock, writes nothing, calls no model."
    ),
]
Source = Annotated[
    str | None,
    Field(
        description="'devto' (needs DEVTO_USERNAME or DEVTO_API_KEY in the server's environment), or the path of a "
        "Forem-format export file on this machine. Omitted: dev.to; without a dev.to account that is "
        "exit_code 2. Not 'sample': the bundled demo is `watcher demo`, in a terminal."
    ),
]
IdItem = Annotated[str, Field(json_schema_extra={"pattern": ID_PATTERN})]
Ids = Annotated[
    list[IdItem] | None,
    Field(
        description="Only these comment ids. Omitted: every failed or interrupted comment, oldest first."
    ),
]
MoreIds = Annotated[
    list[IdItem] | None,
    Field(
        description="More comment ids to mark the same way. Every id is checked first: one unknown id marks nothing."
    ),
]
CommentId = Annotated[
    str,
    Field(
        description="Comment id (the dev.to id_code), as listed by inbox.",
        json_schema_extra={"pattern": ID_PATTERN},
    ),
]
Triage = Annotated[
    str,
    Field(
        description="replied: the author posted a reply · ignored: it needs no answer · open: back on the to-do list.",
        json_schema_extra={"enum": list(commands.TRIAGE_CHOICES)},
    ),
]
ShowAll = Annotated[
    bool,
    Field(description="List every known comment with its state, not only those needing a reply."),
]
WithPrompt = Annotated[
    bool, Field(description="Include the cached prompt sent to the model (about 2 KB).")
]
Since = Annotated[
    str | None,
    Field(
        description="Only comments created on or after this date (2026-11-01) or ISO time. Omitted: every comment."
    ),
]
Reset = Annotated[
    bool,
    Field(
        description="Recount the whole observation log from the start on purpose "
        "(only after the log was replaced or truncated)."
    ),
]
ClaimLimit = Annotated[
    int,
    Field(
        description=f"Most comments to claim (1–{MAX_LIMIT}). Each claim spends one of that comment's 3 attempts.",
        json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT},
    ),
]
AttemptNo = Annotated[
    int,
    Field(
        description="The attempt number (n) claim returned with this comment.",
        json_schema_extra={"minimum": 1},
    ),
]
# An object or its JSON text; what it must hold is the core's check (an invalid verdict counts),
# so the schema here only says which JSON types reach it — anything else is a usage error.
VerdictArgument = Annotated[
    dict[str, Any] | str,
    Field(
        description="Your verdict: a JSON object fitting the schema claim returned (needs_reply, category, priority, "
        "summary, reply_hint), or the JSON text of one."
    ),
]


# ---- running one command ------------------------------------------------------------------------------


def _notice(message: str) -> None:
    # stdout is the protocol channel: every human-readable word goes to stderr, where a
    # terminal may read it (SPEC §15.5: shown, never obeyed).
    sys.stderr.write(visible(message) + "\n")
    sys.stderr.flush()


def _tool_result(envelope: Envelope[Any]) -> CallToolResult:
    doc = envelope.to_json()
    # The text block is what a client shows its user (Claude Code prints it in the terminal):
    # the same JSON as the structured content, with the characters JSON leaves raw (C1, bidi
    # controls) as escapes, so it decodes to the same data and a terminal obeys none (SPEC §15.5).
    text = json_safe(json.dumps(doc, ensure_ascii=False))
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=doc,
        is_error=not envelope.ok,
    )


Report = Callable[[float, float | None, str | None], Coroutine[Any, Any, None]]


class _Progress:
    """A batch's progress, sent to the client from the worker thread the batch runs in.

    ``total`` is the calls planned (at most the limit); ``progress`` counts the items that made
    a call, so it never passes ``total`` — items that needed no call (a saved verdict, a comment
    left reserved by a dead run) report nothing, since progress must only increase.
    """

    def __init__(self, report: Report) -> None:
        self._report = report
        self._total: int | None = None
        self._done = 0
        self._calling: set[str] = set()

    def hooks(self) -> Hooks:
        return Hooks(on_planned=self._planned, on_call=self._calling.add, on_item=self._item)

    def _planned(self, total: int) -> None:
        self._total = total
        self._send(f"{total} model call{'s' if total != 1 else ''} planned")

    def _item(self, item: ItemResult) -> None:
        if item.id not in self._calling:
            return
        self._calling.discard(item.id)
        self._done += 1
        self._send(f"{item.id}: {item.outcome}" + (f" ({item.kind})" if item.kind else ""))

    def _send(self, message: str) -> None:
        # A courtesy, never a reason to stop: a client gone or a server shutting down must not
        # break a batch between an attempt's save and the next item (hooks run inside it).
        with contextlib.suppress(Exception):
            anyio.from_thread.run(self._report, self._done, self._total, message)


def installed_version() -> str | None:
    """The devto-watcher version installed on disk now, read afresh (``None``: not installed, e.g.
    run from a source tree on ``PYTHONPATH``)."""
    from importlib import metadata

    try:
        return metadata.version("devto-watcher")
    except metadata.PackageNotFoundError:
        return None


class _Runner:
    """Runs one command per call, in a worker thread, with a fresh :class:`Context`.

    It also carries the client's word to the batches (SPEC §15.4): a cancelled call starts no
    further model call, and a server that is going (SIGINT, SIGTERM, stdin closed) has every call
    in flight closed as interrupted before it exits. The pipeline decides what that means for
    each attempt; this only passes it on.

    A client keeps its server for a whole session, often days: after an upgrade the server still
    runs the code it loaded, while the CLI beside it writes the new release's files. So every call
    re-reads the installed version (``version_on_disk``, injected by tests) and, once it differs
    from the one this server started with, each tool result says to restart it (SPEC §15.5)."""

    def __init__(
        self,
        data_dir: Path | None,
        *,
        version_on_disk: Callable[[], str | None] = installed_version,
    ) -> None:
        self.data_dir = data_dir
        self._version_on_disk = version_on_disk
        self.started_as = version_on_disk()
        self._logged = False
        self.going: int | None = None  # the signal the server is going by, once it is
        self._running = 0
        self._idle = threading.Condition()

    def go(self, signum: int) -> None:
        """The server is going: running batches close their calls in flight as interrupted."""
        self.going = self.going or signum

    def wait_idle(self, timeout: float) -> bool:
        """Whether every running command ended within ``timeout`` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout)

    def restart_notice(self) -> str | None:
        """What to tell the agent when a newer release was installed under this server, else ``None``."""
        now = self._version_on_disk()
        if now is None or self.started_as is None or now == self.started_as:
            return None
        notice = (
            f"devto-watcher {now} has been installed since this MCP server started with {self.started_as}: "
            "restart the server (Codex: start a new session; Claude Code: /mcp, then reconnect watcher) so its "
            "tools run the installed release — until then files the new release wrote may be refused (exit 5)"
        )
        if not self._logged:
            log.warning("%s", notice)
            self._logged = True
        return notice

    async def __call__(
        self,
        command: str,
        fn: Callable[[Context], Any],
        *,
        report: Report | None = None,
    ) -> Envelope[Any]:
        # A fresh Context per call: settings (provider, keys, data dir) are re-read every time, as
        # a new CLI process would. The batch waits on model calls for minutes, so it runs in a
        # worker thread and the server keeps answering (mark, status) meanwhile.
        cancel = threading.Event()
        hooks = _Progress(report).hooks() if report is not None else Hooks()
        hooks = dataclasses.replace(hooks, cancelled=cancel.is_set, aborted=lambda: self.going)
        ctx = Context(entrypoint="bridge", data_dir=self.data_dir, notice=_notice, hooks=hooks)
        done = threading.Event()

        def work() -> Envelope[Any]:
            try:
                return commands.execute(command, ctx, fn)
            finally:
                done.set()

        with self._idle:
            self._running += 1
        try:
            envelope = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            # The client cancelled the call (its tool timeout, or the user): no further model call
            # is started; the calls already out finish and are saved. Nobody waits for the answer.
            cancel.set()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(done.wait)
            raise
        finally:
            with self._idle:
                self._running -= 1
                self._idle.notify_all()
        if envelope.error is not None:
            envelope.error = {**envelope.error, "message": for_agents(envelope.error["message"])}
        return envelope

    async def tool(
        self,
        command: str,
        fn: Callable[[Context], Any],
        *,
        report: Report | None = None,
    ) -> CallToolResult:
        envelope = await self(command, fn, report=report)
        notice = self.restart_notice()
        if notice is None:
            return _tool_result(envelope)
        # In the error a client always shows, and beside any result as a second text block: the
        # envelope itself (the structured content) keeps the shape its output schema promises.
        if envelope.error is not None:
            envelope.error = {
                **envelope.error,
                "message": f"{envelope.error['message']} ({notice})",
            }
        answer = _tool_result(envelope)
        answer.content.append(TextContent(type="text", text=f"note: {notice}"))
        return answer


def _usage(tool: str, message: str) -> CallToolResult:
    """A bad argument answers like the CLI's bad option: a usage envelope, exit_code 2."""
    return _tool_result(
        Envelope(False, tool, EXIT_USAGE, None, {"kind": "usage", "message": message})
    )


def _progress_of(ctx: ToolContext) -> Report | None:
    """How to report progress for this call, or None when the client asked for none."""
    meta = ctx.request_context.meta
    return ctx.report_progress if meta and meta.get("progress_token") is not None else None


SECRET_WORDS = ("key", "token", "secret", "password", "auth")


def _loggable(arguments: dict[str, Any]) -> str:
    """The arguments for a log line: no tool takes a secret, but a stray one is never logged."""
    shown = {
        name: "***"
        if any(w in name.lower() for w in SECRET_WORDS)
        else (value[:200] if isinstance(value, str) else value)
        for name, value in arguments.items()
    }
    return json_safe(json.dumps(shown, ensure_ascii=False, default=str))


if _SDK_MISSING is None:

    class WatcherServer(MCPServer):
        """MCPServer whose every answer is an envelope, with typed results, logged per request.

        The SDK rejects a wrongly typed argument or an unknown tool with bare text, and it silently
        drops an unknown argument, so a misspelt ``dryrun`` would spend real attempts. All three
        become a usage envelope.
        """

        def __init__(self, run: _Runner, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.run_command = run
            self.parameters: dict[str, frozenset[str]] = {}

        async def run_stdio_async(self) -> None:
            """The SDK's stdio serving, told when stdin closes: the SDK itself waits for every running
            tool call first, so a batch would go on making calls for a client that is gone. Here the
            messages pass through a stream of our own, and the end of stdin starts the same going as
            a signal (SPEC §15.4)."""
            from mcp.server.stdio import stdio_server
            from mcp.shared._context_streams import create_context_streams
            from mcp.shared.message import SessionMessage

            async with stdio_server() as (read_stream, write_stream):
                passed, received = create_context_streams[SessionMessage | Exception](0)

                async def forward() -> None:
                    async with passed:
                        async for message in read_stream:
                            await passed.send(message)
                    threading.Thread(
                        target=_going,
                        args=(self.run_command, signal.SIGHUP),
                        name="watcher-going",
                        daemon=True,
                    ).start()

                async with anyio.create_task_group() as group:
                    group.start_soon(forward)
                    await self._lowlevel_server.run(
                        received,
                        write_stream,
                        self._lowlevel_server.create_initialization_options(),
                    )

        def add_watcher_tool(self, fn: Callable[..., Any], *, annotations: ToolAnnotations) -> None:
            context = find_context_parameter(fn)
            self.parameters[fn.__name__] = frozenset(
                p for p in inspect.signature(fn).parameters if p != context
            )
            self.add_tool(
                fn,
                name=fn.__name__,
                description=mcp_text.DESCRIPTIONS[fn.__name__],
                annotations=annotations,
            )

        async def list_tools(self) -> list[Tool]:
            # The tools return CallToolResult (the envelope, also on errors), so the SDK derives no
            # output schema; each tool's is generated from the model its command returns, the one
            # the envelope dumps (watcher/commands/envelope.py).
            return [
                t.model_copy(update={"output_schema": envelope_schema(t.name)})
                if t.name in RESULTS
                else t
                for t in await super().list_tools()
            ]

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            began = time.monotonic()
            answer = await self._call(name, arguments, context)
            if isinstance(answer, CallToolResult) and isinstance(answer.structured_content, dict):
                log.info(
                    "%s %s -> exit_code %s in %.2f s",
                    name,
                    _loggable(arguments),
                    answer.structured_content.get("exit_code"),
                    time.monotonic() - began,
                )
            return answer

        async def _call(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
            known = self.parameters.get(name)
            if name == "grant":
                # The core refuses it for the bridge (SPEC §13.2); its own words say why.
                return await self.run_command.tool(
                    "grant", lambda c: commands.grant(c, str(arguments.get("id", "")))
                )
            if known is None:
                return _usage(
                    name,
                    f"there is no tool {name!r}; the tools are {', '.join(sorted(self.parameters))}",
                )
            unknown = sorted(set(arguments) - known)
            if unknown:
                return _usage(
                    name,
                    f"{name} has no argument {', '.join(unknown)} "
                    f"(it takes: {', '.join(sorted(known)) or 'none'})",
                )
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc, UnexpectedToolError) or not isinstance(
                    exc.__cause__, ValidationError
                ):
                    raise
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}"
                    for e in exc.__cause__.errors()
                )
                return _usage(name, f"bad arguments for {name}: {problems}")


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


def _without_prompt(fn: Callable[[Context], CommentRecord]) -> Callable[[Context], CommentRecord]:
    """``show`` without the cached prompt (about 2 KB an agent rarely needs)."""

    def shown(ctx: Context) -> CommentRecord:
        return fn(ctx).model_copy(update={"prompt": None})

    return shown


def build_server(
    *,
    data_dir: Path | None = None,
    verbose: bool = False,
    version_on_disk: Callable[[], str | None] = installed_version,
) -> WatcherServer:
    """The MCP server: twelve tools (no grant: SPEC §13.2), two resources, one prompt. Requires the SDK.

    ``version_on_disk``: how the server learns which release is installed now (tests pass their own)."""
    run = _Runner(data_dir, version_on_disk=version_on_disk)
    server = WatcherServer(
        run,
        "devto-watcher",
        version=watcher.__version__,
        instructions=INSTRUCTIONS,
        log_level="INFO" if verbose else "WARNING",
        lifespan=_stdout_kept_for_protocol,
    )
    spends = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
    )
    local = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    probes = ToolAnnotations(
        read_only_hint=True, open_world_hint=True
    )  # check asks the provider and dev.to
    marks = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    # claim spends an attempt per comment and submit closes one: local writes that add (never
    # remove), and never the same twice (a second submit is refused), with no network at all.
    agent = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )

    async def scan(
        ctx: ToolContext,
        limit: Limit = DEFAULT_LIMIT,
        dry_run: DryRun = False,
        source: Source = None,
    ) -> CallToolResult:
        if source == commands.SAMPLE:
            # SPEC §15.4: the sample's comments go to the demo's own data dir, which this server's
            # inbox and show never read; the person runs `watcher demo` instead.
            return _usage("scan", mcp_text.SAMPLE_REFUSED)
        return await run.tool(
            "scan",
            lambda c: commands.scan(c, limit=limit, dry_run=dry_run, source=source),
            report=_progress_of(ctx),
        )

    async def recheck(
        ctx: ToolContext, limit: Limit = DEFAULT_LIMIT, dry_run: DryRun = False, ids: Ids = None
    ) -> CallToolResult:
        return await run.tool(
            "recheck",
            lambda c: commands.recheck(c, limit=limit, dry_run=dry_run, ids=ids or ()),
            report=_progress_of(ctx),
        )

    async def status() -> CallToolResult:
        return await run.tool("status", commands.status)

    async def inbox(all: ShowAll = False) -> CallToolResult:  # named like the CLI's --all
        return await run.tool("inbox", lambda c: commands.inbox_view(c, show_all=all))

    async def show(id: CommentId, prompt: WithPrompt = False) -> CallToolResult:
        shown = functools.partial(commands.show, comment_id=id)
        return await run.tool("show", shown if prompt else _without_prompt(shown))

    async def mark(id: CommentId, triage: Triage, more_ids: MoreIds = None) -> CallToolResult:
        return await run.tool("mark", lambda c: commands.mark(c, [id, *(more_ids or ())], triage))

    async def articles() -> CallToolResult:
        return await run.tool("articles", commands.articles)

    async def check() -> CallToolResult:
        return await run.tool("check", commands.check)

    async def signals(reset: Reset = False) -> CallToolResult:
        return await run.tool("signals", lambda c: commands.signals_cmd(c, reset=reset))

    async def eval(
        since: Since = None,
    ) -> CallToolResult:  # the tool's name is the function's, as the CLI's
        return await run.tool("eval", lambda c: commands.evaluate(c, since=since))

    async def claim(limit: ClaimLimit = DEFAULT_LIMIT) -> CallToolResult:
        return await run.tool("claim", lambda c: commands.claim(c, limit=limit))

    async def submit(id: CommentId, n: AttemptNo, verdict: VerdictArgument) -> CallToolResult:
        return await run.tool("submit", lambda c: commands.submit(c, id, n, verdict))

    for fn, hints in (
        (scan, spends),
        (recheck, spends),
        (status, local),
        (inbox, local),
        (show, local),
        (articles, local),
        (check, probes),
        (mark, marks),
        (signals, marks),
        (claim, agent),
        (submit, agent),
        (eval, local),
    ):
        server.add_watcher_tool(fn, annotations=hints)
    _add_resources(server, run)
    server.prompt(
        name="reply-session",
        title="Draft replies to comments",
        description=mcp_text.REPLY_SESSION_DESCRIPTION,
    )(_reply_session)
    return server


def _reply_session(
    id: Annotated[str | None, Field(description="Start with this comment.")] = None,
) -> str:
    return mcp_text.reply_session(id)


def _add_resources(server: WatcherServer, run: _Runner) -> None:
    async def read(command: str, fn: Callable[[Context], Any]) -> str:
        began = time.monotonic()
        envelope = await run(command, fn)
        log.info(
            "resource %s -> exit_code %s in %.2f s",
            command,
            envelope.exit_code,
            time.monotonic() - began,
        )
        kind, message = (
            (envelope.error["kind"], envelope.error["message"]) if envelope.error else (None, None)
        )
        if envelope.exit_code == EXIT_USAGE:  # a bad or unknown id: the client's INVALID_PARAMS
            raise ResourceNotFoundError(visible(f"{message}"))
        if not envelope.ok:
            raise ResourceError(visible(f"exit_code {envelope.exit_code} ({kind}): {message}"))
        return json_safe(json.dumps(envelope.to_json()["result"], ensure_ascii=False, indent=1))

    @server.resource(
        "watcher://inbox",
        name="inbox",
        title="What needs a reply",
        mime_type="application/json",
        description=mcp_text.INBOX_RESOURCE,
    )
    async def inbox() -> str:
        return await read("inbox", commands.inbox_view)

    @server.resource(
        "watcher://comment/{id}",
        name="comment",
        title="One comment in full",
        mime_type="application/json",
        description=mcp_text.COMMENT_RESOURCE,
    )
    async def comment(id: str) -> str:
        return await read("show", _without_prompt(functools.partial(commands.show, comment_id=id)))


# ---- entry point -------------------------------------------------------------------------------------


def _parse(args: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="watcher-bridge mcp",
        description="Serve the watcher commands as MCP tools over stdio (for Codex and Claude Code).",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="Data directory [env WATCHER_DATA_DIR; default the user's data directory, "
        "~/.local/share/devto-watcher on Linux].",
    )
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
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if options.verbose else logging.WARNING,
        format="watcher-bridge mcp: %(levelname)s %(name)s: %(message)s",
    )
    server = build_server(data_dir=options.data_dir, verbose=options.verbose)
    runner = server.run_command
    for signum in (signal.SIGINT, signal.SIGTERM):
        # Off the event loop's thread: the batches still report progress through the loop while
        # they close their calls.
        signal.signal(
            signum,
            lambda number, _frame: threading.Thread(
                target=_going, args=(runner, number), name="watcher-going", daemon=True
            ).start(),
        )
    # The SDK's stdio transport writes protocol frames to a private duplicate of fd 1 and points
    # fd 1 itself at stderr while serving; the server's lifespan also keeps sys.stdout on stderr
    # (see _stdout_kept_for_protocol). A stray print anywhere cannot corrupt the protocol.
    server.run("stdio")
    # stdin closed (the client's session ended): the same as a signal, without one.
    _going(runner, signal.SIGHUP)


# How long a going server waits for its batches to close their calls in flight (each a durable
# write under the lock: milliseconds) before it leaves anyway: clients kill a server that has not
# gone within a second or so of SIGTERM (Claude Code: SIGINT, then SIGTERM 100 ms later).
_GOING_WAIT_S = 0.8


def _going(runner: _Runner, signum: int) -> None:
    """Leave within a second (SPEC §15.4): calls in flight are closed as interrupted, then exit.

    Called from a signal handler or after the transport ended. The exit is ``os._exit``: the SDK's
    stdin reader is a thread blocked in ``read()`` that a normal interpreter exit waits for."""
    runner.go(signum)
    runner.wait_idle(_GOING_WAIT_S)
    sys.stderr.flush()
    os._exit(0 if signum == signal.SIGHUP else 128 + signum)
