"""``watcher-bridge mcp``: the watcher commands as MCP tools over stdio (SPEC §10).

Codex and Claude Code start this server themselves, with the environment the user grants it (Codex's
shell sandbox strips ``*KEY*`` variables and has no network, so calling the bridge as a shell
command cannot reach a real provider). Every tool hands the same core function the CLI uses to
:func:`watcher.commands.core.execute` and returns its envelope; nothing here decides anything about
attempts, locks or state.

What the server adds for agents (SPEC §10, "MCP, for agents"), all of it adaptation: progress
notifications from the pipeline's hooks (:class:`_Progress`), a typed ``result`` in each output
schema (generated from the models the commands return, :mod:`watcher.commands.envelope`), messages
reworded for MCP (:mod:`bridge.wording`), the resources ``watcher://inbox`` and
``watcher://comment/{id}``, and the ``reply-session`` prompt (:mod:`bridge.mcp_text`, with every
word an agent reads).

With ``WATCHER_PROVIDER=agent`` the agent is the model (SPEC §14): ``claim`` and ``submit`` hand
its arguments to :func:`watcher.commands.claims.claim` /
:func:`watcher.commands.claims.submit`, which reserve,
lease, validate and compare-and-swap under the pipeline lock; this module only passes them on.

The MCP SDK is an optional extra (``pip install 'devto-watcher[mcp]'``). This module is imported
only by ``watcher-bridge mcp``; ``watcher`` and the plain bridge never load the SDK.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

import watcher
from bridge import mcp_text
from bridge.mcp_handshake import MIN_SDK, SERVER_NAME, Opening, answers_request, first_message
from watcher.commands.core import Context
from watcher.commands.inbox import inbox_view
from watcher.commands.inbox import show as show_comment
from watcher.commands.registry import COMMANDS, RESULTS, envelope_schema
from watcher.commands.spec import REQUIRED, Command, Hints, Mcp, Run
from watcher.config import withhold_inherited_keys
from watcher.errors import EXIT_USAGE
from watcher.util.visible import json_safe, visible

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
    from mcp.types import CallToolResult, Tool, ToolAnnotations

    from bridge.mcp_runner import (
        _loggable,
        _progress_of,
        _Runner,
        _usage,
        installed_version,
    )
except ImportError as exc:  # the extra is missing, or an mcp 1.x without MCPServer
    _SDK_MISSING: ImportError | None = exc
else:
    _SDK_MISSING = None

log = logging.getLogger("bridge.mcp")
INSTRUCTIONS = mcp_text.INSTRUCTIONS
AGENT_ADVICE = mcp_text.AGENT_ADVICE

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
            # The client's first line, already read and perhaps answered (bridge.mcp_handshake).
            self.opening: Opening | None = None
            self.parameters: dict[str, frozenset[str]] = {}
            self.unlisted: dict[str, Run] = {}

        async def run_stdio_async(self) -> None:
            """The SDK's stdio serving, told when stdin closes: the SDK itself waits for every
            running tool call first, so a batch would go on making calls for a client that is gone.
            Here the messages pass through a stream of our own, and the end of stdin starts the same
            going as a signal (SPEC §15.4)."""
            from mcp.server.stdio import stdio_server
            from mcp.shared._context_streams import create_context_streams
            from mcp.shared.message import SessionMessage

            async with stdio_server() as (read_stream, write_stream):
                passed, received = create_context_streams[SessionMessage | Exception](0)
                answers, sent = create_context_streams[SessionMessage](0)
                opening = self.opening

                async def forward() -> None:
                    async with passed:
                        if opening is not None and opening.line.strip():
                            await passed.send(first_message(opening.line))
                        async for message in read_stream:
                            await passed.send(message)
                    threading.Thread(
                        target=_going,
                        args=(self.run_command, signal.SIGHUP),
                        name="watcher-going",
                        daemon=True,
                    ).start()

                async def answer() -> None:
                    # The SDK's own answer to a request answered early is not sent twice.
                    skip = None if opening is None else opening.answered
                    async with write_stream, sent:
                        async for message in sent:
                            if skip is not None and answers_request(message, skip):
                                skip = None
                                continue
                            await write_stream.send(message)

                async with anyio.create_task_group() as group:
                    group.start_soon(forward)
                    group.start_soon(answer)
                    await self._lowlevel_server.run(
                        received,
                        answers,
                        self._lowlevel_server.create_initialization_options(),
                    )

        def add_watcher_tool(self, command: Command, mcp: Mcp) -> None:
            """The tool of one registry entry: its arguments, description and annotations."""
            run = mcp.run or command.run
            if not mcp.listed:
                self.unlisted[command.name] = run
                return
            fn = _tool_function(self.run_command, command.name, mcp, run)
            context = find_context_parameter(fn)
            self.parameters[command.name] = frozenset(
                p for p in inspect.signature(fn).parameters if p != context
            )
            self.add_tool(
                fn,
                name=command.name,
                description=mcp.description,
                annotations=_annotations(mcp.hints),
            )

        async def list_tools(self) -> list[Tool]:
            # The tools return CallToolResult (the envelope, also on errors), so the SDK derives no
            # output schema; each tool's is generated from the model its command returns, the one
            # the envelope dumps (watcher/commands/envelope.py).
            # What the model reads on every session, the input schema, loses pydantic's titles
            # (each the argument's own name again): tests/test_mcp_startup.py.
            return [
                t.model_copy(
                    update={
                        "input_schema": _untitled(t.input_schema),
                        "output_schema": envelope_schema(t.name)
                        if t.name in RESULTS
                        else t.output_schema,
                    }
                )
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
            unlisted = self.unlisted.get(name)
            if unlisted is not None:
                # A command that is no tool answers in its own words (grant: SPEC §13.2).
                return await self.run_command.tool(name, lambda c: unlisted(c, arguments))
            if known is None:
                return _usage(
                    name,
                    f"there is no tool {name!r}; the tools are "
                    f"{', '.join(sorted(self.parameters))}",
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


def _untitled(schema: Any) -> Any:
    """``schema`` without pydantic's ``title`` strings and null defaults (left out is null)."""
    if isinstance(schema, list):
        return [_untitled(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {
        key: _untitled(value)
        for key, value in schema.items()
        if not (key == "title" and isinstance(value, str))
        and not (key == "default" and value is None)
    }


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


def _annotations(hints: Hints) -> ToolAnnotations:
    """A registry entry's hints as the SDK's annotations (a hint left unsaid stays unset)."""
    said = {
        "read_only_hint": hints.read_only,
        "destructive_hint": hints.destructive,
        "idempotent_hint": hints.idempotent,
        "open_world_hint": hints.open_world,
    }
    return ToolAnnotations.model_validate(
        {name: value for name, value in said.items() if value is not None}
    )


def _tool_function(runner: _Runner, name: str, mcp: Mcp, run: Run) -> Callable[..., Any]:
    """The function the SDK makes a tool of: its signature is the entry's arguments (the SDK derives
    the input schema from it), plus the request's context for a tool that reports progress."""

    async def tool(**arguments: Any) -> CallToolResult:
        ctx = arguments.pop("ctx", None)
        report = _progress_of(ctx) if ctx is not None else None
        return await runner.tool(name, lambda c: run(c, arguments), report=report)

    params = [
        inspect.Parameter(
            arg.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if arg.default is REQUIRED else arg.default,
            annotation=arg.type,
        )
        for arg in mcp.args
    ]
    if mcp.progress:
        params.insert(
            0, inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
        )
    tool.__signature__ = inspect.Signature(params, return_annotation=CallToolResult)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": CallToolResult}
    tool.__name__ = name
    return tool


def build_server(
    *,
    data_dir: Path | None = None,
    verbose: bool = False,
    version_on_disk: Callable[[], str | None] | None = None,
) -> WatcherServer:
    """The MCP server: a tool per listed registry command (no grant: SPEC §13.2), two resources,
    one prompt. Requires the SDK.

    ``version_on_disk``: how the server learns which release is installed now (tests pass their
    own)."""
    run = _Runner(data_dir, version_on_disk=version_on_disk or installed_version)
    server = WatcherServer(
        run,
        SERVER_NAME,
        version=watcher.__version__,
        instructions=INSTRUCTIONS,
        log_level="INFO" if verbose else "WARNING",
        lifespan=_stdout_kept_for_protocol,
    )
    for command in COMMANDS:
        if command.mcp is not None:
            server.add_watcher_tool(command, command.mcp)
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
        return await read("inbox", inbox_view)

    @server.resource(
        "watcher://comment/{id}",
        name="comment",
        title="One comment in full",
        mime_type="application/json",
        description=mcp_text.COMMENT_RESOURCE,
    )
    async def comment(id: str) -> str:
        return await read("show", lambda c: show_comment(c, id, prompt=False))


# ---- entry point ---------------------------------------------------------------------------------
def _sdk_problem() -> str | None:
    """Why the SDK cannot serve, as the message to print; None when it can."""
    if _SDK_MISSING is None:
        return None
    # An mcp 1.x has no mcp.server.mcpserver: the same hint (the extra pins >= 2.3) upgrades it.
    return INSTALL_HINT.format(need=".".join(map(str, MIN_SDK))) + f"({_SDK_MISSING})\n"


def serve(*, data_dir: Path | None, verbose: bool, opening: Opening | None = None) -> None:
    """Run ``watcher-bridge mcp [--data-dir DIR] [--verbose]`` until the client closes stdin.

    Raises ``SystemExit(2)`` with an install hint on stderr when the ``mcp`` extra is missing.
    ``opening``: the client's first line, already read (and perhaps answered) by
    :func:`bridge.mcp_handshake.open_session`.
    """
    problem = _sdk_problem()
    if problem is not None:
        sys.stderr.write(problem)
        sys.stderr.flush()
        raise SystemExit(EXIT_USAGE)
    # Logs go to stderr, plainly; configured before the SDK's own setup, which then keeps it.
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO if verbose else logging.WARNING,
        format="watcher-bridge mcp: %(levelname)s %(name)s: %(message)s",
    )
    # Its environment is the client's: a generic provider key there may be the client's own.
    withhold_inherited_keys()
    server = build_server(data_dir=data_dir, verbose=verbose)
    server.opening = opening
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
