"""What the reading and deciding commands return: status, inbox, show, mark, articles, grant,
signals, check, demo, cron (SPEC §15.2, §15.3)."""

from __future__ import annotations

from pydantic import (
    Field,
)

from watcher.commands.results._base import (
    _absent_if_none,
    _Result,
)
from watcher.commands.results.batch import BatchResult
from watcher.models import (
    Attempt,
    Breaker,
    Comment,
    Edit,
    Gone,
    Grant,
    Prompt,
    Reply,
    State,
    Triage,
    TriageBy,
    Verdict,
)
from watcher.state.drafts_model import Draft

# ---- status --------------------------------------------------------------------------------------


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


class NotifyStatus(_Result):
    """WATCHER_NOTIFY as ``status`` shows it (SPEC §16.1): never a URL."""

    targets: list[str] = Field(description="Each target as scheme://[redacted].")
    last_delivery: str | None = Field(
        description="When a target last accepted a message (ISO time, UTC); null: none yet."
    )
    pending: int = Field(description="Messages a target has not accepted yet, one per target.")
    gave_up: list[str] = Field(
        description="Messages given up after 24 h of failures, one line each (kept a week)."
    )
    warning: str | None = _absent_if_none("Why the outbox could not be read.")


class ModelUsage(_Result):
    provider: str
    model: str
    calls: int = Field(
        description="Attempts and reply drafts reserved for this model (each one call at most)."
    )
    input_tokens: int = Field(description="Input tokens the provider reported, summed.")
    output_tokens: int = Field(description="Output tokens the provider reported, summed.")
    drafts: int = Field(default=0, description="Of the calls, reply drafts (`draft`).")
    without_usage: int = Field(
        description="Calls with no usage recorded (offline, an agent's, an error without it, "
        "or a process that died first): not in the token sums."
    )
    dollars: float | None = Field(
        description="What the tokens cost at WATCHER_PRICES; null when it does not price the model."
    )


class TokenBudget(_Result):
    """WATCHER_MONTHLY_TOKENS against this UTC month's tokens (SPEC §16.4)."""

    budget: int = Field(description="Provider tokens (in and out) the month may spend.")
    used: int | None = Field(
        description="Used so far: the usage recorded, each call in flight or without usage at its "
        "worst case; null before the first call this release counted."
    )
    month: str = Field(description="The UTC month, YYYY-MM.")


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
    notify: NotifyStatus | None = _absent_if_none(
        "WATCHER_NOTIFY's targets and deliveries (SPEC §16.1); absent when it is not set."
    )
    offline_quality: str | None = _absent_if_none(
        "Provider offline only: how good the heuristic's verdicts are, "
        "measured on the bundled labelled set (`watcher eval --set "
        "bundled`)."
    )
    this_month: list[ModelUsage] | None = _absent_if_none(
        "This UTC month's calls and tokens per provider and model (the usage command); absent "
        "before the month's first call."
    )
    monthly_tokens: TokenBudget | None = _absent_if_none(
        "WATCHER_MONTHLY_TOKENS and what this month has used of it; absent when it is not set."
    )


# ---- inbox, show, mark, grant --------------------------------------------------------------------


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
    edited: int | None = _absent_if_none(
        "Judged again after its text was edited on dev.to: how many edits it had (the verdict "
        "is the newest text's)."
    )
    excerpt: str | None = _absent_if_none(
        "--new only (the listing cron mails): the first 200 characters of its text (SPEC §16.1)."
    )


class InboxResult(_Result):
    all: bool
    new: bool
    count: int
    comments: list[InboxEntry] = Field(description="Highest priority first, then oldest.")
    unresolved: dict[State, int] = Field(description="Comments without a verdict, per state.")
    oneline: bool | None = _absent_if_none("Asked for one line per comment (--oneline).")


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
    draft: Draft | None = _absent_if_none("The newest reply draft with a text (watcher draft).")


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


# ---- signals, check, demo ------------------------------------------------------------------------


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


# ---- cron (SPEC §15.3) ---------------------------------------------------------------------------


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
