"""SPEC §10: the envelope every command's result travels in, and its JSON schema per command.

``--json``, ``watcher-bridge <command>`` and each MCP tool answer with one
``{"ok", "command", "exit_code", "result", "error"}`` document: :meth:`Envelope.to_json` dumps
it, with ``result`` the model the command returned (:mod:`watcher.commands.results`), and
:func:`watcher.commands.registry.envelope_schema` is the schema an MCP tool advertises for it,
generated from that model.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny
from typing_extensions import TypedDict  # pydantic needs this one, not typing's, before 3.12

from watcher.commands.results import ResultT
from watcher.errors import exit_code_legend


class EnvelopeError(TypedDict):
    kind: Annotated[
        str, Field(description="Stable error kind, e.g. usage, config, lock_busy, rate_limited.")
    ]
    message: Annotated[str, Field(description="What went wrong and what to do next.")]


class Envelope(BaseModel, Generic[ResultT]):
    """SPEC §10: the one JSON document ``watcher-bridge <command>`` and ``--json`` print.

    Built unparametrized at run time (its result is whichever model the command returned);
    ``Envelope[<model>]`` is only for the schema
    (:func:`watcher.commands.registry.envelope_schema`)."""

    model_config = ConfigDict(defer_build=True)

    ok: bool = Field(description="True when the command ran (exit_code 0).")
    command: str
    exit_code: int = Field(description=exit_code_legend())
    # SerializeAsAny: dumped as the model it is, not as the bare BaseModel the unparametrized
    # envelope declares (which would dump as {}).
    result: SerializeAsAny[ResultT] | None = Field(
        description="The command's result; null when it failed before "
        "producing one (a batch keeps its summary even when "
        "it stopped)."
    )
    error: EnvelopeError | None

    def __init__(
        self,
        ok: bool,
        command: str,
        exit_code: int,
        result: ResultT | None,
        error: EnvelopeError | None,
    ) -> None:
        super().__init__(ok=ok, command=command, exit_code=exit_code, result=result, error=error)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
