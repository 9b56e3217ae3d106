"""Model providers: one call in, one classified outcome out (SPEC §6).

    make_provider(settings) -> Provider          the registry entry settings.provider names
    provider.complete(prompt) -> CallResult      exactly one request, never retried, never raises
                                                 for HTTP, network or parse problems
    provider.probe() -> ProbeResult              is the server up and the model there? one or two
                                                 GETs of its models endpoint; no attempt, no tokens
    provider.close()                             release the connection pool
    parse_verdict_text(text) -> Verdict | AttemptError
    verdict_json_schema() -> dict                strict schema sent with every request

Which providers exist, their defaults, key variables, implementation and models endpoint are
one table, :data:`watcher.providers.registry.PROVIDERS`; config and :func:`make_provider` both
read it. To add a provider: one :class:`~watcher.providers.registry.ProviderSpec` there and an
implementation module (an :class:`~watcher.providers._http.HttpProvider` subclass names its
path, headers, body and answer; it overrides ``error_fields`` if its error bodies differ).

Every HTTP request (call and probe) is one bounded exchange (:mod:`watcher.providers._wire`):
``WATCHER_TIMEOUT`` is a total deadline, connect to last byte, and a body is read at most to
1 MiB. A call that made no connection is ``unreachable``; a model the provider does not know is
``model_not_found`` (:mod:`watcher.providers.classify`).

What a call or a probe returns leaves the provider through one boundary,
:class:`watcher.providers.redact.Redaction`: the API key, literal or JSON-escaped (``\\/``,
``\\uXXXX``), is taken out of the raw body (before its 16 KiB cut), every verdict string and every
message (SPEC §13.5). The offline provider has no key and nothing to redact.

The HTTP providers (and httpx) are imported only when :func:`make_provider` builds one, so
commands that never call a model do not pay for them (:mod:`watcher.providers.registry` gives
the figure); the offline provider never imports httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watcher.errors import ConfigError
from watcher.providers.base import CallResult, ProbeResult, Provider, ProviderSettings
from watcher.providers.parse import parse_verdict_text, verdict_json_schema
from watcher.providers.registry import PROVIDERS, ProviderSpec, provider_spec
from watcher.util.urls import check_http_url

if TYPE_CHECKING:
    import httpx

__all__ = [
    "PROVIDERS",
    "CallResult",
    "ProbeResult",
    "Provider",
    "ProviderSettings",
    "ProviderSpec",
    "make_provider",
    "parse_verdict_text",
    "provider_spec",
    "verdict_json_schema",
]


def make_provider(
    settings: ProviderSettings, *, transport: httpx.BaseTransport | None = None
) -> Provider:
    """The provider ``settings.provider`` names; ``transport`` replaces the network (tests).

    Raises :class:`ConfigError` for an unknown provider, a missing key or an unusable base URL.
    """
    spec = provider_spec(settings.provider)
    if spec.needs_key and (settings.api_key is None or not settings.api_key.get_secret_value()):
        raise ConfigError(f"No API key for provider {spec.name} — set {spec.key_hint()}")
    if spec.is_remote:  # config checked it already, but Settings may be built by hand
        check_http_url(settings.base_url, "WATCHER_BASE_URL")
    return spec.build(settings, transport=transport)
