"""The file formats, as pydantic models: the only place that knows them (SPEC §4).

Every model forbids unknown fields and every state file carries ``schema_version: 1``; reading
a newer version is refused in :mod:`watcher.store.durable` before validation.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from watcher.timeutil import parse_iso

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
State = Literal["done", "pending", "failed", "exhausted", "reserved", "baseline", "answered"]
TriageBy = Literal["person", "devto"]


def _unset(value: object) -> bool:
    """For fields added after the first release: leave them out of the file while unused."""
    return value is None or value is False or value == []


def _iso_time(value: str | None) -> str | None:
    """A timestamp the code will compare with now: one that does not parse ("tomorrow") makes the
    file invalid, so it is quarantined instead of failing every later run (SPEC §13.5)."""
    if value is not None:
        parse_iso(value)  # ValueError → pydantic ValidationError → quarantine
    return value


class _Strict(BaseModel):
    # defer_build: a model's validator is built when it is first used, not at import — most
    # commands touch a few of these models, and building them all was ~40 ms of every start-up.
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Verdict(_Strict):
    """The model's structured answer about one comment."""

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
    # An agent's claim (SPEC §14): until then the reservation is in flight elsewhere, so a run
    # holding the pipeline lock defers it instead of closing it as interrupted. Written only when
    # set, so attempts of the other providers stay as an older watcher wrote them.
    lease_until: str | None = Field(default=None, exclude_if=_unset)

    _times = field_validator("lease_until")(_iso_time)


class Grant(_Strict):
    """More attempts the user gave a comment with ``watcher grant`` (SPEC §13.2)."""

    at: str
    n: int = Field(ge=1, le=3)


class InboxRecord(_Strict):
    schema_version: Literal[1] = 1
    comment: Comment
    prompt: Prompt
    # Written for readers of the file; never trusted: the cap is CAP plus the grants
    # (:func:`watcher.records.cap_of`), so a hand-edited "cap": 50 buys nothing.
    cap: int = Field(default=CAP, ge=1)
    attempts: list[Attempt] = Field(default_factory=list)
    verdict: Verdict | None = None
    # Fields added after the first release are written only when set (_UNSET): a file that does
    # not use them stays readable by an older watcher (its models forbid unknown fields, so it
    # would quarantine the file), e.g. an MCP server left running across an upgrade.
    grants: list[Grant] = Field(default_factory=list, exclude_if=_unset)
    # Never called while it has no attempts (SPEC §13.3): a comment older than the first scan's
    # backlog window (until `scan --since` queues it), or one the author had already answered.
    baseline: bool = Field(default=False, exclude_if=_unset)
    replied_at: str | None = Field(default=None, exclude_if=_unset)


class SeenComment(_Strict):
    article_id: int
    status: State
    attempts: int = Field(ge=0)
    triage: Triage = "open"
    first_seen_at: str
    updated_at: str
    # (inode, mtime_ns, size) of the inbox file this entry was derived from: a cheap stat tells
    # whether the inbox moved on since, without reading every inbox file on every command.
    inbox_stamp: str | None = None
    # When `watcher inbox --new` first listed it (SPEC §13.4 item 6): listed once, mailed once.
    listed_at: str | None = Field(default=None, exclude_if=_unset)
    # Who set the triage: a person's `watcher mark` always wins over dev.to's "the author replied".
    triage_by: TriageBy | None = Field(default=None, exclude_if=_unset)
    # When the author's first direct reply to it was seen on dev.to (SPEC §13.3).
    replied_at: str | None = Field(default=None, exclude_if=_unset)


class SeenArticle(_Strict):
    title: str
    comments_count: int = Field(ge=0)
    checked_at: str
    url: str | None = None
    # Forem's per-article change signal beside the count (SPEC §13.3); None where the listing has none.
    last_comment_at: str | None = Field(default=None, exclude_if=_unset)


class SeenFile(_Strict):
    schema_version: Literal[1] = 1
    comments: dict[str, SeenComment] = Field(default_factory=dict)
    articles: dict[str, SeenArticle] = Field(default_factory=dict)


class Breaker(_Strict):
    """An open circuit breaker (SPEC §13.1): the setup failed; no model call until a free probe
    passes. It holds only for the setup it was opened for."""

    kind: str
    message: str
    since: str
    provider: str
    model: str
    base_url: str
    # When the last half-open real attempt was allowed (servers without a models endpoint, and
    # bad_request, which no probe can see): at most one per hour.
    half_open_at: str | None = None

    _times = field_validator("since", "half_open_at")(_iso_time)


class ProviderState(_Strict):
    schema_version: Literal[1] = 1
    cooldown_until: str | None = None
    reason: str | None = None
    breaker: Breaker | None = Field(default=None, exclude_if=_unset)

    _times = field_validator("cooldown_until")(_iso_time)


class LogIdentity(_Strict):
    """Which log the counts came from, by content (SPEC §8, §13.5): the hash of its first line
    and of the line ending at ``applied`` (its last ``signals.HEAD_CAP`` bytes at most, starting
    at ``tail_start``). ``dev``/``inode`` are where it was last seen, kept for diagnosis only:
    a copied data dir has a new inode and the same log. A state saved before ``tail_sha256``
    existed reads as ``None`` there and gets it on its next save."""

    dev: int
    inode: int
    head_sha256: str | None = None
    tail_start: int | None = Field(default=None, ge=0)
    tail_sha256: str | None = None


class SignalState(_Strict):
    schema_version: Literal[1] = 1
    counts: dict[str, int] = Field(default_factory=dict)
    applied: int = Field(default=0, ge=0)
    invalid: int = Field(default=0, ge=0)
    log: LogIdentity | None = None


class SignalCursor(_Strict):
    schema_version: Literal[1] = 1
    offset: int = Field(default=0, ge=0)
