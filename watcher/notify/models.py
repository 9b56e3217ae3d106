"""The outbox's file format (SPEC §16.1): ``outbox/<id>.json``, one message with its news and
what became of it at each target. A file of this release only: ``schema_version`` 1."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, field_validator

from watcher.models import _iso_time, _StateFile, _Strict

_ID = re.compile(r"^[a-z0-9]{1,32}$")


class NewsComment(_Strict):
    """A comment that needs a reply, as the message shows it (raw: made safe when rendered)."""

    id: str
    priority: str
    category: str
    author: str
    article: str
    summary: str
    excerpt: str
    url: str
    edited: int = 0  # judged again after this many edits on dev.to: the verdict is the newest's
    hint: str = ""  # what the person should know first (an old verdict shown, a grant to give)


class TargetFate(_Strict):
    """What became of the message at one target (named by :attr:`Target.id`, never its URL)."""

    target: str
    shown: str
    accepted_at: str | None = None
    attempts: int = 0
    first_failed_at: str | None = None
    last_error: str | None = None
    gave_up_at: str | None = None

    _times = field_validator("accepted_at", "first_failed_at", "gave_up_at")(_iso_time)

    @property
    def open(self) -> bool:
        return self.accepted_at is None and self.gave_up_at is None


class OutboxMessage(_StateFile):
    """``outbox/<id>.json``. A file of this release only: version 1."""

    SCHEMA_VERSION: ClassVar[int] = 1
    schema_version: Literal[1] = 1
    id: str
    created_at: str
    _created = field_validator("created_at")(_iso_time)
    news: list[str] = Field(description="The keys of the news it carries (message.News.keys).")
    comments: list[NewsComment] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list)
    waiting: int = Field(0, description="Comments the round left unjudged for the next rounds.")
    test: bool = False
    targets: list[TargetFate]

    @field_validator("id")
    @classmethod
    def _safe_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("an outbox id is 1-32 lower-case letters and digits")
        return value

    @property
    def done(self) -> bool:
        return not any(t.open for t in self.targets)
