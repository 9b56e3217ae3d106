"""A wire tap between a client and ``watcher-bridge mcp``: ``python _tap.py LOG -- COMMAND ARGS…``.

Starts COMMAND with the tap's own stdin/stdout piped through, copies every line both ways
verbatim, and appends each to LOG as ``{"t", "dir": "in"|"out", "line"}`` (``in``: client →
server). It also logs how the session ended — ``{"event": "stdin_closed"}`` when the client
closed the pipe (passed on: the server's stdin is closed too), ``{"event": "signal", "signum"}``
for a SIGTERM/SIGINT (passed on to the server), ``{"event": "exit", "code"}`` — so a test can say
how each client stops its servers. ``TAP_DELAY_S`` in the environment delays the server's start
(a slow server, for the start-up checks).

Faithful to a SIGKILL too: the server is started with the kernel's parent-death signal set to
SIGKILL, so a client that kills the tap (Codex 0.165.0 and 0.171.0 SIGKILL their server's process
about 20 ms after a SIGTERM to its group) kills the server with it, as it would kill the server
itself. The ``exit`` record is then written by a watchdog, a process in a session of its own that
outlives the tap and logs ``{"event": "exit", "code": null, "killed": true}`` once the server is
gone. The start record also lists the names (never the values) of the variables the client gave
the server.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any


def main(argv: list[str]) -> int:
    log_path, command = argv[0], argv[argv.index("--") + 1 :]
    log_lock = threading.Lock()

    def log(doc: dict[str, Any]) -> None:
        with log_lock, open(log_path, "a", encoding="utf-8") as log_file:
            log_file.write(json.dumps({"t": time.time(), **doc}) + "\n")

    delay = float(os.environ.pop("TAP_DELAY_S", "0") or 0)
    if delay:
        log({"event": "delay", "seconds": delay})
        time.sleep(delay)
    child = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=_die_with_parent
    )
    subprocess.Popen(
        [sys.executable, __file__, "--watch", log_path, str(child.pid), str(os.getpid())],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The names of the variables the client gave the server (never their values).
    log({"event": "start", "pid": child.pid, "env": sorted(os.environ)})

    def forward(signum: int, _frame: Any) -> None:
        log({"event": "signal", "signum": signum})
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(
        target=_pump, args=(sys.stdin.buffer, child.stdin, "in", log), daemon=True
    ).start()
    out = threading.Thread(
        target=_pump, args=(child.stdout, sys.stdout.buffer, "out", log), daemon=True
    )
    out.start()
    code = child.wait()
    out.join(2)
    log({"event": "exit", "code": code})
    return code if code >= 0 else 128 - code


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the server's process, before exec: SIGKILL it when the tap dies (Linux prctl)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def watch(log_path: str, pid: int, tap: int, limit_s: float = 900.0) -> int:
    """Log the server's exit if the tap could not (it was killed first): once both the server
    ``pid`` and the ``tap`` are gone (or zombies nobody reaps), append an ``exit`` record unless
    the tap wrote one."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and (_running(pid) or _running(tap)):
        time.sleep(0.02)  # polling processes that are not ours to wait for
    if not any(r.get("event") == "exit" for r in read_log(log_path)):
        with open(log_path, "a", encoding="utf-8") as log_file:
            record = {"t": time.time(), "event": "exit", "code": None, "killed": True}
            log_file.write(json.dumps(record) + "\n")
    return 0


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _pump(source: IO[bytes], sink: IO[bytes], direction: str, log: Any) -> None:
    for line in iter(source.readline, b""):
        log({"dir": direction, "line": line.decode("utf-8", "replace").rstrip("\n")})
        try:
            sink.write(line)
            sink.flush()
        except (BrokenPipeError, ValueError):
            break
    if direction == "in":
        log({"event": "stdin_closed"})
    try:
        sink.close()
    except (BrokenPipeError, ValueError):
        pass


def read_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The tap's records; each protocol line also parsed into ``msg`` when it is JSON."""
    records = []
    try:
        with open(path, encoding="utf-8") as log_file:
            lines = log_file.readlines()
    except FileNotFoundError:
        return []
    for raw in lines:
        record = json.loads(raw)
        if "line" in record:
            try:
                record["msg"] = json.loads(record["line"])
            except ValueError:
                record["msg"] = None
        records.append(record)
    return records


if __name__ == "__main__":
    if sys.argv[1:2] == ["--watch"]:
        raise SystemExit(watch(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    raise SystemExit(main(sys.argv[1:]))
