"""The file formats, as pydantic models: the only place that knows them (SPEC §4). Every model
forbids unknown fields; every state file carries its ``schema_version`` (:class:`_StateFile`), and
a newer one than ``SCHEMA_VERSION`` is refused untouched by :mod:`watcher.store.durable` (SPEC
§15.5; ``tests/golden/formats.json`` pins shapes and versions). Drafts: state/drafts_model.py"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from watcher.state.drafts_model import Draft
from watcher.util.timeutil import parse_iso

# \A…\Z, not ^…$: "$" also matches before a trailing newline, so "ok1\n" from an export passed
# and became the file "ok1\n.json" (SPEC §13.5). Check ids with fullmatch all the same.
COMMENT_ID_SHAPE = "[a-z0-9]{1,16}"  # for messages
COMMENT_ID_RE = re.compile(rf"\A{COMMENT_ID_SHAPE}\Z")
CAP = 3

Category = Literal["question", "feedback", "bug_report", "praise", "discussion", "spam", "other"]
Priority = Literal["high", "normal", "low"]
Triage = Literal["open", "replied", "ignored"]
Outcome = Literal["ok", "error"]
Entrypoint = Literal["cli", "bridge"]
ErrorKind = Literal[
    "rate_limited",
    "quota_exhausted",
    "overloaded",
    "server_error",
    "unreachable",  # no connection was made: refused, DNS, TLS, connect timeout
    "timeout",
    "network",
    "auth",
    "model_not_found",  # the provider does not know the model (or the base URL's path is wrong)
    "bad_request",
    "malformed_json",
    "invalid_verdict",
    "refused",
    "truncated",
    "interrupted",  # the process holding this reservation died before recording an outcome
]
ERROR_KINDS: tuple[str, ...] = ErrorKind.__args__  # type: ignore[attr-defined]
# baseline: older than the first scan's backlog window, never called unless queued (§13.3);
# answered: the author replied on dev.to before any attempt, never called (§13.3).
# edited: its text changed after its last verdict and no attempt is left for the new text (the old
# verdict is in `edits`, `watcher grant` gives one); deleted / hidden: gone from dev.to, or hidden
# there by the article's author — never called again, kept on disk (SPEC §15.2).
State = Literal[
    "done",
    "pending",
    "failed",
    "exhausted",
    "reserved",
    "baseline",
    "answered",
    "edited",
    "deleted",
    "hidden",
    "forgotten",  # `watcher forget`: out of every view, attempts kept, never called (SPEC §16.3)
]
TriageBy = Literal["person", "devto"]
GoneKind = Literal["deleted", "hidden"]


def _unset(value: object) -> bool:
    """For fields added after the first release: leave them out of the file while unused."""
    return value is None or value is False or value == []


def _zero(value: object) -> bool:
    return value == 0


def _iso_time(value: str | None) -> str | None:
    """A timestamp the code will compare with now: one that does not parse ("tomorrow") makes the
    file invalid, so it is quarantined instead of failing every later run (SPEC §13.5)."""
    if value is not None:
        parse_iso(value)  # ValueError → pydantic ValidationError → quarantine
    return value


class _Strict(BaseModel):
    # defer_build: built at first use, not at import (all of them were ~40 ms of every start-up);
    # code about to take a lock builds what it will use under it first (:func:`build`).
    model_config = ConfigDict(extra="forbid", defer_build=True)


def build(*models: type[BaseModel]) -> None:
    """Build these deferred models now, before a lock other runs wait on: InboxRecord alone is
    ~40 ms of CPU; a `submit` held the pipeline lock 37 ms, 26 of them building four models."""
    for model in models:
        if not model.__pydantic_complete__:
            model.model_rebuild()


class _StateFile(_Strict):
    """A whole state file. ``SCHEMA_VERSION`` is the version this release writes; every older one
    it can read is validated as is (each field it can hold is still known here) and held as the
    current one, so the first write of such a file writes this version — and a read, or a change
    that changes nothing, writes nothing at all (SPEC §15.5)."""

    SCHEMA_VERSION: ClassVar[int] = 1

    @field_validator("schema_version", check_fields=False)
    @classmethod
    def _as_this_release_writes_it(cls, _version: int) -> int:
        return cls.SCHEMA_VERSION


class Verdict(_Strict):  # the model's structured answer about one comment
    needs_reply: bool
    category: Category
    priority: Priority
    summary: str = Field(min_length=1, max_length=280)
    reply_hint: str = Field(max_length=500)


class Comment(_Strict):
    id: str
    article_id: int
    article_title: str
    article_url: str
    parent_id: str | None = None
    author: str
    created_at: str
    text: str
    url: str
    # The parent comment as the thread showed it when this one was first seen (SPEC §15.2, context):
    # who wrote it and its first lines. ``answers_author``: the parent is the article author's own
    # comment — a reply to the author, the most reply-worthy kind.
    parent_author: str | None = Field(default=None, exclude_if=_unset)
    parent_excerpt: str | None = Field(default=None, exclude_if=_unset)
    answers_author: bool = Field(default=False, exclude_if=_unset)

    @field_validator("id", "parent_id")
    @classmethod
    def _safe_id(cls, value: str | None) -> str | None:
        # The id becomes a file name: anything else could walk out of inbox/.
        if value is not None and not COMMENT_ID_RE.fullmatch(value):
            raise ValueError(f"comment id {value!r} does not match {COMMENT_ID_SHAPE}")
        return value


class Prompt(_Strict):
    template: str
    template_sha256: str
    system: str
    user: str


class AttemptError(_Strict):
    kind: ErrorKind
    message: str
    http_status: int | None = None
    retry_after_s: float | None = None


class Usage(_Strict):
    input_tokens: int | None = None
    output_tokens: int | None = None


class Attempt(_Strict):
    n: int = Field(ge=1)
    reserved_at: str
    # "claim": reserved for an agent that gives the verdict itself (SPEC §14, provider "agent").
    command: Literal["scan", "recheck", "claim"]
    entrypoint: Entrypoint
    pid: int
    provider: str
    model: str
    outcome: Outcome | None = None
    finished_at: str | None = None
    error: AttemptError | None = None
    raw: str | None = None
    usage: Usage | None = None
    duration_ms: int | None = None
    # An agent's claim (SPEC §14): until then the reservation is in flight elsewhere (deferred,
    # not closed as interrupted). Written only when set.
    lease_until: str | None = Field(default=None, exclude_if=_unset)
    # sha256 of the text this attempt judged (SPEC §15.2); None before edits were tracked: it
    # judged the text the record held before its first edit.
    text_sha256: str | None = Field(default=None, exclude_if=_unset)
    # The request never left the machine (no connection was made): not counted toward the
    # comment's attempts (SPEC §16.3), though reserved before the call like any.
    not_sent: bool = Field(default=False, exclude_if=_unset)
    worst_tokens: int | None = Field(default=None, exclude_if=_unset)  # as admitted (SPEC §16.4)

    _times = field_validator("lease_until")(_iso_time)


class Grant(_Strict):
    """More attempts the user gave a comment with ``watcher grant`` (SPEC §13.2)."""

    at: str
    n: int = Field(ge=1, le=3)


class Edit(_Strict):
    """One edit of a comment on dev.to, as a scan saw it (SPEC §15.2): the text *before* the edit,
    and the verdict that text had (None: none yet). Oldest first; the record's ``comment.text`` is
    always the newest text."""

    seen_at: str  # when a scan first fetched the new text
    text: str
    text_sha256: str
    verdict: Verdict | None = None
    verdict_at: str | None = None  # when that verdict was saved (its attempt's finished_at)
    attempts: int = Field(ge=0)  # spent before this edit; the budget is the comment's, for life
    # Whether the new text goes to the model: False when the author had replied or marked it (the
    # person's decision stands), or no attempt was left (state ``edited`` until a grant).
    judged: bool


class Gone(_Strict):
    """A comment that left dev.to (SPEC §15.2): ``deleted`` (missing from its thread fetched whole,
    or shown there as ``[deleted]``) or ``hidden`` (by the article's author)."""

    kind: GoneKind
    seen_at: str  # when a scan first saw it gone
    why: str


class Reply(_Strict):
    """One of the article author's own direct replies to this comment, as the thread showed it."""

    id: str
    created_at: str
    excerpt: str


class InboxRecord(_StateFile):
    # 2: grants, baseline, replied_at, an attempt's lease_until and command "claim", error kinds
    # unreachable and model_not_found; edits, gone, author_replies, verdict_text_sha256, an
    # attempt's text_sha256, a comment's parent_author/parent_excerpt/answers_author (SPEC §15.2)
    # — all unknown to the first release's models. 3: not_sent, worst_tokens, drafts (§16.3-5).
    SCHEMA_VERSION: ClassVar[int] = 3
    schema_version: Literal[1, 2, 3] = 3
    comment: Comment
    prompt: Prompt
    # For readers of the file, never trusted: the cap is CAP plus the grants (records.cap_of).
    cap: int = Field(default=CAP, ge=1)
    attempts: list[Attempt] = Field(default_factory=list)
    verdict: Verdict | None = None
    # Fields added after the first release are written only when set (_unset): a record that does
    # not use them keeps the first release's shape and stays small.
    grants: list[Grant] = Field(default_factory=list, exclude_if=_unset)
    # Never called while it has no attempts (SPEC §13.3): a comment older than the first scan's
    # backlog window (until `scan --since` queues it), or one the author had already answered.
    baseline: bool = Field(default=False, exclude_if=_unset)
    replied_at: str | None = Field(default=None, exclude_if=_unset)
    # SPEC §15.2. The hash of the text the saved verdict judged (None with no verdict, or a verdict
    # saved before edits were tracked: it judged ``comment.text`` unless ``edits`` says otherwise).
    verdict_text_sha256: str | None = Field(default=None, exclude_if=_unset)
    edits: list[Edit] = Field(default_factory=list, exclude_if=_unset)
    gone: Gone | None = Field(default=None, exclude_if=_unset)
    # The author's own direct replies (context for `show`); the reply times also live in seen.json.
    author_replies: list[Reply] = Field(default_factory=list, exclude_if=_unset)
    drafts: list[Draft] = Field(default_factory=list, exclude_if=_unset)  # newest last


class SeenComment(_Strict):
    article_id: int
    status: State
    attempts: int = Field(ge=0)
    triage: Triage = "open"
    first_seen_at: str
    updated_at: str
    # (inode, mtime_ns, size) of the inbox file it was derived from: a stat tells if it moved on.
    inbox_stamp: str | None = None
    # When `watcher inbox --new` first listed it (SPEC §13.4 item 6): listed once, mailed once.
    listed_at: str | None = Field(default=None, exclude_if=_unset)
    # Who set the triage: a person's `watcher mark` always wins over dev.to's "the author replied".
    triage_by: TriageBy | None = Field(default=None, exclude_if=_unset)
    # When the author's first direct reply to it was seen on dev.to (SPEC §13.3).
    replied_at: str | None = Field(default=None, exclude_if=_unset)
    # The person's last `watcher mark`, and the author's latest direct reply on dev.to: the later
    # decides the triage (SPEC §15.2).
    triage_at: str | None = Field(default=None, exclude_if=_unset)
    last_reply_at: str | None = Field(default=None, exclude_if=_unset)


class SeenArticle(_Strict):
    title: str
    comments_count: int = Field(ge=0)
    checked_at: str
    url: str | None = None
    # Forem's per-article change signal beside the count (SPEC §13.3); None where there is none.
    last_comment_at: str | None = Field(default=None, exclude_if=_unset)


class SeenFile(_StateFile):
    # 2: listed_at, triage_by, replied_at, triage_at, last_reply_at, last_comment_at and the states
    # baseline, answered, edited, deleted and hidden. 3: the state forgotten.
    SCHEMA_VERSION: ClassVar[int] = 3
    schema_version: Literal[1, 2, 3] = 3
    comments: dict[str, SeenComment] = Field(default_factory=dict)
    articles: dict[str, SeenArticle] = Field(default_factory=dict)


class Breaker(_Strict):
    """An open circuit breaker (SPEC §13.1, §16.6): the setup failed; only a real call that the
    provider answers closes it. It holds only for the setup it was opened for."""

    kind: str
    message: str
    since: str
    provider: str
    model: str
    base_url: str
    # When the last half-open real attempt was allowed: at most one per interval (SPEC §16.6).
    half_open_at: str | None = None
    # Half-open calls that failed in this outage: the interval grows 1, 2, 4 … 60 min with them.
    failed_half_opens: int = Field(default=0, ge=0, exclude_if=_zero)

    _times = field_validator("since", "half_open_at")(_iso_time)


class TransientFailure(_Strict):
    """A transient failure the provider has not answered well since: the next one, in any run, is
    the second in a row (SPEC §13.1, §15.5)."""

    kind: str
    at: str

    _times = field_validator("at")(_iso_time)


class ProviderState(_StateFile):
    # 2: the breaker, and what a cooldown and the provider's failures in a row need remembered.
    # 3: the breaker's failed_half_opens, and spent (SPEC §16.6).
    SCHEMA_VERSION: ClassVar[int] = 3
    schema_version: Literal[1, 2, 3] = 3
    cooldown_until: str | None = None
    reason: str | None = None
    # The wait the cooldown was set for (Retry-After, or watcher's own): one further away was set
    # while the clock ran ahead (SPEC §15.5); without it (an older release's), 7 days at most.
    retry_after_s: float | None = Field(default=None, ge=0, exclude_if=_unset)
    # 429s since the provider last answered: without Retry-After, 1, 2, 4 … min (SPEC §15.5).
    rate_limited_in_a_row: int = Field(default=0, ge=0, exclude_if=_zero)
    transient: TransientFailure | None = Field(default=None, exclude_if=_unset)
    breaker: Breaker | None = Field(default=None, exclude_if=_unset)
    # Comments that spent a counted attempt since the provider last answered: while a breaker or
    # a 429's cooldown streak lasts, no batch calls them again (an outage exhausts none, §16.6).
    spent: list[str] = Field(default_factory=list, exclude_if=_unset)

    _times = field_validator("cooldown_until")(_iso_time)


class LogIdentity(_Strict):
    """Which log the counts came from, by content (SPEC §8, §13.5): the hash of its first line
    and of the line ending at ``applied`` (at most its last ``signals.HEAD_CAP`` bytes, from
    ``tail_start``). ``dev``/``inode``: where it was last seen, for diagnosis only."""

    dev: int
    inode: int
    head_sha256: str | None = None
    tail_start: int | None = Field(default=None, ge=0)
    tail_sha256: str | None = None


class SignalState(_StateFile):
    # 2: the log identity's tail_start and tail_sha256.
    SCHEMA_VERSION: ClassVar[int] = 2
    schema_version: Literal[1, 2] = 2
    counts: dict[str, int] = Field(default_factory=dict)
    applied: int = Field(default=0, ge=0)
    invalid: int = Field(default=0, ge=0)
    log: LogIdentity | None = None


class CronProblem(_Strict):
    """One problem ``watcher cron`` reported (SPEC §15.3): said again when it changes, or daily."""

    line: str
    since: str
    said_at: str

    _times = field_validator("since", "said_at")(_iso_time)


class CronState(_StateFile):
    """cron.json: what ``watcher cron`` has already told the person, so that a night-long outage is
    one mail, not one per round (SPEC §15.3). A file of this release only: version 1."""

    SCHEMA_VERSION: ClassVar[int] = 1
    schema_version: Literal[1] = 1
    # Problem key (what went wrong, not the wording of one round) -> when it was said.
    problems: dict[str, CronProblem] = Field(default_factory=dict)
    # Comments named as needing the author (no verdict, attempts spent): named once.
    named: list[str] = Field(default_factory=list)
    # Comments named while failing (the model could not judge them; rounds retry): named once.
    named_failing: list[str] = Field(default_factory=list, exclude_if=_unset)


class SignalCursor(_StateFile):
    # Still the first release's format: it reads and writes this file as it always did.
    SCHEMA_VERSION: ClassVar[int] = 1
    schema_version: Literal[1] = 1
    offset: int = Field(default=0, ge=0)


# ---- the labelled set (SPEC §15.6): data/eval/labels.json, read only -----------------------------

# The kinds of comment dev.to authors get; a set may hold any of them.
LabelKind = Literal[
    "question",
    "bug_report",
    "correction",
    "discussion",
    "feedback",
    "praise",
    "thanks",
    "spam",
    "self_promotion",
    "reply_to_author",
    "reply_to_reader",
    "off_topic",
    "non_english",
    "code_only",
    "rhetorical",
    "self_answered",
]


class Label(_Strict):
    """What the author did about one comment of the set: replied (``needs_reply``) or ignored it."""

    needs_reply: bool
    kind: LabelKind
    # Written after the offline classifier's rules were last changed: it was not tuned on these.
    held_out: bool = Field(default=False, exclude_if=_unset)


class LabelFile(_Strict):
    """``labels.json`` beside the set's Forem-format ``export.json``: one label per comment id."""

    schema_version: Literal[1] = 1
    author: str = Field(min_length=1, description="The articles' author, as the export's username.")
    comments: dict[str, Label]

    @field_validator("comments")
    @classmethod
    def _safe_ids(cls, value: dict[str, Label]) -> dict[str, Label]:
        if bad := [repr(cid) for cid in value if not COMMENT_ID_RE.fullmatch(cid)]:
            raise ValueError(f"comment ids must match {COMMENT_ID_SHAPE}: {', '.join(bad[:3])}")
        return value
