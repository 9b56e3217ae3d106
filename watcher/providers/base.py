"""The one small provider interface: one call in, one classified outcome out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from watcher.models import AttemptError, Prompt, Usage, Verdict

# Kinds after which the batch must stop at once (SPEC §6): more calls would only be refused.
STOP_KINDS = frozenset({"rate_limited", "quota_exhausted", "auth"})


@dataclass(frozen=True, kw_only=True)
class CallResult:
    """Exactly one of ``verdict`` / ``error``; ``raw``/``usage`` whenever a response arrived."""

    verdict: Verdict | None = None
    error: AttemptError | None = None
    raw: str | None = None
    usage: Usage | None = None
    duration_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.verdict is None) == (self.error is None):
            raise ValueError("CallResult needs exactly one of verdict or error")

    @property
    def stops_batch(self) -> bool:
        return self.error is not None and self.error.kind in STOP_KINDS


class Provider(Protocol):
    """Makes exactly one model request per :meth:`complete`; never retries, never raises for
    HTTP, network or parse problems (those are classified into ``CallResult.error``)."""

    name: str
    model: str

    def complete(self, prompt: Prompt) -> CallResult: ...
