"""The SDK's stdio client (``mcp.client.stdio.stdio_client``) with ``watcher-bridge mcp`` forked
from the worker's fork server (tests/_forkserver.py) instead of exec'd.

An exec'd ``watcher-bridge mcp`` spends ~1.5 s of CPU importing the SDK before it answers
``initialize``; the fork server imports it once a worker. Everything of the client is the SDK's
own: its framing, its reader and writer tasks, its shutdown (stdin closed, then SIGTERM to the
process group after 2 s, then SIGKILL). Only the process it talks to comes from the fork server:
a real process of its own, a session and process-group leader as the SDK starts it, with the
environment, working directory and stderr the SDK gives it. ``WATCHER_TESTS_EXEC=1`` (or an
environment :func:`_forkserver.forkable` refuses) leaves the SDK's own ``anyio.open_process``.

The SDK starts its server in one place, ``_create_platform_compatible_process``; this module
wraps it once (the first import), and the wrapper forks only inside :func:`stdio_client`.
"""

from __future__ import annotations

import contextvars
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from signal import Signals
from typing import Any, TextIO

import anyio
import anyio.abc
import anyio.lowlevel
from _forkserver import ForkedProcess, forkable
from _proc import ENTRYPOINTS, EXEC, MODULES
from mcp.client import stdio as sdk_stdio
from mcp.client._transport import TransportStreams

_FORK = contextvars.ContextVar("_FORK", default=False)
_SDK_SPAWN = getattr(sdk_stdio, "_sdk_spawn", sdk_stdio._create_platform_compatible_process)


@asynccontextmanager
async def stdio_client(params: sdk_stdio.StdioServerParameters, errlog: TextIO) -> AsyncIterator[TransportStreams]:
    """``mcp.client.stdio.stdio_client(params, errlog)``, its server forked (see the module's docstring)."""
    token = _FORK.set(not EXEC)
    started = False
    try:
        async with sdk_stdio.stdio_client(params, errlog=errlog) as streams:  # the server starts here
            _FORK.reset(token)
            started = True
            yield streams
    finally:
        if not started:
            _FORK.reset(token)


async def _spawn(command: str, args: list[str], env: dict[str, str] | None = None, errlog: TextIO = sys.stderr,
                 cwd: Path | str | None = None) -> Any:
    if not (_FORK.get() and command == str(ENTRYPOINTS["bridge"]) and env is not None and forkable(env)):
        return await _SDK_SPAWN(command, args, env, errlog, cwd)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        proc = ForkedProcess([command, *args], MODULES["bridge"], env, None if cwd is None else str(cwd),
                             stdin=stdin_r, stdout=stdout_w, stderr=errlog, start_new_session=True, preload="mcp")
    except BaseException:
        os.close(stdin_w)
        os.close(stdout_r)
        raise
    finally:
        os.close(stdin_r)
        os.close(stdout_w)
    return _ForkedServer(proc, _PipeSend(stdin_w), _PipeReceive(stdout_r))


sdk_stdio._sdk_spawn = _SDK_SPAWN  # type: ignore[attr-defined]  # the SDK's own, for a second import
sdk_stdio._create_platform_compatible_process = _spawn


class _PipeReceive(anyio.abc.ByteReceiveStream):
    """The read end of a pipe, non-blocking, woken by the event loop when it is readable."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data

    async def aclose(self) -> None:
        _close(self)
        await anyio.lowlevel.checkpoint()


class _PipeSend(anyio.abc.ByteSendStream):
    """The write end of a pipe, non-blocking; a child that is gone is ``BrokenPipeError``, as for Popen."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view):]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)

    async def aclose(self) -> None:
        _close(self)
        await anyio.lowlevel.checkpoint()


def _close(stream: _PipeReceive | _PipeSend) -> None:
    if stream._fd >= 0:
        anyio.notify_closing(stream._fd)  # a task waiting on it gets ClosedResourceError, as anyio's own streams
        os.close(stream._fd)
        stream._fd = -1


class _ForkedServer(anyio.abc.Process):
    """What the SDK uses of ``anyio.open_process``'s process, for a forked child."""

    def __init__(self, proc: ForkedProcess, stdin: _PipeSend, stdout: _PipeReceive) -> None:
        self._proc = proc
        self._stdin = stdin
        self._stdout = stdout

    async def aclose(self) -> None:
        await self._stdin.aclose()
        await self._stdout.aclose()
        await self.wait()

    async def wait(self) -> int:
        while (code := self._proc.poll()) is None:
            await anyio.sleep(0.01)  # the fork server reaps it and says so; it polls every 10 ms too
        return code

    def terminate(self) -> None:
        self._proc.terminate()

    def kill(self) -> None:
        self._proc.kill()

    def send_signal(self, signal: Signals) -> None:
        self._proc.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    @property
    def stdin(self) -> anyio.abc.ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> anyio.abc.ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> None:
        return None

