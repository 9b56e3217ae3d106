"""The month's token tally (SPEC §16.4): what ``WATCHER_MONTHLY_TOKENS`` is checked against.

Pure rules over ``tokens.json``; the store reads and writes it, and
:mod:`watcher.pipeline.budget` decides with it under the pipeline lock.

A call's *worst case* is its cached prompt at 4 characters a token plus the output cap every
request asks for. The tally holds one UTC month, the month of the attempts' ``reserved_at`` (as
``watcher usage`` counts them): ``settled``, the tokens of the month's attempts whose outcome is
known — their recorded usage, or their worst case when none was recorded — and ``open``, the worst
case of each attempt reserved and not settled yet, by :func:`key_of`. The month's used total is
the two added up: a check under the lock reads one small file, never the month's inbox files
(SPEC §15.1 keeps each hold short).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from watcher.errors import ConfigError
from watcher.models import Attempt, Prompt
from watcher.state.drafts_model import Draft

# The output tokens every request asks for at most (max_tokens / max_completion_tokens): enough
# for the verdict with room for a reasoning model's thinking. watcher/providers/_http.py sends it.
OUTPUT_CAP = 2048
CHARS_PER_TOKEN = 4


class TokenTally(BaseModel):
    """``tokens.json``: one UTC month's tokens, settled and still open (see the module's doc)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    SCHEMA_VERSION: ClassVar[int] = 1
    schema_version: Literal[1] = 1
    month: str = Field(pattern=r"^\d{4}-(0[1-9]|1[0-2])$")
    settled: int = Field(default=0, ge=0)
    open: dict[str, int] = Field(default_factory=dict)

    @property
    def used(self) -> int:
        """The month's tokens: those settled, and each open reservation at its worst case."""
        return self.settled + sum(self.open.values())

    def opened(self, key: str, worst: int) -> TokenTally:
        return self.model_copy(update={"open": {**self.open, key: worst}})

    def settle(self, key: str, tokens: int) -> TokenTally:
        """``key`` leaves the open reservations and counts ``tokens`` (none if it was not open)."""
        if key not in self.open:
            return self
        rest = {k: v for k, v in self.open.items() if k != key}
        return self.model_copy(update={"open": rest, "settled": self.settled + max(tokens, 0)})


def worst_case(prompt: Prompt, output_cap: int = OUTPUT_CAP) -> int:
    """The most one call with this cached prompt can cost: the prompt at 4 characters a token,
    rounded up, plus the output cap (a draft asks for less: its own cap)."""
    chars = len(prompt.system) + len(prompt.user)
    return -(-chars // CHARS_PER_TOKEN) + output_cap


def key_of(comment_id: str, n: int, kind: str = "") -> str:
    """The open entry of attempt ``n`` of a comment: ``<id>/<n>`` for a verdict's attempt,
    ``<kind>:<id>/<n>`` for another kind of call (a draft: ``draft``)."""
    return f"{kind}:{comment_id}/{n}" if kind else f"{comment_id}/{n}"


def parse_key(key: str) -> tuple[str, str, int]:
    """``(kind, comment id, n)`` of a :func:`key_of` (kind ``""`` for a verdict's attempt); a key
    that is neither gives n 0."""
    kind, _, rest = key.rpartition(":")
    cid, _, n = rest.rpartition("/")
    return kind, cid, int(n) if n.isdigit() else 0


def used_by(attempt: Attempt, worst: int) -> int:
    """What one attempt whose call is over counts: the usage the provider reported; nothing when
    the request never left the machine (SPEC §16.3); else its worst case — the one it was admitted
    with, or ``worst`` for an attempt reserved before it was recorded."""
    if attempt.not_sent:
        return 0
    usage = attempt.usage
    if usage is not None and (usage.input_tokens is not None or usage.output_tokens is not None):
        return (usage.input_tokens or 0) + (usage.output_tokens or 0)
    return attempt.worst_tokens or worst


def draft_used(draft: Draft, worst: int) -> int:
    """What one reply draft whose call is over counts (SPEC §16.5 drafts are provider calls too):
    the usage the provider reported, else the worst case it was admitted with, else ``worst``."""
    if draft.input_tokens is not None or draft.output_tokens is not None:
        return (draft.input_tokens or 0) + (draft.output_tokens or 0)
    return draft.worst_tokens or worst


def next_month(month: str) -> str:
    """The UTC month after ``month`` (both YYYY-MM)."""
    year, number = int(month[:4]), int(month[5:7])
    return f"{year + number // 12:04d}-{number % 12 + 1:02d}"


def parse_monthly_tokens(value: Any) -> int | None:
    """``WATCHER_MONTHLY_TOKENS`` / ``monthly_tokens``: a whole number of tokens, at least 1
    (``_`` or ``,`` may group its digits), else a configuration error (exit 2); ``None`` (unset):
    no limit."""
    if value is None:
        return None
    text = str(value).strip().replace("_", "").replace(",", "")
    if isinstance(value, bool) or not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise ConfigError(
            f"WATCHER_MONTHLY_TOKENS must be a whole number of tokens, at least 1, got {value!r} "
            "(unset it for no monthly limit)"
        )
    return int(text)
