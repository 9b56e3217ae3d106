"""Every command, once: the table the CLI, the envelope's schema, the renderer and the MCP
server read.

A command is its core function plus one entry listed here (STYLE rule 19).
``watcher/cli/app.py`` makes each entry a typer command (its options from ``params``, its help,
examples and exit codes); ``bridge/cli.py`` offers it as ``watcher-bridge <name>`` when
``bridge`` is set; the envelope's schema types ``result`` as ``result`` says
(:func:`envelope_schema`); the human renderer calls ``view``; ``bridge/mcp_server.py`` lists a
tool for it when ``mcp`` is set, with that description, those annotations and arguments.

To add a command, write one module and add one line here; ``watcher open ID``
(:mod:`watcher.commands.browse`) is one such:

1. The module holds all of it. The core function (``open_comment(ctx, comment_id)``) returns a
   result model defined beside it (extending :class:`watcher.commands.results.Result`) and raises a
   :mod:`watcher.errors` error for a failure (:func:`watcher.commands.core.execute` makes that
   the exit code and the envelope). The human view, ``view(result, screen)``, prints with
   ``screen.out`` (:mod:`watcher.commands.screen`; it imports anything of rich inside itself).
   The entry, ``OPEN = Command(...)`` (:class:`~watcher.commands.spec.Command`): the name, the
   one-line ``summary`` for ``watcher --help``, ``help``, ``examples``, the exit-code line
   ``codes``, ``result``, ``run`` (the parsed arguments, by
   :class:`~watcher.commands.spec.Param` name, to the core call), ``view`` as
   ``"watcher.commands.browse:view"``, its ``params``; ``bridge=False`` if an agent must not run
   it; an :class:`~watcher.commands.spec.Mcp` if the MCP server offers it as a tool.
2. The entry (``browse.OPEN``) in :data:`COMMANDS` below, where ``watcher --help`` lists it.

tests/test_registry.py checks every entry is whole.

Every command takes ``--json`` and the global ``--data-dir``/``--verbose``; they are not listed.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel

from watcher.commands import (
    browse,
    claims,
    cron,
    drafting,
    forget,
    inbox,
    migrate,
    notifying,
    person,
    reading,
    runs,
    usage,
    verdicts,
)
from watcher.commands.envelope import Envelope, EnvelopeError  # noqa: F401 (0.2.0 had it here)
from watcher.commands.spec import Command

COMMANDS: tuple[Command, ...] = (
    runs.DEMO,
    runs.SCAN,
    runs.RECHECK,
    cron.CRON,
    notifying.NOTIFY,
    notifying.SCHEDULE,
    claims.CLAIM,
    claims.SUBMIT,
    reading.STATUS,
    inbox.INBOX,
    inbox.SHOW,
    drafting.DRAFT,
    browse.OPEN,
    person.MARK,
    forget.FORGET,
    migrate.MIGRATE,
    reading.ARTICLES,
    person.CHECK,
    person.GRANT,
    verdicts.EVAL,
    person.SIGNALS,
    usage.USAGE,
)

_BY_NAME = {command.name: command for command in COMMANDS}
assert len(_BY_NAME) == len(COMMANDS), "two commands of one name"


def command(name: str) -> Command:
    """The entry named ``name`` (``KeyError`` for none)."""
    return _BY_NAME[name]


# Each command's result model, by name: what its envelope's ``result`` holds.
RESULTS: dict[str, type[BaseModel]] = {c.name: c.result for c in COMMANDS}


def envelope_schema(name: str) -> dict[str, Any]:
    """The JSON schema of command ``name``'s envelope, its ``result`` typed as its model."""
    model: type[BaseModel] = cast(Any, Envelope)[RESULTS[name]]
    return model.model_json_schema(mode="serialization")
