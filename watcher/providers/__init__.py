"""Model providers: one call in, one classified outcome out (SPEC §6).

    make_provider(settings) -> Provider          openai | anthropic | offline
    provider.complete(prompt) -> CallResult      exactly one request, never retried, never raises
                                                 for HTTP, network or parse problems
    parse_verdict_text(text) -> Verdict | AttemptError
    verdict_json_schema() -> dict                strict schema sent with every request

The HTTP providers (and httpx) are imported only when :func:`make_provider` builds one, so
commands that never call a model do not pay for them; the offline provider never imports httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watcher.config import check_http_url
from watcher.errors import ConfigError
from watcher.providers.base import STOP_KINDS, CallResult, Provider
from watcher.providers.parse import parse_verdict_text, verdict_json_schema

if TYPE_CHECKING:
    import httpx

    from watcher.config import Settings

__all__ = [
    "STOP_KINDS",
    "CallResult",
    "Provider",
    "make_provider",
    "parse_verdict_text",
    "verdict_json_schema",
]


def make_provider(settings: Settings, *, transport: httpx.BaseTransport | None = None) -> Provider:
    """The provider ``settings.provider`` names; ``transport`` replaces the network (tests).

    Raises :class:`ConfigError` for an unknown provider, a missing key or an unusable base URL.
    """
    if settings.provider == "offline":
        from watcher.providers.offline import OfflineProvider

        return OfflineProvider()
    if settings.provider not in ("openai", "anthropic"):
        raise ConfigError(f"unknown provider {settings.provider!r}: choose openai, anthropic or offline")
    if settings.api_key is None or not settings.api_key.get_secret_value():
        raise ConfigError(f"No API key for provider {settings.provider} — set WATCHER_API_KEY")
    check_http_url(settings.base_url, "WATCHER_BASE_URL")  # Settings may be built by hand
    if settings.provider == "openai":
        from watcher.providers.openai import OpenAIProvider

        return OpenAIProvider(settings, transport=transport)
    from watcher.providers.anthropic import AnthropicProvider

    return AnthropicProvider(settings, transport=transport)

