"""Running one MCP tool call: a command through :func:`watcher.commands.core.execute` in a worker
thread, with its progress sent to the client, its envelope as the tool's result, and the client's
cancel and the server's going passed on to the batch (SPEC §15.4).

Imported by :mod:`bridge.mcp_server` only when the MCP SDK is installed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context as ToolContext
from mcp.types import CallToolResult, TextContent

from bridge.wording import for_agents
from watcher.commands.core import Context, Envelope, execute
from watcher.errors import EXIT_USAGE
from watcher.pipeline import Hooks, ItemResult
from watcher.util.visible import json_safe, visible

log = logging.getLogger("bridge.mcp")


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
        """What to tell the agent when a newer release was installed under this server, else
        ``None``."""
        now = self._version_on_disk()
        if now is None or self.started_as is None or now == self.started_as:
            return None
        notice = (
            f"devto-watcher {now} has been installed since this MCP server started with "
            f"{self.started_as}: "
            "restart the server (Codex: start a new session; Claude Code: /mcp, then reconnect "
            "watcher) so its "
            "tools run the installed release — until then files the new release wrote may be "
            "refused (exit 5)"
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
                return execute(command, ctx, fn)
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
