"""docs/agents.md: every client configuration it shows is one this lane loads."""

from __future__ import annotations

from _docs import CONFIG_WORDS, LOADED, blocks, loaded


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
