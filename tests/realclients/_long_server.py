"""A bare stdio MCP server whose instructions are ``LENGTH`` characters: ``python _long_server.py``.

Only for measuring how much of a server's instructions a client keeps (watcher's own stay under
the shortest cut, so they cannot show it). It answers ``initialize`` with the protocol revision
asked for, lists one tool, answers ``ping`` and the list requests with empty lists, and any other
request (a ``server/discover`` included, which sends a client back to ``initialize``) with
"method not found".
"""

from __future__ import annotations

import json
import sys
from typing import Any

LENGTH = 3000
LISTS = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}


def instructions(length: int = LENGTH) -> str:
    """``length`` characters in which every position can be told: ``[0000]`` ``[0006]`` …"""
    text = "".join(f"[{i:04d}]" for i in range(0, length, 6))
    return text[:length]


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "long", "version": "1"},
            "instructions": instructions(),
        }
    elif method == "tools/list":
        result = {
            "tools": [
                {
                    "name": "ping",
                    "description": "Answers pong.",
                    "inputSchema": {"type": "object", "properties": {}},
                }
            ]
        }
    elif method in LISTS:
        result = {LISTS[method]: []}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": ident,
            "error": {"code": -32601, "message": f"method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> int:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
