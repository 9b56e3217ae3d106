"""MCP's opening request answered before the MCP SDK is loaded (SPEC §10, "MCP, for agents").

Importing any of the SDK costs 1.1-1.5 s on a quiet machine (``mcp`` imports every protocol
revision's types), and a client waits for its first answer only so long: Claude Code gives an
``alwaysLoad`` server 5 s, and a busy machine took 3.4-4.4 s. So the server reads the client's
first line itself, straight from fd 0 (the SDK's transport reads the rest from the same pipe), and
when it is an ``initialize`` (revisions up to 2025-11-25) or a ``server/discover`` (2026-07-28) it
can answer, writes the answer the SDK would give; the SDK is loaded after. :mod:`bridge.mcp_server`
then hands the SDK that same line first, so the SDK's session knows its client and its protocol
era (its first request decides it), and drops the SDK's own answer to it (tests/test_mcp_startup.py
holds that both answers are the same, for every revision).

A ``server/discover`` carries its whole context in ``params._meta`` and leaves no state behind:
every later request of that revision carries the same envelope, and an ``initialize`` after it is
the SDK's to refuse, as it would without this module. Anything else as the first line (a ping, a
discover without the 2026 envelope, a request this module cannot vouch for) is left wholly to the
SDK: it answers it, only later.

No MCP SDK import here, nor anything heavier than the instructions' text.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

# The server's name in serverInfo, and the least SDK it serves with (bridge/mcp_server.py).
SERVER_NAME = "devto-watcher"
MIN_SDK = (2, 3)

# The revisions the SDK negotiates through ``initialize`` (mcp_types.version's
# HANDSHAKE_PROTOCOL_VERSIONS; tests/test_mcp_startup.py holds them equal): a client asking for
# one gets it, any other gets the newest of them — as the SDK's own negotiation does.
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# What the server offers (the SDK derives it from the tools, resources and prompt registered).
CAPABILITIES = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}

# The revisions served through ``server/discover``'s per-request envelope (mcp_types.version's
# MODERN_PROTOCOL_VERSIONS; tests/test_mcp_startup.py holds them equal). The SDK serves their change
# notifications on ``subscriptions/listen`` streams, so it offers them all there.
MODERN_VERSIONS = ("2026-07-28",)
MODERN_CAPABILITIES = {
    "prompts": {"listChanged": True},
    "resources": {"listChanged": True, "subscribe": True},
    "tools": {"listChanged": True},
}
_META = "io.modelcontextprotocol/"
# A clientInfo's text fields (an Implementation's), checked here; any other is the SDK's to judge.
_CLIENT_TEXT = frozenset({"name", "version", "title", "description", "websiteUrl"})

# A first line longer than this is no request worth answering early: the SDK reads it.
_MAX_LINE = 1 << 20


@dataclass(frozen=True)
class Opening:
    """The client's first line, and the id of the request answered here (``None``: the SDK answers
    that line itself)."""

    line: bytes
    answered: int | str | None = None


def read_line(fd: int = 0) -> bytes:
    """One line from ``fd``, read a byte at a time so nothing past it leaves the pipe."""
    chunks = bytearray()
    while len(chunks) < _MAX_LINE:
        byte = os.read(fd, 1)
        if not byte:
            break
        chunks += byte
        if byte == b"\n":
            break
    return bytes(chunks)


def answer(request: Any, *, name: str, version: str, instructions: str) -> dict[str, Any] | None:
    """The response the SDK would send to ``request``, or ``None`` when it is not an
    ``initialize`` or a ``server/discover`` whose parameters are plainly valid."""
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
        return None
    ident, params = request.get("id"), request.get("params")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or not isinstance(params, dict):
        return None
    method = request.get("method")
    if method == "initialize":
        result = _initialize(params, name=name, version=version, instructions=instructions)
    elif method == "server/discover":
        result = _discover(params, name=name, version=version, instructions=instructions)
    else:
        return None
    return None if result is None else {"jsonrpc": "2.0", "id": ident, "result": result}


def _is_client(client: Any) -> bool:
    """Whether ``client`` is plainly a valid clientInfo (an Implementation)."""
    return (
        isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


def _initialize(
    params: dict[str, Any], *, name: str, version: str, instructions: str
) -> dict[str, Any] | None:
    """The SDK's InitializeResult for these parameters (the revision negotiated as it does)."""
    asked = params.get("protocolVersion")
    if not (
        isinstance(asked, str)
        and isinstance(params.get("capabilities"), dict)
        and _is_client(params.get("clientInfo"))
    ):
        return None
    return {
        "capabilities": CAPABILITIES,
        "instructions": instructions,
        "protocolVersion": asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": name, "version": version},
    }


def _discover(
    params: dict[str, Any], *, name: str, version: str, instructions: str
) -> dict[str, Any] | None:
    """The SDK's DiscoverResult on a 2026-07-28 connection: its cache defaults (``ttlMs`` 0,
    ``private``) and the serverInfo it stamps on every result of that revision."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or meta.get(_META + "protocolVersion") not in MODERN_VERSIONS:
        return None
    # The SDK validates the envelope's every field; here only its shape, which Claude Code 2.1.332's
    # has: an envelope with icons or a capability that is not an object is the SDK's to answer
    # (tests/test_mcp_startup.py holds that it refuses both).
    client, offered = meta.get(_META + "clientInfo"), meta.get(_META + "clientCapabilities")
    if not (isinstance(offered, dict) and all(isinstance(v, dict) for v in offered.values())):
        return None
    if client is not None and not (
        _is_client(client)
        and all(k in _CLIENT_TEXT and isinstance(v, str) for k, v in client.items())
    ):
        return None
    return {
        "cacheScope": "private",
        "capabilities": MODERN_CAPABILITIES,
        "instructions": instructions,
        "resultType": "complete",
        "supportedVersions": list(MODERN_VERSIONS),
        "ttlMs": 0,
        "_meta": {_META + "serverInfo": {"name": name, "version": version}},
    }


def open_session(
    *, name: str, version: str, instructions: str, fd_in: int = 0, fd_out: int = 1
) -> Opening:
    """Read the client's first line and answer it when it is an ``initialize`` or a
    ``server/discover`` (see the module's docstring)."""
    line = read_line(fd_in)
    try:
        request = json.loads(line)
    except ValueError:
        return Opening(line)
    reply = answer(request, name=name, version=version, instructions=instructions)
    if reply is None:
        return Opening(line)
    data = (json.dumps(reply, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd_out, view) :]
    return Opening(line, reply["id"])


def sdk_installed(least: tuple[int, int] = MIN_SDK) -> bool:
    """Whether an MCP SDK of at least ``least`` is installed, known without importing it (the
    server answers nothing early when it cannot serve after)."""
    from importlib import metadata, util

    try:
        if util.find_spec("mcp") is None:
            return False
        found = tuple(int(part) for part in metadata.version("mcp").split(".")[:2])
    except (ImportError, ValueError, metadata.PackageNotFoundError):
        return False
    return found >= least


def first_message(line: bytes) -> Any:
    """The client's first line as the SDK's stdio transport would have passed it on (called once
    the SDK is loaded)."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # the SDK's transport passes a bad line on as the error, too
        return exc


def answers_request(message: Any, ident: int | str) -> bool:
    """Whether ``message`` is the response (or error) to request ``ident``."""
    return getattr(message.message, "id", None) == ident and not hasattr(message.message, "method")
