"""The configuration blocks of docs/agents.md, as the lane loads them.

Each fenced block of the page is preceded by a marker line ``<!-- lane: KIND [NAME] [on=BASE] -->``:

- ``codex-base NAME``    ``config.toml`` tables the lane writes into every Codex config (what
  keeps Codex on loopback: the lane's proxy checks it);
- ``codex-config NAME``  a ``config.toml`` fragment, written after the lane's fake provider;
- ``codex-add NAME``     a ``codex mcp add …`` command, run as written (it writes ``config.toml``);
- ``codex-extra NAME on=BASE``  lines for BASE's server table: what stands before the first
  ``[table]`` goes right under its ``args =`` line, the tables go at the end of the file;
- ``claude-mcp-json NAME``  a project's ``.mcp.json``;
- ``claude-add NAME``    a ``claude mcp add …`` command, run as written in the project;
- ``claude-settings NAME``  the project's ``.claude/settings.local.json``;
- ``claude-run NAME``    a ``claude -p …`` command line, run as written;
- ``example`` / ``shown``  output shown to the reader, a command that is not a client's config.

A block without a marker, or a client configuration marked ``example``/``shown``, fails the lane.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "agents.md"
LOADED = (
    "codex-base",
    "codex-config",
    "codex-add",
    "codex-extra",
    "claude-mcp-json",
    "claude-add",
    "claude-settings",
    "claude-run",
)
MARKER = re.compile(
    r"<!-- lane: (?P<kind>[a-z-]+)(?: (?P<name>[\w-]+))?(?: on=(?P<on>[\w-]+))? -->"
)
# What makes a block a client's configuration, whatever its marker says.
CONFIG_WORDS = re.compile(
    r"\[mcp_servers|mcpServers|codex mcp|claude mcp|claude -p|codex exec|enabledMcpjsonServers"
)


@dataclass(frozen=True)
class Block:
    kind: str | None
    name: str | None
    on: str | None
    lang: str
    text: str
    line: int


def blocks(path: Path = DOC) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        fence = re.match(r"\s*```(\w*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        indent = len(lines[start]) - len(lines[start].lstrip())
        while i < len(lines) and not re.match(r"\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        i += 1
        marker = MARKER.search(lines[start - 1]) if start else None
        found.append(
            Block(
                marker["kind"] if marker else None,
                marker["name"] if marker else None,
                marker["on"] if marker else None,
                fence.group(1),
                "\n".join(body) + "\n",
                start + 1,
            )
        )
    return found


def loaded(kind: str | None = None) -> dict[str, Block]:
    """The blocks the lane loads, by name (of one kind, or all)."""
    return {
        b.name: b
        for b in blocks()
        if b.kind in LOADED and b.name and (kind is None or b.kind == kind)
    }


def block(name: str) -> Block:
    found = loaded()
    assert name in found, (
        f"docs/agents.md has no lane block named {name!r} (it has {sorted(found)})"
    )
    return found[name]


def insert_under_args(config: str, server: str, extra: str) -> str:
    """``extra``'s leading lines right under ``args =`` of ``[mcp_servers.<server>]``, its tables at the end."""
    head, tables = _split_tables(extra)
    lines = config.rstrip("\n").splitlines()
    header = lines.index(f"[mcp_servers.{server}]")
    args = next(i for i in range(header + 1, len(lines)) if lines[i].startswith("args ="))
    lines[args + 1 : args + 1] = [line for line in head.splitlines() if line.strip()]
    return "\n".join(lines) + "\n" + ("\n" + tables if tables.strip() else "")


def _split_tables(extra: str) -> tuple[str, str]:
    lines = extra.splitlines()
    first = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    return "\n".join(lines[:first]), "\n".join(lines[first:]) + "\n"


def server_of(text: str) -> str:
    """The server a Codex block configures: ``[mcp_servers.NAME]`` or ``codex mcp add NAME``."""
    match = re.search(r"\[mcp_servers\.([\w-]+)\]", text) or re.search(r"mcp add ([\w-]+)", text)
    assert match, text
    return match.group(1)
