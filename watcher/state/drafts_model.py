"""A reply draft as the inbox file keeps it (SPEC §16.5): ``drafts``, newest last.

Apart from :mod:`watcher.models` (which imports this module for :class:`InboxRecord`'s field), and
so importing nothing of it: its base and error are its own, shaped like the attempt's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class DraftError(_Strict):
    """Why a draft has no text: the classified kind of its call (an attempt's error kinds), or
    ``interrupted`` (its process died, or the person stopped it, during the call)."""

    kind: str
    message: str
    http_status: int | None = None
    retry_after_s: float | None = None


class Draft(_Strict):
    """One reply draft: reserved (``outcome: null``) durably before its call, like an attempt
    (SPEC §7, §15.1), and counted toward the comment's 3 drafts whatever came of it."""

    n: int = Field(ge=1)
    reserved_at: str
    entrypoint: Literal["cli", "bridge"]
    pid: int
    provider: str
    model: str
    outcome: Literal["ok", "error"] | None = None
    finished_at: str | None = None
    # The reply, redacted like a verdict (SPEC §13.5); for the author to edit and post.
    text: str | None = None
    error: DraftError | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_ms: int | None = None
    # The most its call could cost, as WATCHER_MONTHLY_TOKENS admitted it (SPEC §16.4): what it
    # counts when no usage was reported; null for a provider that spends no tokens.
    worst_tokens: int | None = Field(default=None, ge=0)
