"""Apprise is imported only when a message is sent (SPEC §16.1): it costs ~150 ms and pulls in
requests, markdown and PyYAML, which ``--help``, ``status`` and the MCP server's start must not pay."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the entry point with argv, then says whether apprise (or what only it pulls in) was imported.
_PROBE = """
import sys
from {module} import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
loaded = sorted(m for m in ("apprise", "yaml", "markdown", "requests") if m in sys.modules)
print("LOADED", ",".join(loaded), file=sys.stderr)
"""


def _loaded(tmp_path: Path, module: str, *argv: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WATCHER_", "DEVTO_"))}
    env.update(WATCHER_DATA_DIR=str(tmp_path), WATCHER_PROVIDER="offline",
               WATCHER_NOTIFY="ntfy://127.0.0.1:1/topic json://u:pw123456@127.0.0.1:1/x")
    done = subprocess.run([sys.executable, "-c", _PROBE.format(module=module), *argv], env=env,
                          capture_output=True, text=True, check=False, timeout=120)
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("LOADED")]
    return line.removeprefix("LOADED").strip()


@pytest.mark.parametrize("argv", [("status",), ("--help",), ("status", "--json")])
def test_cli_without_a_send_does_not_import_apprise(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """``watcher status`` and ``--help`` with WATCHER_NOTIFY set leave Apprise unimported."""
    assert _loaded(tmp_path, "watcher.cli", *argv) == ""


def test_mcp_server_start_does_not_import_apprise() -> None:
    """Importing the MCP server (what its start runs first) leaves Apprise unimported."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, bridge.mcp_server, watcher.notify.deliver; "
         "print('apprise' in sys.modules)"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    assert done.stdout.strip() == "False"


def test_the_probe_sees_apprise_when_it_is_imported(tmp_path: Path) -> None:
    """The check above can fail: a run that sends a message does load Apprise."""
    from _receivers import HttpReceiver

    receiver = HttpReceiver().start()
    try:
        code = (
            "import sys; from watcher.notify.targets import parse_targets; "
            "from watcher.notify.deliver import send_test; "
            f"send_test(parse_targets('json://127.0.0.1:{receiver.port}/x')); "
            "print('apprise' in sys.modules)"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, timeout=120)
    finally:
        receiver.stop()
    assert done.stdout.strip() == "True"
