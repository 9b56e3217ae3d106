"""The shapes of the results the watcher commands return, as the MCP tools advertise them (SPEC §10).

These models *describe* what :mod:`watcher.commands` returns; they never build or change it.
Nested parts that are dumps of a file format (a verdict, an attempt, a comment) reuse the file
format's own model from :mod:`watcher.models`, so there is one definition of each.

Every model here allows extra keys (``additionalProperties: true``): the official MCP client
rejects a result that does not fit the advertised schema, so a key added to a command before it
is described here must not turn a scan that already spent attempts into a client-side error.
The test suite validates every tool's real output against a *closed* copy of each schema
(tests/test_mcp_results.py), which is where a key missing here is caught.

No MCP SDK import: the plain bridge may load this module.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Generic, Literal, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from watcher.errors import exit_code_legend
from watcher.models import (
    Attempt,
    Breaker,
    Category,
    Comment,
    Grant,
    Priority,
    Prompt,
    State,
    Triage,
    TriageBy,
    Verdict,
)
from watcher.pipeline import ItemOutcome as Outcome

# ---- scan / recheck: the batch summary (watcher.pipeline.batch.BatchResult.to_json) ----------------------


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ItemVerdict(_Open):
    """The part of a verdict a batch summary repeats; `show` has the whole verdict."""

    needs_reply: bool
    category: Category
    priority: Priority
    summary: str


class BatchItem(_Open):
    """One comment the batch reached. Keys that do not apply are absent, not null."""

    id: str
    outcome: Outcome = Field(description="verdict: the model answered · error: the attempt failed (kind says why) · "
                                         "skipped/deferred/exhausted/interrupted/repaired: no call for it this run · "
                                         "not_started: the batch stopped before it · would_call/would_skip: dry run")
    kind: str | None = Field(default=None, description="Error kind (malformed_json, overloaded, rate_limited, …).")
    message: str | None = None
    attempts: int | None = Field(default=None, description="Attempts recorded for this comment after this run.")
    verdict: ItemVerdict | None = None


class Rejected(_Open):
    item: str | None = Field(description="The comment id when it is a safe id, else a short description.")
    message: str


class BatchSignals(_Open):
    """The observation counter after the batch: counts, or the warning that stopped it."""

    new_lines: int | None = None
    invalid: int | None = None
    warning: str | None = None


class BatchSummary(_Open):
    command: Literal["scan", "recheck"]
    dry_run: bool
    provider: str
    model: str
    limit: int
    planned: int = Field(description="Comments the batch looked at (callable or not).")
    calls: int = Field(description="Model calls made (each spent one attempt).")
    remaining: int = Field(description="Planned comments left for the next run because the limit was reached.")
    discovered: int = Field(description="New comments found by this scan.")
    baseline: int = Field(description="Discovered comments older than the first scan's backlog window: never called.")
    answered: int = Field(description="Comments the author had already answered on dev.to: never called.")
    replied: list[str] = Field(description="Comments marked replied because the author replied on dev.to.")
    counts: dict[str, int] = Field(description="Items per outcome.")
    items: list[BatchItem]
    rejected: list[Rejected]
    repaired: list[str]
    stopped: str | None = Field(description="Why the batch stopped early (rate_limited, auth, …), else null.")
    would_call: list[str] | None = Field(default=None, description="Dry run only: ids a real run would call now.")
    signals: BatchSignals | None = Field(default=None, description="Real runs only.")
    for_agent: int | None = Field(default=None, description="Provider agent only (no model call is made): comments "
                                                            "waiting for the agent's verdict; the claim tool hands "
                                                            "them out.")


# ---- claim / submit: the agent as the model (SPEC §14) ------------------------------------------------------


# A JSON Schema document, as it is: described as a plain object (no ``additionalProperties``), so
# the tests' closed copy of each output schema closes our models, not this free-form map.
JsonSchemaDocument = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]


class Claimed(_Open):
    """One attempt reserved for the agent: judge the comment by ``system`` + ``user``, answer with ``schema``."""

    id: str
    n: int = Field(description="The attempt number: give it back to submit with the verdict.")
    lease_until: str = Field(description="ISO time: submit before it. After it the attempt is an orphan, closed as "
                                         "interrupted by the next run, and still counted.")
    system: str = Field(description="The system prompt: how to judge a comment.")
    user: str = Field(description="The user prompt: the comment and the article it is on.")
    schema_: JsonSchemaDocument = Field(alias="schema", description="The verdict's JSON schema; submit checks against it.")


class ClaimResult(_Open):
    provider: str
    lease_minutes: int = Field(description="How long each claim stays open for its submit.")
    claimed: list[Claimed] = Field(description="Oldest first; each one has spent one of its comment's attempts.")
    items: list[BatchItem] = Field(description="Comments met but not claimed (deferred: claimed elsewhere, still in "
                                               "its lease · interrupted: an orphan closed now, claimable next time · "
                                               "exhausted · skipped).")
    remaining: int = Field(description="Claimable comments left because the limit was reached.")
    calls: int = Field(description="Model calls made: always 0 (the agent is the model).")


class SubmitResult(_Open):
    id: str
    n: int
    outcome: Literal["verdict", "error"] = Field(description="verdict: saved as the comment's verdict · error: it "
                                                             "failed the schema (kind invalid_verdict) and counts as "
                                                             "the attempt.")
    kind: str | None = Field(default=None, description="Error kind (invalid_verdict).")
    message: str | None = None
    attempts: int = Field(description="Attempts recorded for this comment.")
    attempts_left: int = Field(description="Attempts it has left (0: exhausted; only the person can grant more).")
    state: State
    verdict: Verdict | None = None


# ---- status ----------------------------------------------------------------------------------------------


class Cooldown(_Open):
    until: str = Field(description="ISO time before which no model call is made.")
    reason: str


class AgentClaims(_Open):
    """Attempts agents have claimed and not submitted (SPEC §14)."""

    in_flight: int = Field(description="Claims whose lease still runs: their verdicts come by submit.")
    earliest_lease_until: str | None = Field(description="When the first of those leases ends.")
    lease_ended: int = Field(description="Claims past their lease: the next scan, recheck or claim closes them "
                                         "as interrupted.")


class StatusSignals(_Open):
    counts: dict[str, int]
    invalid: int
    warning: str | None = None


class PublicSettings(_Open):
    """The configuration, without a secret: only whether each key is set."""

    data_dir: str
    provider: str
    model: str
    base_url: str | None
    api_key_set: bool
    api_key_from: str | None = Field(default=None, description="The variable (or config file) the key came from; "
                                     "never the key.")
    timeout_s: float
    offline: bool
    provider_defaulted: bool
    devto_username: str | None
    devto_api_key_set: bool
    devto_base_url: str


class StatusPaths(_Open):
    data_dir: str
    inbox: str
    seen: str
    observations: str


class StatusResult(_Open):
    comments: int
    articles: int
    states: dict[State, int]
    triage: dict[Triage, int]
    cooldown: Cooldown | None = Field(description="An active provider cooldown (after a 429), else null.")
    breaker: Breaker | None = Field(description="An open circuit breaker (the setup failed), else null.")
    claimed: AgentClaims
    signals: StatusSignals
    settings: PublicSettings
    paths: StatusPaths


# ---- inbox, show, mark -------------------------------------------------------------------------------------


class InboxEntry(_Open):
    id: str
    state: State
    triage: Triage
    attempts: int
    author: str
    article: str
    url: str = Field(description="The comment on dev.to: where the author posts a reply.")
    created_at: str
    verdict: Verdict | None = Field(description="The model's verdict, with reply_hint.")
    verdict_by: str | None = Field(description="The provider that gave the verdict (agent: the agent's submit).")
    hint: str | None = Field(description="What the person can do about a comment stuck without a verdict.")


class InboxResult(_Open):
    all: bool
    new: bool
    count: int
    comments: list[InboxEntry] = Field(description="Highest priority first, then oldest.")
    unresolved: dict[str, int] = Field(description="Comments without a verdict, per state.")


class CommentRecord(_Open):
    """One comment in full: its inbox record plus its state and triage."""

    schema_version: int
    comment: Comment
    prompt: Prompt | None = Field(default=None, description="The cached prompt; only with prompt=true.")
    cap: int = Field(description="Attempts allowed in total (3 plus what the person granted).")
    attempts: list[Attempt]
    verdict: Verdict | None
    verdict_by: str | None = Field(description="The provider that gave the verdict (agent: the agent's submit).")
    grants: list[Grant]
    baseline: bool
    replied_at: str | None
    state: State
    hint: str | None
    triage: Triage
    triage_by: TriageBy | None


class MarkResult(_Open):
    id: str
    triage: Triage
    state: State


# ---- signals, check --------------------------------------------------------------------------------------


class SignalsResult(_Open):
    reset: bool
    counts: dict[str, int]
    invalid: int
    applied: int = Field(description="Bytes of the observation log counted so far.")
    new_lines: int


class CheckRow(_Open):
    name: str
    ok: bool
    detail: str
    fix: str | None


class CheckResult(_Open):
    ok: bool
    checks: list[CheckRow]


# ---- the envelope -----------------------------------------------------------------------------------------

ResultT = TypeVar("ResultT", bound=BaseModel)


class EnvelopeError(BaseModel):
    kind: str = Field(description="Stable error kind, e.g. usage, config, lock_busy, rate_limited.")
    message: str = Field(description="What went wrong and what to do next.")


class Envelope(BaseModel, Generic[ResultT]):
    """SPEC §10: the same JSON document ``watcher-bridge <command>`` prints."""

    ok: bool = Field(description="True when the command ran (exit_code 0).")
    command: str
    exit_code: int = Field(description=exit_code_legend())
    result: ResultT | None = Field(description="The command's result; null when it failed before producing one "
                                               "(a batch keeps its summary even when it stopped).")
    error: EnvelopeError | None


RESULTS: dict[str, type[BaseModel]] = {
    "scan": BatchSummary,
    "recheck": BatchSummary,
    "status": StatusResult,
    "inbox": InboxResult,
    "show": CommentRecord,
    "mark": MarkResult,
    "signals": SignalsResult,
    "check": CheckResult,
    "claim": ClaimResult,
    "submit": SubmitResult,
}


@functools.cache
def envelope_model(tool: str) -> type[BaseModel]:
    """``Envelope[<tool's result>]`` (built once per tool)."""
    model: type[BaseModel] = cast(Any, Envelope)[RESULTS[tool]]
    return model


def output_schema(tool: str) -> dict[str, Any]:
    """The JSON schema of ``tool``'s envelope, its ``result`` typed."""
    return envelope_model(tool).model_json_schema(mode="serialization")


def drift(tool: str, document: dict[str, Any]) -> str | None:
    """Why ``document`` does not fit ``tool``'s advertised schema, else ``None`` (for a log line)."""
    try:
        envelope_model(tool).model_validate(document)
    except ValidationError as exc:
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
    return None
