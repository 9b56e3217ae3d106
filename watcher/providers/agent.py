"""The agent provider: the agent in the loop (Codex, Claude Code) gives the verdicts (SPEC §14).

watcher never calls it. ``claim`` reserves attempts for the agent and hands it the cached prompts
with the verdict schema; ``submit`` validates what it answers (:mod:`watcher.pipeline.agent`).
This class exists so that the registry, ``watcher check`` and the factory treat it like every
other provider: no key, no base URL, nothing to probe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watcher.models import Prompt
from watcher.providers.base import CallResult, ProbeResult, ProviderSettings

NAME = "agent"
HOW = (
    "the agent you work with (Codex, Claude Code) gives the verdicts over MCP: tool claim hands it "
    "the comments, tool submit stores its verdicts (or `watcher claim` / `watcher submit`); "
    "no API key is needed"
)


class AgentProvider:
    """Never called: the pipeline asks the registry (``calls_model``) before any call."""

    name = NAME

    def __init__(
        self, settings: ProviderSettings | None = None, *, transport: object = None
    ) -> None:
        """Takes what every provider's factory takes (the registry builds them alike)."""
        self.model = settings.model if settings is not None else NAME

    def complete(self, prompt: Prompt) -> CallResult:
        # A bug, not an outcome: an attempt reserved for a call that cannot happen would be spent.
        raise RuntimeError(
            "the agent provider is never called: the agent claims and submits (SPEC §14)"
        )

    def probe(self) -> ProbeResult:
        """Always passes: there is no server to be down and no key to be wrong."""
        return ProbeResult(ok=True, message=HOW)

    def close(self) -> None:
        """Nothing to release."""


if TYPE_CHECKING:  # mypy --strict proves here that the class satisfies the Provider protocol
    from watcher.providers.base import Provider

    _IS_A_PROVIDER: type[Provider] = AgentProvider
