"""What every command returns (SPEC §9, §10): one pydantic model per result.

The pipeline and :mod:`watcher.commands.core` build these; :mod:`watcher.cli.render` reads them for a
person; :mod:`watcher.commands.envelope` dumps them for ``--json`` and the bridge, and generates each MCP
tool's output schema from them. Nested parts that are a file format (a verdict, an attempt, a
comment, a breaker) are the file format's own model from :mod:`watcher.models`.

Cheap to import (pydantic and the file formats; no rich, no httpx, no MCP SDK): every run loads it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    WithJsonSchema,
    computed_field,
    model_serializer,
)

from watcher.models import (
    Attempt,
    Breaker,
    Category,
    Comment,
    Edit,
    Gone,
    Grant,
    Priority,
    Prompt,
    Reply,
    State,
    Triage,
    TriageBy,
    Verdict,
)

if TYPE_CHECKING:
    from pydantic.config import JsonDict

# claim and submit: the agent's side of SPEC §14 (the agent, not watcher, makes the "call").
Command = Literal["scan", "recheck", "claim", "submit"]
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
    after the command ran — a scan has spent its attempts by then. Output and schema come from
    one model but down two paths (pydantic's schema of the fields; the serializer, custom for the
    batch summary), and :data:`watcher.commands.envelope.RESULTS` names each command's model by hand, so a
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


# ---- scan / recheck: the batch summary (SPEC §7.1) --------------------------------------------------


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

    command: Command
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
        command: Command,
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


# ---- claim / submit: the agent as the model (SPEC §14) ----------------------------------------------


# A JSON Schema document, as it is: described as a plain object (no ``additionalProperties``), so
# the tests' closed copy of each output schema closes our models, not this free-form map.
JsonSchemaDocument = Annotated[dict[str, Any], WithJsonSchema({"type": "object"})]


class Claimed(_Result):
    """One attempt reserved for the agent: judge the comment by ``system`` + ``user``, answer with ``schema``."""

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


# ---- status ---------------------------------------------------------------------------------------


class Cooldown(_Result):
    until: str = Field(description="ISO time before which no model call is made.")
    reason: str


class AgentClaims(_Result):
    """Attempts agents have claimed and not submitted (SPEC §14)."""

    in_flight: int = Field(
        description="Claims whose lease still runs: their verdicts come by submit."
    )
    earliest_lease_until: str | None = Field(description="When the first of those leases ends.")
    lease_ended: int = Field(
        description="Claims past their lease: the next scan, recheck or claim closes them "
        "as interrupted."
    )


class StatusSignals(_Result):
    counts: dict[str, int]
    invalid: int
    warning: str | None = _absent_if_none()


class PublicSettings(_Result):
    """The configuration, without a secret: only whether each key is set."""

    data_dir: str
    provider: str
    model: str
    base_url: str | None
    api_key_set: bool
    api_key_from: str | None = Field(
        default=None, description="The variable (or config file) the key came from; never the key."
    )
    timeout_s: float
    parallel: int = Field(
        description="Model calls in flight at once in one run (WATCHER_PARALLEL)."
    )
    offline: bool
    provider_defaulted: bool
    devto_username: str | None
    devto_api_key_set: bool
    devto_base_url: str


class StatusPaths(_Result):
    data_dir: str
    inbox: str
    seen: str
    observations: str


class StatusResult(_Result):
    comments: int
    articles: int
    states: dict[State, int]
    triage: dict[Triage, int]
    cooldown: Cooldown | None = Field(
        description="An active provider cooldown (after a 429), else null."
    )
    breaker: Breaker | None = Field(
        description="An open circuit breaker (the setup failed), else null."
    )
    claimed: AgentClaims
    signals: StatusSignals
    settings: PublicSettings
    paths: StatusPaths
    offline_quality: str | None = _absent_if_none(
        "Provider offline only: how good the heuristic's verdicts are, "
        "measured on the bundled labelled set (`watcher eval --set "
        "bundled`)."
    )


# ---- inbox, show, mark, grant ------------------------------------------------------------------------


class InboxEntry(_Result):
    id: str
    state: State
    triage: Triage
    attempts: int
    author: str
    article: str
    url: str = Field(description="The comment on dev.to: where the author posts a reply.")
    created_at: str
    verdict: Verdict | None = Field(description="The model's verdict, with reply_hint.")
    verdict_by: str | None = Field(
        description="The provider that gave the verdict (agent: the agent's submit)."
    )
    hint: str | None = Field(
        description="What the person can do about a comment stuck without a verdict."
    )
    answers_you: bool = Field(
        False, description="It replies to one of your own comments (SPEC §15.2)."
    )
    next_due: str | None = _absent_if_none(
        "Failed on the provider's side: no batch calls it again before this time (SPEC §16.3)."
    )


class InboxResult(_Result):
    all: bool
    new: bool
    count: int
    comments: list[InboxEntry] = Field(description="Highest priority first, then oldest.")
    unresolved: dict[State, int] = Field(description="Comments without a verdict, per state.")


class Parent(_Result):
    id: str
    author: str | None = Field(description="Its author, where known.")
    excerpt: str | None = Field(description="Its first lines, where known.")
    yours: bool = Field(description="It is the article author's own comment.")


class CommentRecord(_Result):
    """One comment in full: its inbox record plus its state and triage."""

    schema_version: int
    comment: Comment
    prompt: Prompt | None = _absent_if_none(
        "The cached prompt (the MCP tool show: only with prompt=true)."
    )
    cap: int = Field(description="Attempts allowed in total (3 plus what the person granted).")
    attempts: list[Attempt]
    verdict: Verdict | None
    grants: list[Grant]
    baseline: bool
    state: State
    verdict_by: str | None = Field(
        description="The provider that gave the verdict (agent: the agent's submit)."
    )
    hint: str | None
    triage: Triage
    triage_by: TriageBy | None
    replied_at: str | None
    parent: Parent | None = Field(
        None, description="The comment it replies to, as the thread showed it."
    )
    your_replies: list[Reply] = Field(
        default_factory=list, description="Your own direct replies to it on dev.to."
    )
    edits: list[Edit] = Field(
        default_factory=list, description="Earlier texts and their verdicts, oldest first."
    )
    gone: Gone | None = Field(None, description="Deleted or hidden on dev.to: never called again.")
    next_due: str | None = _absent_if_none(
        "Failed on the provider's side: no batch calls it again before this time (SPEC §16.3)."
    )


class MarkResult(_Result):
    ids: list[str]
    triage: Triage
    states: dict[str, State] = Field(description="Each comment's state.")


class ArticleRow(_Result):
    id: int
    title: str
    url: str | None
    comments: int = Field(
        description="Comments watcher knows on it (yours not included; deleted or hidden ones not "
        "counted)."
    )
    need_reply: int = Field(description="How many `watcher inbox` lists now.")
    oldest_waiting: str | None = Field(
        description="created_at of the oldest comment listed, else null."
    )
    oldest_waiting_days: float | None = Field(description="Its age in days, else null.")
    last_activity: str | None = Field(
        description="dev.to's last comment activity on it (last_comment_at), else the "
        "newest comment's created_at."
    )


class ArticlesResult(_Result):
    count: int
    articles: list[ArticleRow] = Field(
        description="What waits longest first, then most waiting, then latest activity."
    )


class GrantResult(_Result):
    """``watcher grant`` (SPEC §13.2; the person's command, never a tool)."""

    id: str
    granted: int
    attempts: int
    cap: int
    state: State


# ---- signals, check, demo --------------------------------------------------------------------------


class SignalsResult(_Result):
    reset: bool
    counts: dict[str, int]
    invalid: int
    applied: int = Field(description="Bytes of the observation log counted so far.")
    new_lines: int


class CheckRow(_Result):
    name: str
    ok: bool
    detail: str
    fix: str | None


class CheckResult(_Result):
    ok: bool
    checks: list[CheckRow]


class DemoResult(_Result):
    """``watcher demo`` (SPEC §13.4): the sample's scans and what needs a reply after them."""

    data_dir: str
    scans: list[BatchResult]
    inbox: InboxResult
    account_ready: bool = Field(
        False, description="DEVTO_USERNAME and WATCHER_PROVIDER are set for real runs."
    )
    account_data_dir: str | None = Field(
        None,
        description="The data dir real runs use (untouched by the demo), "
        "when WATCHER_DATA_DIR names it.",
    )


# ---- cron (SPEC §15.3) -------------------------------------------------------------------------------


class CronProblemResult(_Result):
    key: str = Field(description="What went wrong, the same for every round while it lasts.")
    step: str = Field(description="scan, recheck, inbox, or cron (its own memory, or a warning).")
    kind: str = Field(description="The error kind, or warning.")
    line: str = Field(description="The line with its fix, as printed on stderr.")
    said: bool = Field(
        description="Printed this round: it started or changed, or was last said a day ago."
    )
    since: str = Field(description="When cron first met it (ISO time, UTC).")


class CronNamed(_Result):
    """A comment that needs the author and has no verdict — its attempts spent (``exhausted``), or
    failing because the model could not judge it (``failed``): named once in each state."""

    id: str
    state: State
    said: bool = Field(description="Named this round (no earlier round named it).")
    line: str = Field(
        description="The line printed, with the command that helps; empty when not said."
    )


class CronResult(_Result):
    """``watcher cron``: scan, recheck and the new comments in one round, and what it said."""

    scan: BatchResult | None = Field(
        description="The scan's summary (null: it failed before it had one)."
    )
    recheck: BatchResult | None
    inbox: InboxResult | None = Field(
        description="The inbox --new listing: new comments that need a reply."
    )
    problems: list[CronProblemResult]
    named: list[CronNamed]
    notices: list[str] = Field(
        description="Every notice the steps gave (the problems among them are in problems)."
    )


# ---- eval: how good the verdicts are (SPEC §15.6) ----------------------------------------------------


Figure = Annotated[
    float | None, Field(description="0–1, three decimals; null when nothing to divide by.")
]


class Confusion(_Result):
    """The verdicts' ``needs_reply`` against what the author did, one count per pairing."""

    true_positive: int = Field(
        description="Said it needs a reply; the author replied (or marked it replied)."
    )
    false_positive: int = Field(description="Said it needs a reply; the author marked it ignored.")
    false_negative: int = Field(
        description="Said no reply needed; the author replied (or marked it replied)."
    )
    true_negative: int = Field(description="Said no reply needed; the author marked it ignored.")


class Disagreement(_Result):
    """A comment whose verdict the author's action contradicts: the ones to look at."""

    id: str
    said_needs_reply: bool
    author: Literal["replied", "ignored"] = Field(
        description="What the author did: replied (on dev.to or by "
        "`mark replied`) or marked it ignored."
    )
    by: TriageBy | None = Field(
        description="devto: the reply was seen on dev.to · person: `watcher mark`."
    )
    category: Category
    summary: str
    kind: str | None = _absent_if_none(
        "The labelled set's kind of comment (question, spam, …); --set only."
    )


class EvalGroup(_Result):
    """The figures of one provider, model and prompt version (the template's sha256, first 12)."""

    provider: str
    model: str
    prompt: str = Field(
        description="The prompt template's version: the first 12 hex digits of its sha256."
    )
    judged: int = Field(description="Comments with a verdict and a label from the author.")
    unlabelled: int = Field(
        description="Comments with a verdict the author has neither replied to nor marked "
        "(or, edited, only before that verdict): counted, not guessed."
    )
    agreement: Figure
    precision: Figure = Field(
        description="Of the comments it said need a reply, the share that did."
    )
    recall: Figure = Field(
        description="Of the comments that needed a reply, the share it said need one."
    )
    confusion: Confusion
    disagreements: list[Disagreement] = Field(
        description="Every judged comment where verdict and author differ."
    )


class KindFigures(_Result):
    judged: int
    agreed: int


class SetFigures(_Result):
    """Figures on (part of) the set: a fixed answer's, or the judge's on the held-out comments."""

    judged: int
    agreement: Figure
    precision: Figure
    recall: Figure


class LabelledSetRun(_Result):
    """``watcher eval --set``: the labelled set, judged in a data dir of its own."""

    path: str = Field(description="The set's directory (export.json and labels.json).")
    comments: int
    needs_reply: int = Field(description="Comments the set labels as needing a reply.")
    provider: str
    model: str
    calls: int = Field(
        description="Model calls made for this evaluation (the offline classifier's cost nothing)."
    )
    call_budget: int | None = Field(
        description="--provider-calls: the most calls this evaluation could make."
    )
    data_dir: str | None = Field(
        description="The evaluation's own data dir (--eval-dir), or null: a temporary "
        "one, removed afterwards."
    )
    always_yes: SetFigures = Field(
        description="Figures of a verdict that always says 'needs a reply'."
    )
    always_no: SetFigures = Field(
        description="Figures of a verdict that always says 'no reply needed'."
    )
    held_out: SetFigures | None = Field(
        description="The judge's figures on the comments written after the offline "
        "classifier was last tuned (labels.json held_out), else null."
    )
    by_kind: dict[str, KindFigures] = Field(
        description="Judged and agreed per kind of comment in the set."
    )


class EvalResult(_Result):
    """``watcher eval``: stored verdicts against what the author did (SPEC §15.6). Free: no call, no write."""

    since: str | None = Field(
        description="Only comments created on or after this time (--since), else null."
    )
    comments: int = Field(description="Comments considered (after --since).")
    judged: int
    unlabelled: int = Field(
        description="With a verdict, without a label from the author: not guessed."
    )
    without_verdict: int = Field(
        description="No verdict to judge (pending, failed, exhausted, baseline, answered)."
    )
    groups: list[EvalGroup] = Field(
        description="Per provider, model and prompt version; most judged first."
    )
    labelled_set: LabelledSetRun | None = _absent_if_none("--set only: the labelled set's run.")
