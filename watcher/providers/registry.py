"""Every provider watcher knows, as one table that config, the factory and the docs all read.

Adding a provider is one :class:`ProviderSpec` in :data:`PROVIDERS` plus its implementation
module; nothing else lists provider names. Imported by :mod:`watcher.config`, so it must stay
cheap: the implementations (and httpx) are named by import path and loaded only by
:meth:`ProviderSpec.build`, so ``watcher --help``, ``status`` and ``inbox`` never import httpx
(73-210 ms of a ~350 ms start here: python -X importtime -c "import watcher.cli.app; import
httpx"). It takes the settings as :class:`~watcher.providers.base.ProviderSettings` and never
imports config.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

from watcher.errors import ConfigError

if TYPE_CHECKING:
    import httpx

    from watcher.providers.base import Provider, ProviderSettings


@dataclass(frozen=True, kw_only=True)
class ModelsEndpoint:
    """Where a provider says, for free, whether a model exists (no tokens, no attempt).

    ``model_path`` is ``GET``-ed first, with ``{model}`` replaced by the URL-quoted model name;
    when it answers 404/405 and ``list_path`` is set, the list is fetched and searched instead
    (llama.cpp and vLLM serve only the list; Ollama lists ``name:latest``).
    """

    model_path: str
    list_path: str | None = None


def _openai_models_hint(base_url: str) -> str:
    return (
        f"list the server's models with GET {base_url}/models (Ollama: `ollama list`), "
        "and check that WATCHER_BASE_URL includes the API path "
        "(OpenAI, Ollama, vLLM, llama.cpp: …/v1)"
    )


def _anthropic_models_hint(base_url: str) -> str:
    bare = base_url.rstrip("/")
    if bare.endswith("/v1"):
        # watcher adds /v1 itself (POST {base}/v1/messages): a base ending in /v1 asks for
        # /v1/v1/….
        return (
            "WATCHER_BASE_URL ends in /v1, which watcher adds itself: set it to "
            f"{bare.removesuffix('/v1')}"
        )
    return f"list the models with GET {bare}/v1/models (x-api-key and anthropic-version headers)"


@dataclass(frozen=True, kw_only=True)
class ProviderSpec:
    """One provider: its defaults, where its key may come from, how to build and probe it."""

    name: str
    default_model: str
    # "" for a provider that makes no HTTP calls: it has no URL to check.
    default_base_url: str
    # Variables read, in order, when WATCHER_API_KEY is unset (e.g. OPENAI_API_KEY).
    key_env: tuple[str, ...]
    needs_key: bool
    # "module:attribute" of a callable ``(settings, *, transport=None) -> Provider``, imported
    # only when a provider is built.
    factory: str
    # None: nothing to probe, the probe always passes (offline, agent).
    models_endpoint: ModelsEndpoint | None
    # False for "agent" (SPEC §14): watcher never calls it. The agent in the loop claims attempts
    # and submits the verdicts itself, so scan and recheck only record comments and close orphans,
    # and no cooldown or breaker applies.
    calls_model: bool = True
    # What to check when the server does not know the model, given the base URL (a provider's own
    # quirks: Ollama's list, Anthropic's /v1 that watcher adds itself).
    models_hint: Callable[[str], str] = _openai_models_hint

    @property
    def is_remote(self) -> bool:
        """Talks HTTP to a base URL (which config checks and a key may go with)."""
        return bool(self.default_base_url)

    def key_hint(self) -> str:
        """Where the user can put the key, for messages: ``WATCHER_API_KEY or OPENAI_API_KEY``."""
        return " or ".join(("WATCHER_API_KEY", *self.key_env))

    def fallback_key(self, env: Mapping[str, str]) -> str | None:
        """The first non-empty of :attr:`key_env` in ``env``, else ``None``."""
        var = self.fallback_key_var(env)
        return env[var] if var else None

    def fallback_key_var(self, env: Mapping[str, str]) -> str | None:
        """The name of the variable :meth:`fallback_key` reads (for messages), else ``None``."""
        return next((var for var in self.key_env if env.get(var)), None)

    def build(
        self, settings: ProviderSettings, *, transport: httpx.BaseTransport | None = None
    ) -> Provider:
        """Import the implementation and build it; ``transport`` replaces the network (tests)."""
        module_name, _, attribute = self.factory.partition(":")
        factory: Any = getattr(importlib.import_module(module_name), attribute)
        return cast("Provider", factory(settings, transport=transport))


PROVIDERS: Mapping[str, ProviderSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            ProviderSpec(
                name="openai",
                # OpenAI's recommended replacement for gpt-4o-mini (shut down 2027-01-14; gpt-5-mini
                # goes 2026-12-11): structured outputs on Chat Completions, $0.10 / $0.50 per MTok.
                default_model="gpt-6-luna",
                default_base_url="https://api.openai.com/v1",
                key_env=("OPENAI_API_KEY",),
                needs_key=True,
                factory="watcher.providers.openai:OpenAIProvider",
                # OpenAI answers /models/{model}; llama.cpp and vLLM only the list.
                models_endpoint=ModelsEndpoint(model_path="/models/{model}", list_path="/models"),
            ),
            ProviderSpec(
                name="anthropic",
                # The current Haiku (Latest since 2026-10-07). claude-3-5-haiku-latest was
                # retired on 2026-02-19 and Claude Haiku 4.5 is Legacy; nothing in our request
                # (forced tool use, no sampling parameters, no prefill, no thinking) is on its
                # migration list.
                default_model="claude-haiku-5-5",
                default_base_url="https://api.anthropic.com",
                key_env=("ANTHROPIC_API_KEY",),
                needs_key=True,
                factory="watcher.providers.anthropic:AnthropicProvider",
                models_endpoint=ModelsEndpoint(model_path="/v1/models/{model}"),
                models_hint=_anthropic_models_hint,
            ),
            ProviderSpec(
                name="offline",
                default_model="heuristic-v2",
                default_base_url="",
                key_env=(),
                needs_key=False,
                factory="watcher.providers.offline:OfflineProvider",
                models_endpoint=None,
            ),
            ProviderSpec(
                name="agent",
                # Recorded on each attempt an agent claims; which model the agent runs is its own.
                default_model="agent",
                default_base_url="",
                key_env=(),
                needs_key=False,
                factory="watcher.providers.agent:AgentProvider",
                models_endpoint=None,
                calls_model=False,
            ),
        )
    }
)


def provider_spec(name: str) -> ProviderSpec:
    """The entry for ``name``; :class:`ConfigError` (exit 2) naming the choices if there is none."""
    try:
        return PROVIDERS[name]
    except KeyError:
        choices = ", ".join(PROVIDERS)
        raise ConfigError(
            f"unknown provider {name!r}: choose one of {choices} (WATCHER_PROVIDER); for Ollama, "
            "vLLM, llama.cpp or another OpenAI-compatible server use openai with WATCHER_BASE_URL "
            "(Ollama: http://localhost:11434/v1)"
        ) from None
