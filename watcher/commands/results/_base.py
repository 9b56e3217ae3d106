"""The base of every result model: closed to unknown fields, fields absent rather than null where
the schema says so (SPEC §10), and the literal types several results share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

if TYPE_CHECKING:
    from pydantic.config import JsonDict

# claim and submit: the agent's side of SPEC §14 (the agent, not watcher, makes the "call").
RunKind = Literal["scan", "recheck", "claim", "submit"]
# SPEC §7.1, plus the two a dry run reports instead of acting.
ItemOutcome = Literal[
    "verdict",
    "error",
    "interrupted",
    "deferred",
    "exhausted",
    "repaired",
    "skipped",
    "reserve_failed",
    "save_failed",
    "save_conflict",
    "not_started",
    "would_call",
    "would_skip",
]
ResultT = TypeVar("ResultT", bound=BaseModel)  # any command's result model


def _none(value: object) -> bool:
    return value is None


def _advertised(schema: JsonDict, cls: type[Any]) -> None:
    """A result model's JSON schema as a client is promised it (each MCP tool's output schema).

    ``required`` lists the keys that are always there: not those left out where they do not
    apply (``exclude_if``, or the model's ``sometimes_absent``).

    Extra keys are allowed (``additionalProperties: true``), though a model forbids them when a
    result is built: the official MCP client rejects a tool result that does not fit the schema,
    after the command ran — a scan has spent its attempts by then. Output and schema come from one
    model but down two paths (pydantic's schema of the fields; the serializer, custom for the batch
    summary), and :data:`watcher.commands.envelope.RESULTS` names each command's model by hand, so a
    mismatch stays possible and must never cost a client error. tests/test_mcp_results.py checks
    real output against a *closed* copy of each schema: that is where a mismatch is caught.
    """
    schema["additionalProperties"] = True
    fields = cls.model_fields
    absent = set(cls.sometimes_absent) | {
        name for name, info in fields.items() if info.exclude_if is not None
    }
    aliases = {fields[name].serialization_alias or fields[name].alias or name for name in absent}
    required = schema.get("required")
    if isinstance(required, list):
        schema["required"] = [key for key in required if key not in aliases]


class _Result(BaseModel):
    # extra="forbid": a misspelt key fails where the result is built (in the tests) instead of
    # reaching a client. defer_build: a run builds the validators of the few models it uses, as
    # the file formats do (watcher/models.py says what building them all cost). defaults_required:
    # a field with a default is still always in the output, unless _advertised says otherwise.
    model_config = ConfigDict(
        extra="forbid",
        defer_build=True,
        json_schema_extra=_advertised,
        json_schema_serialization_defaults_required=True,
    )

    sometimes_absent: ClassVar[frozenset[str]] = frozenset()


def _absent_if_none(description: str | None = None) -> Any:
    """A field left out of the output while it is None (not written as null)."""
    return Field(default=None, exclude_if=_none, description=description)
