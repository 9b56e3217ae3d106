"""SPEC §15.4: a Ctrl-C while ``watcher-bridge`` is still starting ends it quietly with 130.

The signal points are read off the process itself: ``-X importtime`` prints a line as each module
finishes importing, so the line for the ``bridge`` package means ``bridge.cli`` (typer, the
commands: a good part of a second) is loading now; for the MCP server, its ``initialize`` answer
means the SDK is loading (held at a gate here, so the signal cannot miss that window).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from _proc import BIN, env_for
from test_mcp_startup import GATED, _initialize, _Lines, _send


def test_sigint_while_the_bridge_imports_ends_quietly_with_130(data_dir: Path) -> None:
    """SIGINT right after the bridge package loaded, while bridge.cli imports: exit 130, no
    traceback, nothing on stdout."""
    proc = subprocess.Popen([sys.executable, "-X", "importtime", str(BIN / "watcher-bridge"), "status"],
                            env=env_for(data_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("import time:") and line.rsplit("|", 1)[1].strip() == "bridge":
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert out == ""


def test_sigint_while_the_mcp_server_loads_the_sdk_ends_quietly_with_130(data_dir: Path, tmp_path: Path) -> None:
    """initialize answered, the SDK still loading: SIGINT ends the server with 130, no traceback,
    and nothing more on the protocol's stdout."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    proc = subprocess.Popen([sys.executable, "-c", GATED, str(gate)], env=env_for(data_dir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _send(proc, _initialize("2025-06-18"))
        lines = _Lines(proc)
        assert lines.next()["id"] == 1
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
        assert proc.stderr is not None and proc.stdout is not None
        err = proc.stderr.read().decode()
        assert "Traceback" not in err, err
        assert lines.buffer + proc.stdout.read() == b""  # stdout is the protocol: nothing after
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
