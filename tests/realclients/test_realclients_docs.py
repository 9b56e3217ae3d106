"""docs/agents.md: every client configuration it shows is one this lane loads."""

from __future__ import annotations

from _clients import PINNED
from _docs import CONFIG_WORDS, DOC, LOADED, blocks, loaded


def test_every_block_of_the_page_carries_a_lane_marker() -> None:
    """Each fenced block says what the lane does with it; names are unique; every extra names its base."""
    found = blocks()
    assert found, "docs/agents.md has no blocks"
    unmarked = [b.line for b in found if b.kind is None]
    assert not unmarked, f"blocks without a <!-- lane: … --> marker at lines {unmarked}"
    named = [b.name for b in found if b.kind in LOADED]
    assert None not in named and len(named) == len(set(named)), named
    for b in found:
        if b.kind == "codex-extra":
            assert b.on in loaded(), f"line {b.line}: on={b.on} names no block"


def test_no_client_configuration_hides_behind_example_or_shown() -> None:
    """A block that configures or runs a client is one of the loaded kinds, never example/shown."""
    for b in blocks():
        if CONFIG_WORDS.search(b.text) or b.lang == "toml":
            assert b.kind in LOADED, f"line {b.line}: a client configuration marked {b.kind!r}"


def test_the_page_opens_with_the_pinned_releases_it_was_checked_against() -> None:
    """The page's opening names the releases its statements were checked on, the lane's pinned
    ones among them (a new pin without a new check of the page fails here)."""
    opening = " ".join(DOC.read_text(encoding="utf-8").split("\n## ", 1)[0].split())
    assert f"Codex CLI {PINNED['codex']}" in opening, opening
    assert f"Claude Code {PINNED['claude']}" in opening, opening
