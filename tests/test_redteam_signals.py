"""SPEC §15.4: a Ctrl-C while ``watcher-bridge`` is still starting ends it quietly with 130.

The signal points are held at fifo gates, so the signal cannot miss its window however busy the
machine: ``bridge.cli`` (typer, the commands: a good part of a second) as it begins to import, and
for the MCP server the SDK's import once its ``initialize`` is answered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from _proc import BIN, env_for
from test_mcp_startup import GATED, _initialize, _Lines, _send


# ``watcher-bridge status`` as its console script starts it, held at a fifo gate as ``bridge.cli``
# begins to import (after the ``bridge`` package, which installs the quiet handler): the signal
# cannot arrive after the command already ended, however busy the machine.
IMPORT_GATED = """
import importlib.abc, sys
gate, script = sys.argv[1], sys.argv[2]

class Gate(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "bridge.cli":
            sys.meta_path.remove(self)
            sys.stderr.write("importing bridge.cli\\n")
            sys.stderr.flush()
            open(gate).close()  # until the test opens the gate (or a signal ends the process)
        return None

sys.meta_path.insert(0, Gate())
sys.argv = [script, "status"]
from bridge.cli import main
sys.exit(main())
"""


def test_sigint_while_the_bridge_imports_ends_quietly_with_130(data_dir: Path, tmp_path: Path) -> None:
    """SIGINT right after the bridge package loaded, while bridge.cli imports: exit 130, no
    traceback, nothing on stdout."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    proc = subprocess.Popen([sys.executable, "-c", IMPORT_GATED, str(gate), str(BIN / "watcher-bridge")],
                            env=env_for(data_dir), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    try:
        assert proc.stderr.readline() == "importing bridge.cli\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
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
