"""A wire tap between a client and ``watcher-bridge mcp``: ``python _tap.py LOG -- COMMAND ARGS…``.

Starts COMMAND with the tap's own stdin/stdout piped through, copies every line both ways
verbatim, and appends each to LOG as ``{"t", "dir": "in"|"out", "line"}`` (``in``: client →
server). It also logs how the session ended — ``{"event": "stdin_closed"}`` when the client
closed the pipe (passed on: the server's stdin is closed too), ``{"event": "signal", "signum"}``
for a SIGTERM/SIGINT (passed on to the server), ``{"event": "exit", "code"}`` — so a test can say
how each client stops its servers. ``TAP_DELAY_S`` in the environment delays the server's start
(a slow server, for the start-up checks).

Faithful except for one case: a SIGKILL of the tap alone leaves the server with its stdin
closed instead of killed. A kill of the process group reaches both. The start record also
lists the names (never the values) of the variables the client gave the server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any


def main(argv: list[str]) -> int:
    log_path, command = argv[0], argv[argv.index("--") + 1:]
    log_lock = threading.Lock()

    def log(doc: dict[str, Any]) -> None:
        with log_lock, open(log_path, "a", encoding="utf-8") as log_file:
            log_file.write(json.dumps({"t": time.time(), **doc}) + "\n")

    delay = float(os.environ.pop("TAP_DELAY_S", "0") or 0)
    if delay:
        log({"event": "delay", "seconds": delay})
        time.sleep(delay)
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    # The names of the variables the client gave the server (never their values).
    log({"event": "start", "pid": child.pid, "env": sorted(os.environ)})

    def forward(signum: int, _frame: Any) -> None:
        log({"event": "signal", "signum": signum})
        child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    assert child.stdin is not None and child.stdout is not None
    threading.Thread(target=_pump, args=(sys.stdin.buffer, child.stdin, "in", log), daemon=True).start()
    out = threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, "out", log), daemon=True)
    out.start()
    code = child.wait()
    out.join(2)
    log({"event": "exit", "code": code})
    return code if code >= 0 else 128 - code


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
    raise SystemExit(main(sys.argv[1:]))
