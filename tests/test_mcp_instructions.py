"""SPEC §15.4: the server's instructions fit in what Claude Code keeps, with the rules first.

Claude Code 2.1.197 cuts a server's instructions (and each tool's description) at 2,048
characters of its JavaScript string, that is UTF-16 code units, and appends "… [truncated]";
tests/realclients checks that against the real client. Whatever an agent must not miss —
what to do with each exit code, never looping on recheck, grants being the user's — comes first.
"""

from __future__ import annotations

from bridge import mcp_text
from bridge.mcp_text import AGENT_ADVICE, DESCRIPTIONS, INSTRUCTIONS, INSTRUCTIONS_LIMIT


def _utf16_units(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def test_instructions_fit_in_2048_characters() -> None:
    """The whole text survives Claude Code's cut: at most 2,048 UTF-16 code units."""
    assert INSTRUCTIONS_LIMIT == 2048
    assert _utf16_units(INSTRUCTIONS) <= INSTRUCTIONS_LIMIT, _utf16_units(INSTRUCTIONS)


def test_exit_code_rules_never_loop_and_grant_come_first() -> None:
    """The exit-code advice, 'never call recheck in a loop' and 'grant is the user's decision'
    all stand in the first half, before the text says what devto-watcher is."""
    about = INSTRUCTIONS.index("devto-watcher triages")
    head = INSTRUCTIONS[:about]
    assert about <= INSTRUCTIONS_LIMIT // 2, about
    for code, advice in AGENT_ADVICE.items():
        assert f"exit_code {code}: {advice}" in head, code
    assert "exit_code 0" in head and "tool error that still carries it" in head
    assert "Never call recheck in a loop" in head
    assert "the user's decision (`watcher grant`, in a terminal), never an agent's" in head


def test_instructions_still_say_what_an_agent_needs_after_the_rules() -> None:
    """Nothing posted, status first, every tool named, the prompt, both resources, agent mode's claim/submit."""
    for words in ("Nothing is ever posted", "Start with `status`", "reply-session", "watcher://inbox",
                  "watcher://comment/{id}", 'provider "agent"', f"within {mcp_text.LEASE_MINUTES}"):
        assert words in INSTRUCTIONS, words
    for tool in ("scan", "recheck", "inbox", "show", "mark", "draft", "claim", "submit"):
        assert f"`{tool}`" in INSTRUCTIONS, tool


def test_every_tool_description_fits_too() -> None:
    """Claude Code cuts tool descriptions at the same 2,048: each one fits whole."""
    for name, text in DESCRIPTIONS.items():
        assert _utf16_units(text) <= INSTRUCTIONS_LIMIT, name
