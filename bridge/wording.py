"""CLI words in messages, reworded for an MCP agent (SPEC §10: argument errors name MCP arguments).

The core speaks to a person at a terminal (``--limit``, "`watcher inbox --all` lists them"); an
agent calling tools has arguments and tools instead. The bridge rewords at its boundary only:
the core keeps one wording, and what the core decides is untouched. What stays a terminal
command stays as it is: `watcher grant` (the person's decision, SPEC §13.2), `watcher demo`,
`watcher scan --since` (no MCP argument), `watcher eval --set` (the labelled set, the person's: a
paid provider there spends calls, SPEC §15.6). tests/test_mcp_wording.py holds the table complete
against the messages the core really produces.

No MCP SDK import: the plain bridge may load this module.
"""

from __future__ import annotations

import re

# (CLI phrase, MCP phrase), applied in order; the specific forms before the general one.
REWORDINGS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(cli), mcp)
    for cli, mcp in (
        (
            r"--limit must be between 1 and (\d+) model calls per run, got (\S+)",
            r"limit must be 1–\1 (model calls this run), got \2",
        ),
        (r"\bmark takes one of ([a-z, ]+), got ", r"triage must be one of \1, got "),
        (r"`watcher inbox --all`", "the inbox tool with all=true"),
        (
            r"`watcher mark (\w+) (replied|ignored|open)`",
            r'the mark tool with id "\1" and triage "\2"',
        ),
        (r"run `watcher scan` first, or check the id", "run the scan tool first, or check the id"),
        (r"\(or pass --source FILE\)", "(or pass source: the path of a Forem-format export file)"),
        (r"\(or pass --source FILE to scan\)", "(or pass source to the scan tool)"),
        (r"`watcher signals --reset`", "the signals tool with reset=true"),
        (
            r"check --data-dir / WATCHER_DATA_DIR",
            "check WATCHER_DATA_DIR (or the server's --data-dir)",
        ),
        (
            r"`watcher (scan|recheck|status|inbox|show|mark|check|signals|claim|submit|eval)`",
            r"the \1 tool",
        ),
    )
)


def for_agents(message: str) -> str:
    """``message`` with every CLI option and MCP-reachable command named the MCP way."""
    for pattern, replacement in REWORDINGS:
        message = pattern.sub(replacement, message)
    return message
