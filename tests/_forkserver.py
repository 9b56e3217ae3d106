"""Start the suite's ``watcher`` / ``watcher-bridge`` processes from a fork server.

Most of a ``watcher`` process's CPU (~0.3 s of ~0.45 s) goes on importing pydantic, httpx,
typer, rich and filelock before it does anything; the suite starts ~300 of them on 2 cores.
A fork server imports those libraries once, and forks a child per process asked for. The
child is a real process of its own (its own pid, file descriptors, locks and signals; SIGKILL
kills it as it kills any). The third-party libraries above come already imported (with what a
command imports of them on first use); none of them reads the environment at import. pydantic's
plugins (entry points of the group ``pydantic``) are looked up once in the server, from its
``sys.path`` and without ``PYDANTIC_DISABLE_PLUGINS`` (a process whose environment sets it is
exec'd instead, :func:`forkable`); a child whose ``PYTHONPATH`` holds a distribution looks them
up again.

watcher's own modules come preloaded too (:data:`WATCHER_PRELOAD`): importing them is another
0.09–0.15 s of CPU a child (pydantic building 60-odd model classes), and over the suite the
forked children's CPU went from 88 to 46 s with them preloaded (``WATCHER_TESTS_CPU``; the
test command's pytest 136.6 → 116.9 s, 2026-12-02). A child still sees what an exec'd process
sees, because none of them reads the environment, the standard streams or the clock at import:
settings are read when a command runs, and the one module that looks at its streams on import,
``watcher.cli.render`` (whether stdout is a terminal), is left out and imported in each child, as
the server checks (:data:`FRESH`). The fault hooks (tests/_faults/sitecustomize.py) still come
in the child, from its ``PYTHONPATH``, after it has the environment, working directory,
arguments and standard streams it was given; they patch watcher's classes, which every module
reaches the same way whether it was imported before them or after. A ``PYTHONPATH`` that holds
another ``watcher`` or ``bridge`` package (another tree's code) is exec'd instead
(:func:`forkable`).

The suite's worker scripts (``python tests/_seen_worker.py …``) come from the server too:
``module=None``, the script run as ``__main__`` with its directory first on ``sys.path``.

What a child sets up as the interpreter would have: ``sys.argv`` (the console script's path
first), ``sys.path`` (the script's directory, then ``PYTHONPATH``'s entries), ``sitecustomize``
from ``PYTHONPATH``, ``PYTHONDONTWRITEBYTECODE``, ``PYTHONUNBUFFERED``, the standard streams
(UTF-8, stdout block-buffered unless unbuffered, stderr line-buffered), ``atexit`` at the end,
and exit status 120 when flushing stdout fails at exit. What differs, seen from outside only:
``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ`` show the server's, as the kernel keeps
those from the last ``exec``; nothing in watcher or the suite reads them.

``watcher-bridge mcp`` processes ask for the MCP SDK too (``preload="mcp"``): importing
``mcp.server.mcpserver`` costs ~1.3 s of CPU (anyio, starlette, uvicorn, sse_starlette,
opentelemetry, cryptography, httpx2 come with it), and the suite starts about twenty such
servers. The server imports :data:`MCP_PRELOAD` on the first such request only, so a worker
that never starts one does not pay it. Measured on mcp 2.3.0: that import starts no thread and
opens no file, no logging handler is installed, and the only function defaults bound to
``sys.stderr`` are the stdio *client*'s (which a server never calls). It reads the environment
only for opentelemetry's ``OTEL_PYTHON_CONTEXT``, ``OTEL_PROPAGATORS`` and
``OTEL_PYTHON_TRACER_PROVIDER`` (in :data:`IMPORT_TIME_ENV`: the server imports with them
unset, and a process whose environment sets one is exec'd instead), and gettext's
``LANGUAGE``/``LC_*``/``LANG`` for uvicorn's command-line help texts, for which no message
catalog is installed (the same text in every locale). ``start_new_session`` makes the child a
session and process-group leader, as the SDK's stdio client starts its server.

``WATCHER_TESTS_EXEC=1`` in the environment of the pytest run makes every process a real
``exec`` of the console script again (:mod:`_proc` reads it), to check the two agree.

Run as a script, this module is the server: ``python _forkserver.py SOCKET`` (it ends when its
stdin closes, that is when the pytest worker that started it ends).
"""

from __future__ import annotations

import io
import json
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# The libraries every watcher process imports, preloaded by the server. httpx's own CLI stays
# out as watcher/__init__.py keeps it out.
PRELOAD = ("pydantic", "pydantic.types", "pydantic_core", "httpx", "httpcore", "h11", "typer", "typer.core",
           "typer.main", "rich.console", "rich.table", "filelock", "email.utils", "tomllib", "json", "ssl",
           # and what a command imports of them on first use (a TypeAdapter, typer's decorators,
           # the package metadata and resources: 50 ms of a forked `watcher status` otherwise)
           "pydantic.type_adapter", "pydantic.plugin._loader", "typer._adapters", "typer._click.decorators",
           "importlib.metadata", "importlib.resources.readers", "queue", "csv", "zipfile", "argparse", "html.parser",
           "pydantic.functional_serializers", "logging", "traceback")
# watcher's own modules: everything a command imports but the few it imports fresh (FRESH).
WATCHER_PRELOAD = ("watcher.cli.app", "bridge.cli", "watcher.pipeline.locked", "watcher.pipeline.calls",
                   "watcher.pipeline.gate", "watcher.util.threads", "watcher.store.files", "watcher.commands.results",
                   "watcher.providers.openai", "watcher.providers.anthropic", "watcher.providers.offline",
                   "watcher.source")
# Read something of the process at import (watcher.cli.render: whether stdout is a terminal), so never
# preloaded: a child imports them with its own streams. The server stops if the preload pulled one in.
FRESH = ("watcher.cli.render",)
# What ``watcher-bridge mcp`` imports of the SDK (bridge/mcp_server.py), preloaded on a request for it.
MCP_PRELOAD = ("anyio", "anyio.from_thread", "anyio.to_thread", "mcp.server.mcpserver",
               "mcp.server.mcpserver.exceptions", "mcp.server.mcpserver.utilities.context_injection",
               "mcp.server.stdio", "mcp.shared._context_streams", "mcp.shared.message", "mcp.types")
# Variables MCP_PRELOAD reads at import (opentelemetry, through mcp.shared._otel).
IMPORT_TIME_ENV = ("OTEL_PYTHON_CONTEXT", "OTEL_PROPAGATORS", "OTEL_PYTHON_TRACER_PROVIDER",
                   # names pydantic leaves out when it looks its plugins up (once, in the server)
                   "PYDANTIC_DISABLE_PLUGINS")
_LEN = struct.Struct("!I")
# The checkout whose watcher the server preloads (a PYTHONPATH entry naming it changes nothing).
_REPO = Path(__file__).resolve().parent.parent


def forkable(env: dict[str, str]) -> bool:
    """Whether a forked child sees what an exec'd process with ``env`` would: none of the variables
    the preloaded libraries read at import is set (the server imported them unset), and no
    ``PYTHONPATH`` entry holds a ``watcher`` or ``bridge`` of its own, which an exec'd process would
    import instead of the preloaded ones."""
    if any(name in env for name in IMPORT_TIME_ENV):
        return False
    return not any((Path(entry) / package / "__init__.py").exists() and Path(entry).resolve() != _REPO
                   for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry
                   for package in ("watcher", "bridge"))


# ---- the server (its own process) -------------------------------------------------------------------


def _preload(names: tuple[str, ...]) -> None:
    import gc
    import importlib

    for name in IMPORT_TIME_ENV:
        os.environ.pop(name, None)
    for name in names:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them on the first collection


def serve(path: str) -> None:
    from pydantic.plugin import _loader

    _preload(PRELOAD + WATCHER_PRELOAD)
    if pulled_in := [name for name in FRESH if name in sys.modules]:
        raise RuntimeError(f"preloading watcher imported {pulled_in}, which must be imported fresh in each child")
    _loader.get_plugins()  # the entry-point scan every child's first model would make (none installed)
    preloaded = {"": True, "mcp": False}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    os.write(1, b"ready\n")
    waiting: dict[int, socket.socket] = {}  # a child's pid -> the connection that asked for it
    while True:
        # Poll for ended children every 10 ms while there are any: no SIGCHLD handler to reset.
        readable, _, _ = select.select([listener.fileno(), 0], [], [], 0.01 if waiting else 1.0)
        if 0 in readable and not os.read(0, 64):
            listener.close()
            os.unlink(path)
            os.rmdir(os.path.dirname(path))
            return  # the pytest worker ended
        if listener.fileno() in readable:
            conn, _ = listener.accept()
            request, fds = _receive(conn)
            if not preloaded[request.get("preload", "")]:
                _preload(MCP_PRELOAD)
                preloaded[request["preload"]] = True
            pid = os.fork()
            if pid == 0:
                listener.close()
                for other in waiting.values():
                    other.close()
                conn.close()
                _child(request, fds)  # never returns
            for fd in fds:
                os.close(fd)
            conn.sendall(f"pid {pid}\n".encode())
            waiting[pid] = conn
        while waiting:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid)
            try:  # the exit status, and the CPU the child used (tests/conftest.py: WATCHER_TESTS_CPU)
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)} {usage.ru_utime + usage.ru_stime:.4f}\n".encode())
            except OSError:
                pass  # the test stopped listening
            conn.close()


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    while len(data) < _LEN.size or len(data) < _LEN.size + _LEN.unpack_from(data)[0]:
        more = conn.recv(1 << 16)
        if not more:
            raise EOFError("the request ended early")
        data += more
    (size,) = _LEN.unpack_from(data)
    return json.loads(data[_LEN.size:_LEN.size + size]), list(fds)


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked child: become the process asked for, run its ``main``, exit with its code."""
    import atexit
    import importlib
    import importlib.util
    import re
    import traceback

    code: int = 1
    try:
        if request.get("session"):
            os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        env = request["env"]
        sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
        unbuffered = bool(env.get("PYTHONUNBUFFERED"))
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")  # type: ignore[misc]
        sys.stdout = sys.__stdout__ = _stream(1, "strict", line_buffering=False, unbuffered=unbuffered)  # type: ignore[misc]
        sys.stderr = sys.__stderr__ = _stream(2, "backslashreplace", line_buffering=True, unbuffered=unbuffered)  # type: ignore[misc]
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [str(Path(script).parent), *extra, *[p for p in sys.path[1:] if p not in extra]]
        if any(Path(p).glob("*.dist-info") for p in extra):
            from pydantic.plugin import _loader

            _loader._plugins = None  # distributions the server did not see: pydantic looks its plugins up again
        if extra and importlib.util.find_spec("sitecustomize") is not None:
            importlib.import_module("sitecustomize")  # as site.py would have, at start-up
        if request["module"] is None:  # ``python SCRIPT ARGS``: the script runs as __main__
            import runpy

            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = _exit_code(exc.code)
        else:
            main = importlib.import_module(request["module"]).main
            sys.argv[0] = re.sub(r"(-script\.pyw|\.exe)?$", "", sys.argv[0])  # as the console script does
            try:
                code = _exit_code(main())
            except SystemExit as exc:
                code = _exit_code(exc.code)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - as the interpreter reports an uncaught exception
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - the interpreter reports these and exits all the same
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001 - a closed pipe, a full disk: as at the interpreter's exit
            if stream is sys.stdout:
                code = 120  # the interpreter's exit status when flushing stdout fails at exit
    os._exit(code & 0xFF)


def _exit_code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)
    return 1


def _stream(fd: int, errors: str, *, line_buffering: bool, unbuffered: bool) -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(raw if unbuffered else io.BufferedWriter(raw), encoding="utf-8", errors=errors,
                            line_buffering=line_buffering, write_through=unbuffered)


# ---- the client (in the pytest worker) ------------------------------------------------------------


class _Server:
    """The worker's fork server, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self.path = ""

    def socket_path(self) -> str:
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self.path = os.path.join(tempfile.mkdtemp(prefix="wfork"), "s")
                env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
                self._proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                              stdout=subprocess.PIPE, env=env, cwd="/")
                assert self._proc.stdout is not None
                line = self._proc.stdout.readline()
                if line != b"ready\n":
                    raise RuntimeError(f"the fork server did not start: {line!r}")
            return self.path


SERVER = _Server()
# CPU seconds of the forked children this process has seen end, as the server measured them.
CHILD_CPU = [0.0]


class ForkedProcess:
    """What :class:`subprocess.Popen` offers the suite, in text mode, for a process the fork server
    started. Its exit status comes from the server, which reaps it.

    ``module``: whose ``main`` the console script ``args[0]`` runs; ``None``: ``args[0]`` is a Python
    script, run as ``python SCRIPT ARGS`` runs it (as ``__main__``, its directory first on ``sys.path``).
    ``stdin``, ``stdout``, ``stderr``: ``subprocess.PIPE`` (a text file object, as Popen's),
    ``subprocess.DEVNULL``, ``None`` (this process's own), or a file descriptor or file object the
    child gets (the caller keeps it). ``preload="mcp"``: the server has the MCP SDK imported first (see the module's docstring).
    """

    def __init__(self, args: list[str], module: str | None, env: dict[str, str], cwd: str | None = None, *,
                 stdin: Any = subprocess.DEVNULL, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
                 start_new_session: bool = False, preload: str = "") -> None:
        self.args = args
        self.returncode: int | None = None
        child: list[int] = []
        to_close: list[int] = []  # the child's ends this process made: closed once the server has them
        ours: dict[str, int] = {}
        for name, spec in (("stdin", stdin), ("stdout", stdout), ("stderr", stderr)):
            reading = name == "stdin"
            if spec == subprocess.PIPE:
                r, w = os.pipe()
                child.append(r if reading else w)
                to_close.append(child[-1])
                ours[name] = w if reading else r
            elif spec == subprocess.DEVNULL:
                child.append(os.open(os.devnull, os.O_RDONLY if reading else os.O_WRONLY))
                to_close.append(child[-1])
            elif spec is None:  # inherited, as Popen's None: this process's own
                child.append(("stdin", "stdout", "stderr").index(name))
            else:
                child.append(spec if isinstance(spec, int) else spec.fileno())
        payload = json.dumps({"argv": args, "module": module, "env": env, "cwd": cwd or os.getcwd(),
                              "session": start_new_session, "preload": preload}).encode()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(SERVER.socket_path())
            socket.send_fds(self._conn, [_LEN.pack(len(payload)) + payload], child)
        finally:
            for fd in to_close:
                os.close(fd)
        self._status = b""
        self.pid = int(self._line("pid"))
        # As Popen(text=True) makes them: UTF-8 here (the locale's), stdin written through.
        self.stdin: Any = (io.TextIOWrapper(io.BufferedWriter(io.FileIO(ours["stdin"], "w")), encoding="utf-8",
                                            write_through=True) if "stdin" in ours else None)
        self.stdout: Any = self._reader(ours.get("stdout"))
        self.stderr: Any = self._reader(ours.get("stderr"))
        self._chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}

    @staticmethod
    def _reader(fd: int | None) -> io.TextIOWrapper | None:
        return None if fd is None else io.TextIOWrapper(io.BufferedReader(io.FileIO(fd, "r")), encoding="utf-8")

    def _line(self, word: str, timeout: float | None = None) -> str:
        self._conn.settimeout(timeout)
        while b"\n" not in self._status:
            more = self._conn.recv(256)
            if not more:
                raise RuntimeError(f"the fork server closed before saying {word!r}")
            self._status += more
        line, _, self._status = self._status.partition(b"\n")
        said, _, value = line.decode().partition(" ")
        assert said == word, line
        return value

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self._ended(self._line("exit", timeout=0))
            except (BlockingIOError, TimeoutError):
                return None
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self._ended(self._line("exit", timeout=timeout))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def _ended(self, said: str) -> None:
        code, cpu = said.split()
        self.returncode = int(code)
        CHILD_CPU[0] += float(cpu)
        self._conn.close()

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        """As Popen's: stdin closed, stdout and stderr read to their end (from their descriptors, so
        what an earlier ``readline`` buffered is not returned), then the exit status."""
        assert input is None, "the suite's processes get their input through stdin itself"
        if self.stdin is not None and not self.stdin.closed:
            try:
                self.stdin.close()
            except BrokenPipeError:
                pass  # the child is gone: as Popen.communicate
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for name in ("stdout", "stderr"):
                stream = getattr(self, name)
                if stream is not None and not stream.closed:
                    sel.register(stream.fileno(), selectors.EVENT_READ, name)
            while sel.get_map():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in sel.select(left):
                    chunk = os.read(key.fd, 1 << 16)
                    if chunk:
                        self._chunks[key.data].append(chunk)
                    else:
                        sel.unregister(key.fd)
                        getattr(self, key.data).close()
        self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self._text("stdout"), self._text("stderr")

    def _text(self, name: str) -> str:
        # As Popen(text=True) decodes: the locale's encoding (UTF-8 here), universal newlines.
        return b"".join(self._chunks[name]).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def __del__(self) -> None:
        for name in ("stdin", "stdout", "stderr"):
            stream = getattr(self, name, None)
            if isinstance(stream, io.IOBase):  # a test may have put what communicate() read in its place
                try:
                    stream.close()
                except OSError:
                    pass
        if hasattr(self, "_conn"):
            self._conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
