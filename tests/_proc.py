"""Run ``watcher`` / ``watcher-bridge`` in a test, as a user types it, against a temp data dir.

Two ways (tests/README.md says which when):

- :func:`run_main` in this process: the entry point's own ``main`` with the argv, its exit code,
  stdout, stderr and envelope; the pipeline's :class:`watcher.pipeline.Hooks` go in by ``hooks=``.
- :func:`run` / :func:`start` as a process of its own (forked from the worker's fork server, or
  exec'd): for what only a process has — its exit status, signals, locks, kills, and the fault
  hooks of tests/_faults/sitecustomize.py.

Both give the command the same environment: the test's, without ``WATCHER_*``, ``DEVTO_*`` or
provider keys, then ``WATCHER_DATA_DIR``, ``NO_COLOR`` and ``env``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _forkserver import ForkedProcess, forkable

if TYPE_CHECKING:
    from watcher.pipeline import Hooks

BIN = Path(sys.executable).parent
FAULTS = Path(__file__).parent / "_faults"
ENTRYPOINTS = {"cli": BIN / "watcher", "bridge": BIN / "watcher-bridge"}
MODULES = {"cli": "watcher.cli.app", "bridge": "bridge.cli"}  # whose ``main`` each console script runs
# Every process a real exec of its console script instead of a fork (tests/_forkserver.py).
EXEC = os.environ.get("WATCHER_TESTS_EXEC", "") == "1"
# One in-process command at a time: it has this process's standard streams and environment while
# it runs. Threads that run commands side by side (the reliability rig's cells) take turns; their
# commands are Python under one GIL anyway. env_for reads the environment under it too.
_THIS_PROCESS = threading.RLock()


# Besides WATCHER_* and DEVTO_*: what no command a test runs inherits from the shell.
_NOT_INHERITED = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PYTHONUNBUFFERED")

# The pipeline-lock wait of lock-busy tests other than the one that proves the real 5 s: long
# enough that a loaded machine still starts both processes inside it, short enough to be cheap.
SHORT_LOCK_WAIT_S = 1.0


# ---- a process of its own --------------------------------------------------------------------------


def hook_env(*, fault: str | None = None, notices: Notices | None = None, lock_wait: float | None = None,
             clock_shift: timedelta | None = None) -> dict[str, str]:
    """The variables that load tests/_faults/sitecustomize.py into a child and tell it what to do.

    Fault injection lives in the tests (SPEC §12): only a process started with these has it.
    ``clock_shift``: the child's runs see "now" that much later (``Hooks.clock``, as
    :func:`_fakes.clock.later` gives a run in this process).
    """
    env = notices.env() if notices else {}
    if fault:
        env["WATCHER_TEST_FAULT"] = fault
    if lock_wait is not None:
        env["WATCHER_TEST_LOCK_WAIT"] = str(lock_wait)
    if clock_shift is not None:
        env["WATCHER_TEST_CLOCK_SHIFT"] = str(clock_shift.total_seconds())
    if env:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAULTS), os.environ.get("PYTHONPATH")]))
    return env


def env_for(data_dir: Path | None, extra: Mapping[str, str] | None = None, fault: str | None = None,
            notices: Notices | None = None, lock_wait: float | None = None,
            clock_shift: timedelta | None = None) -> dict[str, str]:
    """The environment a command gets: this process's without ``WATCHER_*``, ``DEVTO_*`` or keys
    (what a shell could leak into a test) and without ``PYTHONUNBUFFERED`` (stdout buffered as
    when cron or an MCP client starts it), then the data dir, ``NO_COLOR``, ``extra`` and the hooks'."""
    with _THIS_PROCESS:  # not while run_main has this process's environment changed for its command
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("WATCHER_", "DEVTO_")) and k not in _NOT_INHERITED}
    if data_dir is not None:  # None: the default data dir (under the tests' own XDG_DATA_HOME)
        env["WATCHER_DATA_DIR"] = str(data_dir)
    env["NO_COLOR"] = "1"
    env.update(extra or {})
    env.update(hook_env(fault=fault, notices=notices, lock_wait=lock_wait, clock_shift=clock_shift))
    return env


class Notices:
    """The file a child's ``notify_at=<point>`` fault appends to: wait for a point, never sleep."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def env(self) -> dict[str, str]:
        return {"WATCHER_TEST_NOTIFY": str(self.path)}

    def resume(self) -> None:
        """Let every child held by ``pause_at=`` go on."""
        Path(f"{self.path}.resume").touch()

    def reached(self, point: str) -> bool:
        try:
            return point in self.path.read_text().splitlines()
        except FileNotFoundError:
            return False

    def wait(self, point: str, proc: subprocess.Popen[str] | None = None, timeout: float = 30.0) -> None:
        """Return once a child reached ``point``; fail at once if ``proc`` ends before it does."""
        deadline = time.monotonic() + timeout
        while not self.reached(point):
            if proc is not None and proc.poll() is not None:
                _out, err = proc.communicate()
                raise AssertionError(f"exited {proc.returncode} before reaching {point}: {err[-500:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no process reached {point} within {timeout} s")
            time.sleep(0.01)  # polling a file for an event, not waiting for one to happen


def command(entry: str, *args: str) -> list[str]:
    return [str(ENTRYPOINTS[entry]), *args]


def run(entry: str, *args: str, data_dir: Path | None, env: Mapping[str, str] | None = None, fault: str | None = None,
        timeout: float = 60, lock_wait: float | None = None,
        clock_shift: timedelta | None = None) -> subprocess.CompletedProcess[str]:
    """``entry`` as a process of its own, to its end (see :func:`start` for how it is started)."""
    child_env = env_for(data_dir, env, fault, lock_wait=lock_wait, clock_shift=clock_shift)
    if EXEC or not forkable(child_env):
        return subprocess.run(command(entry, *args), env=child_env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
    proc = ForkedProcess(command(entry, *args), MODULES[entry], child_env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.wait(), out, err)


def start(entry: str, *args: str, data_dir: Path | None, env: Mapping[str, str] | None = None,
          fault: str | None = None, notices: Notices | None = None, lock_wait: float | None = None,
          clock_shift: timedelta | None = None, stdin: Any = subprocess.DEVNULL, stderr: Any = subprocess.PIPE,
          sdk: bool = False) -> subprocess.Popen[str] | ForkedProcess:
    """``entry`` started as a process of its own, in text mode: stdout piped, ``stdin`` /dev/null
    and ``stderr`` piped unless given (a test that talks to ``watcher-bridge mcp`` over its stdin
    passes ``subprocess.PIPE``, and ``sdk=True`` to have the MCP SDK preloaded).

    Forked from the worker's fork server (tests/_forkserver.py: the libraries come preloaded,
    watcher itself is imported fresh in the child), or a real ``exec`` of the console script
    under ``WATCHER_TESTS_EXEC=1`` (or when the environment sets a variable a preloaded library
    read at import: :func:`_forkserver.forkable`). Either way a real process: its own pid,
    locks, signals.
    """
    child_env = env_for(data_dir, env, fault, notices, lock_wait, clock_shift)
    if EXEC or not forkable(child_env):
        return subprocess.Popen(command(entry, *args), env=child_env, stdin=stdin, stdout=subprocess.PIPE,
                                stderr=stderr, text=True)
    return ForkedProcess(command(entry, *args), MODULES[entry], child_env, stdin=stdin, stderr=stderr,
                         preload="mcp" if sdk else "")


def script(path: Path, *args: str, stdin: Any = subprocess.DEVNULL, stdout: Any = subprocess.PIPE,
           stderr: Any = subprocess.PIPE) -> subprocess.Popen[str] | ForkedProcess:
    """``python PATH ARGS`` (a worker script of the suite's: tests/_seen_worker.py, …) as a process
    of its own with this process's environment, text mode: forked from the worker's fork server,
    or a real ``exec`` of the interpreter under ``WATCHER_TESTS_EXEC=1``. For workers whose being
    separate processes is the point (locks and appends across processes, kills)."""
    with _THIS_PROCESS:  # not while run_main has this process's environment changed for its command
        env = dict(os.environ)
    if EXEC or not forkable(env):
        return subprocess.Popen([sys.executable, str(path), *args], stdin=stdin, stdout=stdout, stderr=stderr,
                                text=True)
    return ForkedProcess([str(path), *args], None, env, stdin=stdin, stdout=stdout, stderr=stderr)


# ---- in this process ------------------------------------------------------------------------------


class Answer(subprocess.CompletedProcess[str]):
    """A command's answer: ``returncode``, ``stdout`` and ``stderr`` as :func:`run` gives them, and
    ``envelope``, stdout parsed when it is one JSON document (``--json``, the bridge), else ``None``."""

    def __init__(self, args: list[str], returncode: int, stdout: str, stderr: str) -> None:
        super().__init__(args, returncode, stdout, stderr)
        try:
            doc = json.loads(stdout)
        except ValueError:
            doc = None
        self.envelope: dict[str, Any] | None = doc if isinstance(doc, dict) else None


def run_main(entry: str, *args: str, data_dir: Path | None, env: Mapping[str, str] | None = None,
             hooks: Hooks | None = None, stdin: str = "") -> Answer:
    """``entry`` (``"cli"``: ``watcher``, ``"bridge"``: ``watcher-bridge``) run with ``args`` in this
    process, through its own ``main``: option parsing, the core, rendering and the exit code it
    raises, with the environment :func:`run` gives a process and ``stdin`` as its standard input.

    ``hooks`` (:class:`watcher.pipeline.Hooks`) are what the front end hands the pipeline: a
    provider, store or source factory (e.g. :func:`_fakes.provider.in_process`), the clock
    (:func:`_fakes.clock.later`), progress callbacks. Everything else of the command runs for real.
    Only the interpreter start (~0.35 s of CPU a process) is saved; what is about the process
    itself — its exit status, signals, locks, kills, fault hooks — needs :func:`run`/:func:`start`.
    ``data_dir=None``: no WATCHER_DATA_DIR at all (the default data dir, SPEC §15.5).
    """
    from bridge.cli import main as bridge_main
    from watcher.cli.app import main as cli_main

    argv = command(entry, *args)
    with _THIS_PROCESS, _environment(env_for(data_dir, env)), _streams(stdin) as (out, err):
        try:
            if entry == "bridge":
                bridge_main(list(args), hooks=hooks)
            else:
                cli_main(list(args), hooks=hooks)
            code = 0
        except SystemExit as exc:  # how both front ends end, as the process would
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")  # the interpreter prints such a message and exits 1
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - as the interpreter reports an uncaught exception
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        return Answer(argv, code, _text(out), _text(err))


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` exactly ``env`` inside, as it was after (only the names that differ change)."""
    saved = dict(os.environ)
    for name in [n for n in os.environ if n not in env]:
        del os.environ[name]
    os.environ.update({k: v for k, v in env.items() if saved.get(k) != v})
    try:
        yield
    finally:
        for name in [n for n in os.environ if n not in saved]:
            del os.environ[name]
        os.environ.update({k: v for k, v in saved.items() if os.environ.get(k) != v})


@contextmanager
def _streams(stdin: str) -> Iterator[tuple[io.BytesIO, io.BytesIO]]:
    """The standard streams swapped for UTF-8 text over bytes, as a process's are when they are not
    a terminal (stderr with the interpreter's ``backslashreplace``)."""
    out, err = io.BytesIO(), io.BytesIO()
    saved = sys.stdin, sys.stdout, sys.stderr
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", errors="strict", write_through=True)
    sys.stderr = io.TextIOWrapper(err, encoding="utf-8", errors="backslashreplace", write_through=True)
    try:
        yield out, err
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved


def _text(buffer: io.BytesIO) -> str:
    return buffer.getvalue().decode("utf-8").replace("\r\n", "\n")


# ---- answers ---------------------------------------------------------------------------------------


def envelope(proc: subprocess.CompletedProcess[str] | tuple[str, str]) -> dict[str, Any]:
    out = proc[0] if isinstance(proc, tuple) else proc.stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"no JSON on stdout; stderr: {proc[1] if isinstance(proc, tuple) else proc.stderr}"
    return json.loads(out)


def write_export(path: Path, labels: list[str], *, article_id: int = 1201, comments_count: int | None = None) -> Path:
    """A Forem-format export with one comment per label; each text carries ``TAG:<label>``."""
    comments = [
        {"type_of": "comment", "id_code": label, "created_at": f"2026-05-14T09:{i:02d}:00Z",
         "body_html": f"<p>TAG:{label} How do I configure the cache for this, and does it work on Windows?</p>",
         "user": {"name": f"Reader {i}", "username": f"reader{i}"}, "children": []}
        for i, label in enumerate(labels)
    ]
    doc = {"username": "maya_writes", "articles": [{
        "id": article_id, "title": "Caching in Python", "url": "https://dev.to/maya_writes/caching-in-python",
        "comments_count": len(labels) if comments_count is None else comments_count, "comments": comments}]}
    path.write_text(json.dumps(doc))
    return path
