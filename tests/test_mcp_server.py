"""SPEC §10 ``watcher-bridge mcp``: a real MCP client session against the real server process.

A test about the process (a whole session over the files the CLI reads, stdout carrying only
protocol bytes, the SDK missing) starts ``watcher-bridge mcp`` as a subprocess on a temp data dir
and talks to it with the SDK's stdio client (or raw JSON-RPC lines where the bytes on stdout are
the point). A test about what the server answers runs the same server in this process, over the
SDK's in-memory transport (:func:`run_memory_session`): an exec'd server process costs about
1.5 s of CPU, most of it importing the SDK, and still ~0.2 s forked from the fork server with
the SDK preloaded (tests/_mcp_stdio.py).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from _forkserver import ForkedProcess
from _mcp_stdio import stdio_client
from _proc import BIN, env_for, envelope, run, start, write_export
from mcp import Client, ClientSession, StdioServerParameters
from mcp.types import CallToolResult

from bridge.mcp_server import build_server
from watcher.config import Paths
from watcher.models import InboxRecord
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow

BRIDGE = BIN / "watcher-bridge"
TOOLS = {"scan", "recheck", "status", "inbox", "show", "mark", "articles", "signals", "check",
         "claim", "submit", "eval", "usage", "draft"}  # never "grant" (SPEC §13.2)


# ---- helpers (test_mcp_lock.py uses them too) ----------------------------------------------------


@asynccontextmanager
async def mcp_session(data_dir: Path, env: dict[str, str] | None, errlog: TextIO,
                      args: Sequence[str] = ("mcp",)) -> AsyncIterator[ClientSession]:
    """An initialized client session with ``watcher-bridge mcp`` serving ``data_dir``.

    The SDK starts the server with only a few safe variables (PATH, HOME, …) plus ``env``, so
    nothing from the test runner's environment (keys, a real data dir) can leak in; the process
    comes from the worker's fork server with the SDK preloaded (tests/_mcp_stdio.py).
    """
    params = StdioServerParameters(command=str(BRIDGE), args=list(args),
                                   env={"WATCHER_DATA_DIR": str(data_dir), "NO_COLOR": "1", "WATCHER_PROVIDER": "offline",
                                        **(env or {})})
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def run_session(data_dir: Path, scenario: Callable[[ClientSession], Awaitable[None]],
                env: dict[str, str] | None = None, errlog: Path | None = None, args: Sequence[str] = ("mcp",)) -> None:
    """Run ``scenario`` against a fresh server (``watcher-bridge *args``); its stderr goes to ``errlog``."""
    with open(errlog or os.devnull, "w") as err:
        async def main() -> None:
            async with mcp_session(data_dir, env, err, args) as session:
                await scenario(session)

        anyio.run(main)


@asynccontextmanager
async def memory_session(data_dir: Path, env: dict[str, str] | None = None,
                         **server: Any) -> AsyncIterator[ClientSession]:
    """An initialized client session with the real server built in this process (no subprocess).

    The same :func:`bridge.mcp_server.build_server` the process serves, over the SDK's in-memory
    transport: every request and answer still crosses JSON-RPC framing and the client's
    validation; only the process (its start-up, its stdout and stderr) is not there. As in the
    process, the server reads its settings from the environment on every call, so ``env`` is set
    for the session (the autouse fixture already cleared every WATCHER_*/DEVTO_* variable and key).
    ``server``: keyword arguments for :func:`build_server`.
    """
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {"WATCHER_DATA_DIR": str(data_dir), "NO_COLOR": "1", "WATCHER_PROVIDER": "offline",
                            **(env or {})}.items():
            patch.setenv(name, value)
        # mode="legacy": the initialize handshake, over in-memory streams, as the stdio client does.
        async with Client(build_server(**server), mode="legacy") as client:
            yield client.session


def run_memory_session(data_dir: Path, scenario: Callable[[ClientSession], Awaitable[None]],
                       env: dict[str, str] | None = None, **server: Any) -> None:
    """Run ``scenario`` against a fresh in-process server (see :func:`memory_session`).

    For what the server answers — schemas, tool results, resources, prompts, progress, argument
    errors. Whatever is about the process itself (stdout carrying only protocol bytes, stderr
    logging, locks shared with CLI processes, start-up) uses :func:`run_session`.
    """
    async def main() -> None:
        async with memory_session(data_dir, env, **server) as session:
            await scenario(session)

    anyio.run(main)


def doc(result: CallToolResult) -> dict[str, Any]:
    """The envelope of a tool result; the text block always carries the same JSON."""
    assert result.content and result.content[0].type == "text"
    text_doc = json.loads(result.content[0].text)
    assert result.structured_content == text_doc
    assert result.is_error is (not text_doc["ok"])
    return text_doc


def record(data_dir: Path, cid: str) -> InboxRecord:
    loaded = FileStore(Paths(data_dir)).load_record(cid)
    assert loaded is not None
    return loaded


# ---- the session ----------------------------------------------------------------------------------


def test_session_lists_typed_tools_and_runs_status_scan_recheck_mark_on_the_cli_files(
        data_dir: Path, tmp_path: Path) -> None:
    """initialize, tools/list, then status, an offline scan, recheck and mark: structured envelopes
    over the same files the CLI reads, attempts recorded with entrypoint bridge."""
    export = write_export(tmp_path / "export.json", ["one", "two", "three"])

    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        limit = tools["recheck"].input_schema["properties"]["limit"]
        assert (limit["type"], limit["minimum"], limit["maximum"], limit["default"]) == ("integer", 1, 20, 5)
        assert tools["recheck"].input_schema["properties"]["ids"]["anyOf"][0] == {
            "type": "array", "items": {"type": "string", "pattern": "^[a-z0-9]{1,16}$"}}
        assert tools["mark"].input_schema["properties"]["triage"]["enum"] == ["replied", "ignored", "open"]
        assert set(tools["mark"].input_schema["required"]) == {"id", "triage"}
        assert "3 attempts per comment in total" in " ".join(tools["recheck"].description.split())
        assert "never the pipeline lock" in tools["mark"].description
        assert tools["status"].description.startswith("Free")
        assert tools["status"].annotations.read_only_hint is True
        assert "exit_code" in tools["scan"].output_schema["properties"]

        status = doc(await session.call_tool("status", {}))
        assert (status["ok"], status["command"], status["exit_code"], status["error"]) == (True, "status", 0, None)
        assert status["result"]["paths"]["data_dir"] == str(data_dir)
        scan = doc(await session.call_tool("scan", {"limit": 2, "source": str(export)}))
        assert (scan["ok"], scan["command"], scan["result"]["provider"]) == (True, "scan", "offline")
        assert [i["outcome"] for i in scan["result"]["items"]] == ["verdict", "verdict"]
        assert scan["result"]["remaining"] == 1
        recheck = doc(await session.call_tool("recheck", {}))
        assert recheck["ok"] and recheck["result"]["calls"] == 0  # offline verdicts never fail: nothing to retry
        marked = doc(await session.call_tool("mark", {"id": "one", "triage": "replied"}))
        assert marked["result"] == {"ids": ["one"], "triage": "replied", "states": {"one": "done"}}

    run_session(data_dir, scenario)
    attempt = record(data_dir, "one").attempts[0]
    assert (attempt.command, attempt.entrypoint, attempt.provider, attempt.outcome) == ("scan", "bridge", "offline", "ok")
    status = envelope(run("cli", "status", "--json", data_dir=data_dir))["result"]
    assert status["states"] == {"done": 2, "pending": 1, "failed": 0, "exhausted": 0, "reserved": 0, "baseline": 0,
                                "answered": 0, "edited": 0, "deleted": 0, "hidden": 0}
    assert status["triage"]["replied"] == 1


def test_bad_arguments_are_usage_tool_errors_and_the_server_keeps_serving(data_dir: Path) -> None:
    """limit 21, a string limit, a misspelt dry_run, a bad triage: is_error with an exit-2 envelope in MCP words."""
    async def scenario(session: ClientSession) -> None:
        for name, arguments, says in [("recheck", {"limit": 21}, "limit must be 1–20"),
                                      ("scan", {"limit": "many"}, "limit"),
                                      ("scan", {"dryrun": True}, "no argument dryrun"),
                                      ("mark", {"id": "abc", "triage": "done"},
                                       "triage must be one of replied, ignored, open")]:
            result = await session.call_tool(name, arguments)
            assert result.is_error is True
            bad = doc(result)
            assert (bad["ok"], bad["command"], bad["exit_code"], bad["error"]["kind"]) == (False, name, 2, "usage")
            assert says in bad["error"]["message"]
            assert "--" not in bad["error"]["message"]
        assert doc(await session.call_tool("status", {}))["result"]["comments"] == 0

    run_memory_session(data_dir, scenario)
    assert not (data_dir / "inbox").exists() or not any((data_dir / "inbox").iterdir())


# ---- stdout is the protocol channel ------------------------------------------------------------------

STRAY_HOOK = """
import os
from watcher.commands import reading as commands
from watcher.store.files import FileStore

_status = commands.status

def status(ctx):
    print("STRAY-PRINT")              # a stray print in watcher code ...
    os.write(1, b"STRAY-FD\\n")        # ... and a raw write to fd 1
    return _status(ctx)

commands.status = status
"""


def _raw_exchange(proc: subprocess.Popen[str] | ForkedProcess, messages: list[dict[str, Any]]) -> list[str]:
    """Send JSON-RPC lines one by one, wait for each request's answer; return every stdout line."""
    assert proc.stdin is not None and proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = proc.stdout
    threading.Thread(target=lambda: [lines.put(line) for line in stdout] + [lines.put(None)], daemon=True).start()
    seen: list[str] = []
    for message in messages:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        while "id" in message:
            line = lines.get(timeout=30)
            assert line is not None, "server closed stdout"
            seen.append(line)
            if json.loads(line).get("id") == message["id"]:
                break
    proc.stdin.close()
    proc.wait(timeout=30)
    while (line := lines.get(timeout=10)) is not None:
        seen.append(line)
    return seen


def test_stdout_carries_only_protocol_messages_even_when_code_prints(data_dir: Path, tmp_path: Path) -> None:
    """Stray prints and notices land on stderr; every stdout line is a JSON-RPC message."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(STRAY_HOOK)
    fresh = tmp_path / "not-yet"  # status says on stderr that it does not exist yet: a notice
    env = {"PYTHONPATH": str(hook), "WATCHER_PROVIDER": "offline"}
    export = write_export(tmp_path / "export.json", ["one"])
    with open(tmp_path / "stderr.txt", "w") as err:  # stdout buffered as Codex starts it (no PYTHONUNBUFFERED)
        proc = start("bridge", "mcp", data_dir=fresh, env=env, stdin=subprocess.PIPE, stderr=err, sdk=True)
        lines = _raw_exchange(proc, [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
            {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "scan", "arguments": {"limit": 1,
                                                                                        "source": str(export)}}},
        ])
    messages = [json.loads(line) for line in lines]
    assert all(m.get("jsonrpc") == "2.0" for m in messages)
    answers = {m["id"]: m for m in messages if "id" in m}
    assert answers[2]["result"]["structuredContent"]["command"] == "status"
    assert answers[3]["result"]["structuredContent"]["result"]["calls"] == 1
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "STRAY-PRINT" in stderr and "STRAY-FD" in stderr
    assert "does not exist" in stderr  # status's notice went to stderr too
    assert proc.returncode == 0


# ---- the SDK is optional -------------------------------------------------------------------------------

NO_MCP_HOOK = """
import sys

class _NoMcp:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp" or name.startswith("mcp."):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)", name=name)
        return None

sys.meta_path.insert(0, _NoMcp())
"""


def test_without_the_sdk_mcp_exits_2_with_the_install_hint(data_dir: Path, tmp_path: Path) -> None:
    """`watcher-bridge mcp` without the mcp package: how to install it on stderr, exit 2, stdout empty."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(NO_MCP_HOOK)
    proc = subprocess.run([str(BRIDGE), "mcp"], env=env_for(data_dir, {"PYTHONPATH": str(hook)}),
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "pip install 'devto-watcher[mcp]'" in proc.stderr
    assert "pip install '.[mcp]'" in proc.stderr
    assert proc.stdout == ""


def test_watcher_and_the_plain_bridge_never_import_the_sdk(data_dir: Path) -> None:
    """Importing watcher/bridge.cli and running `watcher status` load no mcp module."""
    code = ("import watcher.cli.app, watcher.commands.core, bridge.cli, sys; "
            "assert not [m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'mcp_types'))]")
    proc = subprocess.run([sys.executable, "-c", code], env=env_for(data_dir), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    timed = subprocess.run([sys.executable, "-X", "importtime", str(BIN / "watcher"), "status", "--json"],
                           env=env_for(data_dir), capture_output=True, text=True, timeout=60, check=False)
    assert timed.returncode == 0, timed.stderr
    imported = [line.rsplit("|", 1)[1].strip() for line in timed.stderr.splitlines() if line.startswith("import time:")]
    assert "watcher.commands.core" in imported
    assert not [m for m in imported if m == "mcp" or m.startswith(("mcp.", "mcp_types"))]


def test_the_mcp_server_needs_neither_typer_nor_the_cli(data_dir: Path) -> None:
    """The server reads the command registry, not the typer app: ``watcher-bridge mcp`` parses its
    options with typer (bridge/cli.py), but the server itself runs without the CLI's modules."""
    code = ("import bridge.mcp_server, sys; "
            "found = sorted(m for m in sys.modules if m.split('.')[0] == 'typer' or m.startswith('watcher.cli')); "
            "assert not found, found")
    proc = subprocess.run([sys.executable, "-c", code], env=env_for(data_dir), capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
