"""SPEC §10: the MCP server answers ``initialize`` and ``server/discover`` before it loads the MCP
SDK, exactly as the SDK would, and what the model reads of ``tools/list`` stays small.

A client gives a server only so long (Claude Code: 5 s for an ``alwaysLoad`` server) and importing
the SDK alone takes 1.1-1.5 s; bridge/mcp_handshake.py answers the first line itself. How fast is
bench/run.py's ``mcp`` figure; here, what the answer is and that it never waits for the SDK.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _proc import BIN, env_for
from mcp import ClientSession
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from test_mcp_server import run_memory_session

from bridge.mcp_handshake import HANDSHAKE_VERSIONS, MODERN_VERSIONS

BRIDGE = BIN / "watcher-bridge"
# What the model reads of tools/list on every session: each tool's description and input schema.
# 6,000 bytes: each description says only what its tool must not get wrong, the instructions the
# rest (watcher/commands/tool_text.py).
MODEL_READS_LIMIT = 6000

# Holds the SDK's import until the test opens the gate (a fifo): the SDK is "still loading".
GATED = """
import sys
from pathlib import Path

GATE = sys.argv[1]

class _Gate:
    def find_spec(self, name, path=None, target=None):
        if name == "mcp.server":
            sys.meta_path.remove(self)
            Path(GATE).read_bytes()  # blocks until the test opens and closes the fifo
        return None

sys.meta_path.insert(0, _Gate())
sys.argv[1:] = ["mcp"]
from bridge.cli import main
main()
"""


def _compact(value: Any) -> str:
    """``value`` as JSON the way it goes over the wire."""
    return json.dumps(value, separators=(",", ":"))


def _initialize(version: str, ident: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }


# The 2026-07-28 per-request envelope, as Claude Code 2.1.332 sends it (its tap in the real-client
# lane, tests/realclients/_tap.py); ``None`` for clientInfo leaves that optional key out.
def _envelope(client: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}},
    }
    if client is not None:
        meta["io.modelcontextprotocol/clientInfo"] = client
    return {"_meta": meta}


def _discover(ident: int | str, client: dict[str, str] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": ident, "method": "server/discover", "params": _envelope(client)}


CLAUDE = {"name": "claude-code", "title": "Claude Code", "version": "2.1.332"}


class _Lines:
    """A server process's stdout, a line at a time, with a deadline against a hang."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)

    def next(self, deadline_s: float = 60.0) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            assert self.selector.select(deadline_s), "no line from the server"
            data = os.read(self.fd, 65536)
            assert data, "the server closed stdout"
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        answer: dict[str, Any] = json.loads(line)
        return answer


def _send(proc: subprocess.Popen[bytes], *messages: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()


def _spawn(argv: list[str], data_dir: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        env=env_for(data_dir),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


def _gated(data_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A server whose SDK import waits at a fifo gate, and the gate."""
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    return _spawn([sys.executable, "-c", GATED, str(gate)], data_dir), gate


def _open(gate: Path) -> None:
    """Let the gated server's SDK load."""
    with open(gate, "wb"):
        pass


def _close(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_the_revisions_answered_early_are_the_sdks_handshake_revisions() -> None:
    """The early answer offers exactly the revisions the SDK negotiates through initialize."""
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS


def test_initialize_is_answered_while_the_sdk_is_still_loading(
    data_dir: Path, tmp_path: Path
) -> None:
    """With `import mcp` held, initialize is answered; once it loads, tools/list follows, and the
    SDK's own answer to the same initialize is never sent a second time."""
    proc, gate = _gated(data_dir, tmp_path)
    try:
        lines = _Lines(proc)
        _send(proc, _initialize("2025-06-18"))
        first = lines.next()
        assert first["id"] == 1 and first["result"]["serverInfo"]["name"] == "devto-watcher"
        _open(gate)
        _send(
            proc,
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        )
        listed = lines.next()
        assert listed["id"] == 2 and listed["result"]["tools"]
    finally:
        _close(proc)


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, "2099-01-01"])
def test_the_early_answer_is_the_one_the_sdk_gives(data_dir: Path, version: str) -> None:
    """For every revision (and one the SDK does not know), the early answer equals the SDK's own:
    a ping as the first line leaves the initialize after it to the SDK. The newest revision's
    early answer comes from a server process (what bridge/cli.py hands the handshake), the
    others' from the handshake itself: one SDK load a case, not two."""
    late = _spawn([str(BRIDGE), "mcp"], data_dir)
    early = _spawn([str(BRIDGE), "mcp"], data_dir) if version == NEWEST_HANDSHAKE else None
    try:
        if early is not None:
            _send(early, _initialize(version))
        _send(late, {"jsonrpc": "2.0", "id": 0, "method": "ping"}, _initialize(version))
        answered_early = _Lines(early).next() if early is not None else _early(_initialize(version))
        sdk_lines = _Lines(late)
        assert sdk_lines.next()["id"] == 0
        assert answered_early == sdk_lines.next()
    finally:
        if early is not None:
            _close(early)
        _close(late)


NEWEST_HANDSHAKE = HANDSHAKE_PROTOCOL_VERSIONS[-1]


def _early(request: dict[str, Any]) -> Any:
    """The handshake's answer to ``request`` with what the server hands it (bridge/cli.py), as the
    JSON a client reads."""
    import watcher
    from bridge import mcp_handshake
    from bridge.mcp_text import INSTRUCTIONS

    answer = mcp_handshake.answer(
        request,
        name=mcp_handshake.SERVER_NAME,
        version=watcher.__version__,
        instructions=INSTRUCTIONS,
    )
    return json.loads(json.dumps(answer))


def test_the_revisions_discovered_early_are_the_sdks_modern_revisions() -> None:
    """The early discover answer offers exactly the revisions the SDK serves by envelope."""
    assert MODERN_VERSIONS == MODERN_PROTOCOL_VERSIONS


def test_discover_is_answered_while_the_sdk_is_still_loading(
    data_dir: Path, tmp_path: Path
) -> None:
    """With `import mcp` held, server/discover is answered; once it loads, tools/list follows, and
    the SDK's own answer to the same discover is never sent a second time."""
    proc, gate = _gated(data_dir, tmp_path)
    try:
        lines = _Lines(proc)
        _send(proc, _discover("server-discover-probe-1", CLAUDE))
        first = lines.next()
        assert first["id"] == "server-discover-probe-1"
        assert first["result"]["supportedVersions"] == ["2026-07-28"]
        _open(gate)
        _send(
            proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": _envelope(CLAUDE)}
        )
        listed = lines.next()
        assert listed["id"] == 2 and listed["result"]["tools"]
    finally:
        _close(proc)


@pytest.mark.parametrize("client", [CLAUDE, None], ids=["client_info", "no_client_info"])
def test_the_early_discover_answer_is_the_one_the_sdk_gives(
    data_dir: Path, tmp_path: Path, client: dict[str, str] | None
) -> None:
    """The discover answer sent while the SDK is held equals the SDK's own (a blank first line
    leaves the discover after it to the SDK), with or without the optional clientInfo."""
    early, gate = _gated(data_dir, tmp_path)
    late = _spawn([str(BRIDGE), "mcp"], data_dir)
    try:
        _send(early, _discover(7, client))
        answered_early = _Lines(early).next()
        _open(gate)
        assert late.stdin is not None
        late.stdin.write(b"\n")
        _send(late, _discover(7, client))
        assert answered_early == _Lines(late).next()
    finally:
        _close(early)
        _close(late)


@pytest.mark.parametrize(
    ("capabilities", "client"),
    [({"roots": "yes"}, CLAUDE), ({}, {**CLAUDE, "icons": "none"})],
    ids=["odd_capability", "odd_client_info"],
)
def test_a_discover_the_sdk_refuses_is_left_to_it(
    data_dir: Path, capabilities: dict[str, Any], client: dict[str, str]
) -> None:
    """An envelope whose fields the SDK refuses gets the SDK's refusal, not an early result."""
    request = _discover(7, client)
    request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities
    first = _spawn([str(BRIDGE), "mcp"], data_dir)
    late = _spawn([str(BRIDGE), "mcp"], data_dir)
    try:
        _send(first, request)
        assert late.stdin is not None
        late.stdin.write(b"\n")
        _send(late, request)
        answered = _Lines(first).next()
        assert "error" in answered and answered == _Lines(late).next()
    finally:
        _close(first)
        _close(late)


def test_an_initialize_after_an_early_discover_gets_the_sdks_answer(
    data_dir: Path, tmp_path: Path
) -> None:
    """A client falling back to initialize after a discover answered early is answered as the SDK
    answers it after its own discover (the connection serves 2026-07-28 either way)."""
    early, gate = _gated(data_dir, tmp_path)
    late = _spawn([str(BRIDGE), "mcp"], data_dir)
    try:
        early_lines, late_lines = _Lines(early), _Lines(late)
        _send(early, _discover("probe", CLAUDE))
        assert early_lines.next()["id"] == "probe"
        _open(gate)
        _send(early, _initialize("2025-11-25", ident=0))
        assert late.stdin is not None
        late.stdin.write(b"\n")
        _send(late, _discover("probe", CLAUDE), _initialize("2025-11-25", ident=0))
        assert late_lines.next()["id"] == "probe"
        assert early_lines.next() == late_lines.next()
    finally:
        _close(early)
        _close(late)


def test_what_the_model_reads_of_the_tools_fits_in_6_kb(data_dir: Path) -> None:
    """Descriptions and input schemas of every tool sum to at most 6,000 bytes; each keeps its output
    schema for the clients that use it."""

    async def scenario(session: ClientSession) -> None:
        tools = (await session.list_tools()).tools
        read = sum(len(_compact(t.description)) + len(_compact(t.input_schema)) for t in tools)
        assert read <= MODEL_READS_LIMIT, read
        assert all(t.output_schema for t in tools)

    run_memory_session(data_dir, scenario)
