"""SPEC §15.5: a long-lived ``watcher-bridge mcp`` notices that a newer release was installed under it
and says to restart it — in every tool result (a second text block), and in the error message when
the call failed — while the envelope keeps the shape its output schema promises.

The injected check runs the real server in this process; the installed package's own metadata is
checked against a real server process that sees a newer ``devto_watcher-*.dist-info`` appear on its
``sys.path`` after it started, as ``pip install -U`` would leave one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import ClientSession
from test_mcp_server import doc, run_memory_session, run_session

import watcher
from bridge.mcp_server import installed_version

pytestmark = pytest.mark.slow


def _notes(result: object) -> list[str]:
    return [block.text for block in result.content[1:] if block.type == "text"]  # type: ignore[attr-defined]


def test_a_newer_release_installed_under_the_server_makes_every_tool_say_restart(data_dir: Path) -> None:
    """Same version: results as always. Then 0.9.0 on disk: status carries a restart note, and a
    failed call's error message says it too; the envelopes are still the tools' envelopes."""
    on_disk = [str(watcher.__version__)]

    async def scenario(session: ClientSession) -> None:
        quiet = await session.call_tool("status", {})
        assert doc(quiet)["ok"] and _notes(quiet) == []
        on_disk[0] = "0.9.0"
        status = await session.call_tool("status", {})
        assert doc(status)["ok"] and doc(status)["command"] == "status"
        [note] = _notes(status)
        assert "0.9.0 has been installed" in note and f"started with {watcher.__version__}" in note and "restart the server" in note
        failed = doc(await session.call_tool("show", {"id": "nosuch"}))
        assert not failed["ok"] and "restart the server" in failed["error"]["message"]

    run_memory_session(data_dir, scenario, version_on_disk=lambda: on_disk[0])


def test_the_version_on_disk_is_the_installed_packages() -> None:
    """What the server compares is the installed distribution's version, as pip left it."""
    assert installed_version() == watcher.__version__


def _dist_info(root: Path, version: str) -> None:
    info = root / f"devto_watcher-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: devto-watcher\nVersion: {version}\n",
                                   encoding="utf-8")


def test_a_running_server_process_sees_a_release_installed_after_it_started(data_dir: Path, tmp_path: Path) -> None:
    """A real ``watcher-bridge mcp``: nothing said until a newer dist-info appears on its path, then
    the next tool result says which release is installed and to restart."""
    newer = tmp_path / "site"
    newer.mkdir()

    async def scenario(session: ClientSession) -> None:
        assert _notes(await session.call_tool("status", {})) == []
        _dist_info(newer, "9.0.0")
        [note] = _notes(await session.call_tool("status", {}))
        assert f"9.0.0 has been installed since this MCP server started with {watcher.__version__}" in note

    errlog = tmp_path / "server.err"
    run_session(data_dir, scenario, env={"PYTHONPATH": str(newer)}, errlog=errlog)
    assert "restart the server" in errlog.read_text(), errlog.read_text()
