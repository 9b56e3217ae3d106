"""What a batch and an agent's turn return: scan, recheck (SPEC §7.1), claim, submit (SPEC §14)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    computed_field,
    model_serializer,
)

from watcher.commands.results._base import (
    ItemOutcome,
    RunKind,
    _absent_if_none,
    _Result,
)
from watcher.models import (
    Category,
    Priority,
    State,
    Verdict,
)

# ---- scan / recheck: the batch summary (SPEC §7.1) -----------------------------------------------


class ItemVerdict(_Result):
    """The part of a verdict a batch summary repeats; `show` has the whole verdict."""

    needs_reply: bool
    category: Category
    priority: Priority
    summary: str

    @classmethod
    def of(cls, verdict: Verdict) -> ItemVerdict:
        return cls(
            needs_reply=verdict.needs_reply,
            category=verdict.category,
            priority=verdict.priority,
            summary=verdict.summary,
        )


class ItemResult(_Result):
    """One comment the batch reached. Keys that do not apply are absent, not null."""

    id: str
    outcome: ItemOutcome = Field(
        description="verdict: the model answered · error: the attempt failed (kind says why) · "
        "skipped/deferred/exhausted/interrupted/repaired: no call for it this run · "
        "not_started: the batch stopped before it · would_call/would_skip: dry run"
    )
    kind: str | None = _absent_if_none("Error kind (malformed_json, overloaded, rate_limited, …).")
    message: str | None = _absent_if_none()
    attempts: int | None = _absent_if_none("Attempts recorded for this comment after this run.")
    verdict: ItemVerdict | None = _absent_if_none()

    def __init__(
        self,
        id: str,
        outcome: ItemOutcome,
        *,
        kind: str | None = None,
        message: str | None = None,
        attempts: int | None = None,
        verdict: ItemVerdict | None = None,
    ) -> None:
        # id and outcome positional: how the pipeline writes each of the items it reports.
        # BaseModel's own __init__, named: type checkers see _Result's as taking no fields.
        BaseModel.__init__(
            self,
            id=id,
            outcome=outcome,
            kind=kind,
            message=message,
            attempts=attempts,
            verdict=verdict,
        )


class Rejected(_Result):
    item: str | None = Field(
        description="The comment id when it is a safe id, else a short description."
    )
    message: str


class BatchSignals(_Result):
    """The observation counter after the batch: counts, or the warning that stopped it."""

    new_lines: int | None = _absent_if_none()
    invalid: int | None = _absent_if_none()
    warning: str | None = _absent_if_none()


class BatchResult(_Result):
    """What a scan or recheck reports: every item reached, or left unreached by a stop.

    The pipeline fills it in as the batch goes (:class:`watcher.pipeline.Batch` holds it as
    ``result``); the command returns it as it stands at the end."""

    sometimes_absent: ClassVar[frozenset[str]] = frozenset({"would_call", "signals"})

    command: RunKind
    dry_run: bool = False
    provider: str
    model: str
    limit: int
    planned: int = Field(0, description="Comments the batch looked at (callable or not).")
    calls: int = Field(0, description="Model calls made (each spent one attempt).")
    remaining: int = Field(
        0, description="Planned comments left for the next run because the limit was reached."
    )
    discovered: int = Field(0, description="New comments found by this scan.")
    articles: int | None = _absent_if_none("Scan only: articles the source listed for the account.")
    baseline: int = Field(
        0,
        description="Discovered comments older than the first scan's backlog window: never called.",
    )
    answered: int = Field(
        0, description="Comments the author had already answered on dev.to: never called."
    )
    for_agent: int = Field(
        0,
        description="Provider agent only (no model call is made): comments waiting for the "
        "agent's verdict; the claim tool hands them out.",
    )
    replied: list[str] = Field(
        default_factory=list,
        description="Comments marked replied because the author replied on dev.to.",
    )
    edited: list[str] = Field(
        default_factory=list,
        description="Known comments whose text changed on dev.to: "
        "judged again within their lifetime budget, unless "
        "you had replied or marked them (SPEC §15.2).",
    )
    gone: list[str] = Field(
        default_factory=list,
        description="Known comments this scan found deleted or hidden on "
        "dev.to: never called again.",
    )
    spent: list[str] = Field(
        default_factory=list,
        description="Comments whose last attempt failed this run: "
        "exhausted, only `watcher grant` tries them again.",
    )
    unmarked: int = Field(
        0,
        description="Comments with a verdict you have not marked after this run (the ones "
        "`watcher inbox` lists are those among them that need a reply).",
    )
    items: list[ItemResult] = Field(default_factory=list)
    rejected: list[Rejected] = Field(default_factory=list)
    repaired: list[str] = Field(default_factory=list)
    stopped: str | None = Field(
        None, description="Why the batch stopped early (rate_limited, auth, …), else null."
    )
    already_out: int = Field(
        0,
        description="Model calls already in flight when the batch stopped: they finished "
        "and were saved (SPEC §15.1).",
    )
    would_call: list[str] = Field(
        default_factory=list, description="Dry run only: ids a real run would call now."
    )
    signals: BatchSignals | None = Field(None, description="Real runs only.")

    def __init__(
        self,
        command: RunKind,
        *,
        dry_run: bool = False,
        limit: int,
        provider: str = "",
        model: str = "",
    ) -> None:
        # A new batch's summary: nothing found yet. The pipeline fills in the rest as it goes.
        BaseModel.__init__(
            self, command=command, dry_run=dry_run, limit=limit, provider=provider, model=model
        )

    @computed_field(description="Items per outcome.")  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[ItemOutcome, int]:
        counts: dict[ItemOutcome, int] = {}
        for item in self.items:
            counts[item.outcome] = counts.get(item.outcome, 0) + 1
        return counts

    # The printed key order (tests/test_results_golden.py pins it): the counts before the items
    # they count; and only the key that fits the run, would_call (dry) or signals (real). No return
    # annotation, on purpose: pydantic would take it for the shape and advertise a bare object.
    @model_serializer(mode="wrap")
    def _summary(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        doc: dict[str, Any] = handler(self)
        doc.pop("signals" if self.dry_run else "would_call", None)
        counts = doc.pop("counts", None)
        ordered: dict[str, Any] = {}
        for key, value in doc.items():
            if key == "items":
                ordered["counts"] = counts
            ordered[key] = value
        return ordered


# ---- claim / submit: the agent as the model (SPEC §14) -------------------------------------------


# A JSON Schema document, as it is: described as a plain object (no ``additionalProperties``), so
# the tests' closed copy of each output schema closes our models, not this free-form map.
JsonSchemaDocument = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]


class Claimed(_Result):
    # The docstring is the model's description in the claim tool's output schema: one line, as
    # clients have it (tests/test_mcp_results.py).
    """One attempt reserved for the agent: judge the comment by ``system`` + ``user``, answer with ``schema``."""  # noqa: E501

    # "schema" would shadow BaseModel.schema; the key in the output is still "schema".
    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    id: str
    n: int = Field(description="The attempt number: give it back to submit with the verdict.")
    lease_until: str = Field(
        description="ISO time: submit before it. After it the attempt is an orphan, closed as "
        "interrupted by the next run, and still counted."
    )
    system: str = Field(description="The system prompt: how to judge a comment.")
    user: str = Field(description="The user prompt: the comment and the article it is on.")
    schema_: JsonSchemaDocument = Field(
        alias="schema", description="The verdict's JSON schema; submit checks against it."
    )


class ClaimResult(_Result):
    provider: str
    lease_minutes: int | float = Field(description="How long each claim stays open for its submit.")
    claimed: list[Claimed] = Field(
        description="Oldest first; each one has spent one of its comment's attempts."
    )
    items: list[ItemResult] = Field(
        description="Comments met but not claimed (deferred: claimed elsewhere, still "
        "in its lease · interrupted: an orphan closed now, claimable next "
        "time · exhausted · skipped)."
    )
    remaining: int = Field(description="Claimable comments left because the limit was reached.")
    calls: int = Field(description="Model calls made: always 0 (the agent is the model).")


class SubmitResult(_Result):
    id: str
    n: int
    outcome: Literal["verdict", "error"] = Field(
        description="verdict: saved as the comment's verdict · error: it "
        "failed the schema (kind invalid_verdict) and counts "
        "as the attempt."
    )
    kind: str | None = Field(description="Error kind (invalid_verdict).")
    message: str | None
    attempts: int = Field(description="Attempts recorded for this comment.")
    attempts_left: int = Field(
        description="Attempts it has left (0: exhausted; only the person can grant more)."
    )
    state: State
    verdict: Verdict | None
