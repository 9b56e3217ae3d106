"""Start the suite's ``watcher`` / ``watcher-bridge`` processes from a fork server.

Most of a ``watcher`` process's CPU (~0.3 s of ~0.45 s) goes on importing pydantic, httpx,
typer, rich and filelock before it does anything; the suite starts ~300 of them on 2 cores.
A fork server imports those libraries once, and forks a child per process asked for. The
child is a real process of its own (its own pid, file descriptors, locks and signals; SIGKILL
kills it as it kills any), and everything of watcher is imported fresh in it: the fault hooks
(tests/_faults/sitecustomize.py), the entry point's ``main`` and every watcher module, after
the child has the environment, working directory, arguments and standard streams it was given,
exactly as in a process started by ``exec``. Only the third-party libraries above come
already imported; none of them reads the environment at import.

What a child sets up as the interpreter would have: ``sys.argv`` (the console script's path
first), ``sys.path`` (the script's directory, then ``PYTHONPATH``'s entries), ``sitecustomize``
from ``PYTHONPATH``, ``PYTHONDONTWRITEBYTECODE``, ``PYTHONUNBUFFERED``, the standard streams
(UTF-8, stdout block-buffered unless unbuffered, stderr line-buffered), ``atexit`` at the end,
and exit status 120 when flushing stdout fails at exit. What differs, seen from outside only:
``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ`` show the server's, as the kernel keeps
those from the last ``exec``; nothing in watcher or the suite reads them.

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
           "typer.main", "rich.console", "rich.table", "filelock", "email.utils", "tomllib", "json", "ssl")
_LEN = struct.Struct("!I")


# ---- the server (its own process) -------------------------------------------------------------------


def serve(path: str) -> None:
    import gc
    import importlib

    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    for name in PRELOAD:
        importlib.import_module(name)
    gc.collect()
    gc.freeze()  # the children share these pages instead of copying them on the first collection
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
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid)
            try:
                conn.sendall(f"exit {os.waitstatus_to_exitcode(status)}\n".encode())
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
        if extra and importlib.util.find_spec("sitecustomize") is not None:
            importlib.import_module("sitecustomize")  # as site.py would have, at start-up
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


class ForkedProcess:
    """What :class:`subprocess.Popen` offers the suite (text mode, stdout and stderr piped), for a
    process the fork server started. Its exit status comes from the server, which reaps it."""

    def __init__(self, args: list[str], module: str, env: dict[str, str], cwd: str | None = None) -> None:
        self.args = args
        self.returncode: int | None = None
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        null = os.open(os.devnull, os.O_RDONLY)
        payload = json.dumps({"argv": args, "module": module, "env": env, "cwd": cwd or os.getcwd()}).encode()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(SERVER.socket_path())
            socket.send_fds(self._conn, [_LEN.pack(len(payload)) + payload], [null, out_w, err_w])
        finally:
            for fd in (null, out_w, err_w):
                os.close(fd)
        self._status = b""
        self.pid = int(self._line("pid"))
        self._fds = {"stdout": out_r, "stderr": err_r}
        self._chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self.stdout: Any = None  # read through communicate(), as the suite does
        self.stderr: Any = None

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
                self.returncode = int(self._line("exit", timeout=0))
            except (BlockingIOError, TimeoutError):
                return None
            self._conn.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = int(self._line("exit", timeout=timeout))
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._conn.close()
        return self.returncode

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        assert input is None, "the suite's processes read no stdin"
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for name, fd in self._fds.items():
                sel.register(fd, selectors.EVENT_READ, name)
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
                        os.close(key.fd)
                        del self._fds[key.data]
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
        for fd in getattr(self, "_fds", {}).values():
            try:
                os.close(fd)
            except OSError:
                pass
        if hasattr(self, "_conn"):
            self._conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
