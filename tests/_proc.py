"""Run ``watcher`` / ``watcher-bridge`` as real processes against a temp data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _forkserver import ForkedProcess

BIN = Path(sys.executable).parent
FAULTS = Path(__file__).parent / "_faults"
ENTRYPOINTS = {"cli": BIN / "watcher", "bridge": BIN / "watcher-bridge"}
MODULES = {"cli": "watcher.cli", "bridge": "bridge.cli"}  # whose ``main`` each console script runs
# Every process a real exec of its console script instead of a fork (tests/_forkserver.py).
EXEC = os.environ.get("WATCHER_TESTS_EXEC", "") == "1"


# The pipeline-lock wait of lock-busy tests other than the one that proves the real 5 s: long
# enough that a loaded machine still starts both processes inside it, short enough to be cheap.
SHORT_LOCK_WAIT_S = 1.0


def hook_env(*, fault: str | None = None, notices: Notices | None = None,
             lock_wait: float | None = None) -> dict[str, str]:
    """The variables that load tests/_faults/sitecustomize.py into a child and tell it what to do.

    Fault injection lives in the tests (SPEC §12): only a process started with these has it.
    """
    env = notices.env() if notices else {}
    if fault:
        env["WATCHER_TEST_FAULT"] = fault
    if lock_wait is not None:
        env["WATCHER_TEST_LOCK_WAIT"] = str(lock_wait)
    if env:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAULTS), os.environ.get("PYTHONPATH")]))
    return env


def env_for(data_dir: Path, extra: dict[str, str] | None = None, fault: str | None = None,
            notices: Notices | None = None, lock_wait: float | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WATCHER_", "DEVTO_")) and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["WATCHER_DATA_DIR"] = str(data_dir)
    env["NO_COLOR"] = "1"
    env.update(extra or {})
    env.update(hook_env(fault=fault, notices=notices, lock_wait=lock_wait))
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


def run(entry: str, *args: str, data_dir: Path, env: dict[str, str] | None = None, fault: str | None = None,
        timeout: float = 60, lock_wait: float | None = None) -> subprocess.CompletedProcess[str]:
    """``entry`` as a process of its own, to its end (see :func:`start` for how it is started)."""
    child_env = env_for(data_dir, env, fault, lock_wait=lock_wait)
    if EXEC:
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


def start(entry: str, *args: str, data_dir: Path, env: dict[str, str] | None = None, fault: str | None = None,
          notices: Notices | None = None, lock_wait: float | None = None) -> subprocess.Popen[str] | ForkedProcess:
    """``entry`` started as a process of its own, stdout and stderr piped, stdin /dev/null.

    Forked from the worker's fork server (tests/_forkserver.py: the libraries come preloaded,
    watcher itself is imported fresh in the child), or a real ``exec`` of the console script
    under ``WATCHER_TESTS_EXEC=1``. Either way a real process: its own pid, locks, signals.
    """
    child_env = env_for(data_dir, env, fault, notices, lock_wait)
    if EXEC:
        return subprocess.Popen(command(entry, *args), env=child_env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    return ForkedProcess(command(entry, *args), MODULES[entry], child_env)


def run_main(entry: str, *args: str, data_dir: Path, env: dict[str, str] | None = None,
             ) -> subprocess.CompletedProcess[str]:
    """:func:`run` in this process: the entry point's own ``main`` (``watcher.cli.main`` or
    ``bridge.cli.main``) with these arguments, its stdout, stderr and exit code captured.

    The whole front end runs (option parsing, the core, rendering, the exit code it raises);
    only the interpreter start (~0.35 s of CPU a process) is saved. For tests about the answer,
    not about the process: fault hooks, kills and concurrent runs need :func:`run`/:func:`start`.
    """
    from typer.testing import CliRunner

    from bridge.cli import main as bridge_main
    from watcher.cli import main as cli_main

    main = {"cli": cli_main, "bridge": bridge_main}[entry]
    # The variables env_for gives a child; the autouse fixture already cleared WATCHER_*, DEVTO_* and keys.
    with CliRunner().isolation(env={"WATCHER_DATA_DIR": str(data_dir), "NO_COLOR": "1", **(env or {})}) as (
            out, err, _both):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:  # how both front ends end, as the process would
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        return subprocess.CompletedProcess(command(entry, *args), code, out.getvalue().decode(),
                                           err.getvalue().decode())


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
