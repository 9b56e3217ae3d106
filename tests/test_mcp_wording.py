"""SPEC §10: MCP error messages name MCP arguments and tools, not CLI flags (bridge/wording.py).

The messages are the core's real ones, produced by the core functions the MCP tools call; the
bridge rewords them at its boundary. Commands only the person runs (`watcher grant`, `watcher
demo`, `watcher scan --since`) stay as they are.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from _fakes.records import emit as _emit
from _proc import run_main, write_export

from bridge.wording import for_agents
from watcher.config import Paths
from watcher.store import signals

ROOT = Path(__file__).resolve().parent.parent

# What may stay: commands only the person runs, in a terminal.
PERSON_ONLY = re.compile(r"`watcher (grant|demo|cron|watch|schedule|notify|migrate|forget)\b[^`]*`|`watcher (scan --since|eval --set) [^`]*`")


def cli_words_left(message: str) -> list[str]:
    """CLI options or `watcher …` commands an agent could not use, left in ``message``."""
    rest = PERSON_ONLY.sub("", message)
    return re.findall(r"(?<![\w-])--[a-z][a-z-]*|`watcher [^`]*`", rest)


OFFLINE = {"WATCHER_PROVIDER": "offline"}


def error_of(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """The core's message in the envelope `watcher-bridge ARGS` answers with (before MCP rewording)."""
    envelope = run_main("bridge", *args, data_dir=data_dir, env=env).envelope
    assert envelope is not None and envelope["error"] is not None, envelope
    return str(envelope["error"]["message"])


def test_limit_out_of_range_names_the_limit_argument(data_dir: Path) -> None:
    """`--limit must be between 1 and 20 …` becomes `limit must be 1–20 …, got 21`."""
    message = for_agents(error_of(data_dir, "recheck", "--limit", "21", env=OFFLINE))
    assert message.startswith("limit must be 1–20") and message.endswith("got 21")


def test_a_bad_triage_names_the_triage_argument(data_dir: Path) -> None:
    """`mark takes one of …` becomes `triage must be one of replied, ignored, open, got 'done'`."""
    assert for_agents(error_of(data_dir, "mark", "abc", "done")) == (
        "triage must be one of replied, ignored, open, got 'done'")


def test_every_core_message_an_agent_can_meet_is_left_without_cli_words(tmp_path: Path, data_dir: Path) -> None:
    """Usage and setup errors from scan, recheck, show, mark and signals: no `--flag`, no `watcher <tool>`."""
    messages = [
        error_of(data_dir, "scan", "--limit", "0", env=OFFLINE),
        error_of(data_dir, "recheck", "nosuch", env=OFFLINE),
        error_of(data_dir, "show", "nosuch", env=OFFLINE),
        error_of(data_dir, "show", "A!", env=OFFLINE),
        error_of(data_dir, "mark", "nosuch", "replied", env=OFFLINE),
        error_of(data_dir, "mark", "abc", "done", env=OFFLINE),
        error_of(data_dir, "scan", env=OFFLINE),  # no dev.to account, no source
        # no provider chosen at all
        error_of(data_dir, "scan", "--source", str(write_export(tmp_path / "e.json", ["a"]))),
    ]
    paths = Paths(data_dir)
    _emit(paths, "test.one", run="r", entrypoint="cli")
    signals.run_counter(paths)
    paths.observations.write_text("something else entirely\n")  # the log was replaced
    messages.append(error_of(data_dir, "signals"))

    for message in messages:
        assert cli_words_left(for_agents(message)) == [], message
    reworded = [for_agents(m) for m in messages]
    assert "the inbox tool with all=true" in reworded[2]
    assert "the check tool tests the setup" in reworded[7]
    assert "the signals tool with reset=true" in reworded[8]


# What a registry entry says only to a person at a terminal: the CLI's help of a command and its options.
CLI_HELP = frozenset({"summary", "help", "examples", "codes"})


def string_literals(path: Path) -> list[str]:
    """The strings in ``path``'s code (f-string parts included), without docstrings and without the
    CLI help of a registry entry (``Command(help=...)``, ``Param(help=...)``)."""
    tree = ast.parse(path.read_text())
    skipped = {id(node.body[0].value) for node in ast.walk(tree)
               if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
               and node.body and isinstance(node.body[0], ast.Expr)}
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in ("Command", "Param"):
            skipped |= {id(inner) for keyword in call.keywords if keyword.arg in CLI_HELP
                        for inner in ast.walk(keyword.value)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped]


def test_every_watcher_command_the_core_names_is_reworded_or_the_persons_own() -> None:
    """Each `watcher …` phrase in the core's messages is an MCP tool after rewording, or a command
    only the person runs (grant, demo, scan --since, eval --set; cron, watch, schedule and notify
    run unattended or at a terminal, never as a tool)."""
    # The terminal's own words (the CLI and its views), and the tool descriptions, written for agents
    # in the first place.
    cli = ROOT / "watcher" / "cli"
    skip = {ROOT / "watcher" / "commands" / "tool_text.py"}
    phrases = {m for path in (ROOT / "watcher").rglob("*.py") if cli not in path.parents and path not in skip
               for text in string_literals(path) for m in re.findall(r"`watcher [^`\n]+`", text)}
    assert phrases  # the scan found the core's phrases
    for phrase in sorted(phrases):
        assert cli_words_left(for_agents(phrase)) == [], phrase
