"""The command registry (watcher/commands/registry.py): every entry is whole, so the CLI, the envelope,
the renderer and the MCP server, which all read it, never meet a half-made command."""

from __future__ import annotations

import importlib

from watcher.commands.registry import COMMANDS, RESULTS, command


def test_every_entry_names_a_view_that_imports() -> None:
    """A command's view is a "module:function" that resolves to a function (the renderer imports it late)."""
    for entry in COMMANDS:
        module, _, name = entry.view.partition(":")
        assert callable(getattr(importlib.import_module(module), name, None)), entry.name


def test_every_result_model_refuses_unknown_fields() -> None:
    """Each result is a closed model (STYLE rule 5), so a misspelt field fails where it is built."""
    assert {name: model.model_config.get("extra") for name, model in RESULTS.items()} == dict.fromkeys(RESULTS, "forbid")


def test_every_entry_is_found_by_its_name_and_has_help_examples_and_codes() -> None:
    """`watcher NAME -h` has something to say for each: its help, at least one example, its exit codes."""
    for entry in COMMANDS:
        assert command(entry.name) is entry
        assert entry.summary and entry.help and entry.examples and entry.codes.startswith("0 "), entry.name


def test_the_mcp_tools_are_the_entries_that_list_one_and_never_grant() -> None:
    """A tool is listed only for an entry with a listed Mcp; grant never is one (SPEC §13.2)."""
    listed = {e.name for e in COMMANDS if e.mcp is not None and e.mcp.listed}
    assert "grant" not in listed and "open" not in listed
    assert all(e.mcp.description for e in COMMANDS if e.mcp is not None and e.mcp.listed)
