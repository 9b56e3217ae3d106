"""The free probe (SPEC §13.1): does the provider's models endpoint know :attr:`model`?

One GET of the model's own path, two with the list fallback; same client, headers and deadline
as a call (:meth:`~watcher.providers._http.HttpProvider.send`). It reserves nothing, spends no
tokens and never raises for HTTP or network problems; the provider redacts what it returns.
"""

from __future__ import annotations

import difflib
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from watcher.models import ErrorKind
from watcher.providers._wire import Received, ResponseTooLarge
from watcher.providers.base import ProbeResult
from watcher.providers.classify import (
    Transport,
    classify,
    no_models_endpoint_message,
    retry_after_seconds,
)
from watcher.providers.registry import provider_spec


class _ErrorFields(Protocol):
    @property
    def type(self) -> str | None: ...
    @property
    def code(self) -> str | None: ...
    @property
    def message(self) -> str | None: ...


class Probed(Protocol):
    """What the probe uses of a provider (:class:`watcher.providers._http.HttpProvider` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    def send(self, method: str, path: str) -> Received: ...
    def transport_failure(self, exc: Exception, url: str) -> tuple[Transport, str]: ...
    def error_fields(self, data: dict[str, Any] | None) -> _ErrorFields: ...
    def describe(
        self, kind: ErrorKind, status: int, detail: str | None, retry: float | None
    ) -> str: ...
    def said(self, text: str) -> str: ...
    def list_models_hint(self) -> str: ...


# A models endpoint that answers these has no such route: try the list, or say it has none.
_NO_ROUTE = frozenset({404, 405, 501})
_CLOSEST_SHOWN = 3
_LISTED_MODELS_SHOWN = 8


def probe_models(provider: Probed) -> ProbeResult:
    """Ask for the model by name; a 404/405 without ``model_not_found`` falls back to the list."""
    endpoint = provider_spec(provider.name).models_endpoint
    if endpoint is None:
        return ProbeResult(ok=True, message=f"{provider.name}: no models endpoint to ask")
    path = endpoint.model_path.format(model=quote(provider.model, safe=""))
    answer = _get(provider, path)
    if isinstance(answer, ProbeResult):
        return answer
    if 200 <= answer.status_code < 300 and answer.json_object() is None:
        # A web page (a proxy's or a UI's catch-all) is no model: only the list can tell.
        return _from_list(provider, endpoint.list_path) if endpoint.list_path else _no_list(answer)
    if 200 <= answer.status_code < 300:
        found = f"{provider.name}: model {provider.model} found at {answer.url}"
        return ProbeResult(ok=True, message=found)
    if answer.status_code not in _NO_ROUTE:
        return _refused(provider, answer)
    # OpenAI names the missing model in its 404; a bare 404 may just mean no such route
    # (llama.cpp, vLLM), so only the list can tell.
    code = provider.error_fields(answer.json_object()).code
    if endpoint.list_path is None:
        return _model_not_found(provider, answer, listed=None)
    if code == "model_not_found":
        # Known missing; the list only names the closest models to choose from.
        listing = _get(provider, endpoint.list_path)
        ids = (
            _model_ids(listing.json_object())
            if not isinstance(listing, ProbeResult) and 200 <= listing.status_code < 300
            else None
        )
        if ids is None or isinstance(listing, ProbeResult):
            return _model_not_found(provider, answer, listed=None)
        return _model_not_found(provider, listing, listed=ids)
    return _from_list(provider, endpoint.list_path)


def _from_list(provider: Probed, path: str) -> ProbeResult:
    """The fallback: fetch the model list and look for the model in it."""
    listing = _get(provider, path)
    if isinstance(listing, ProbeResult):
        return listing
    if not 200 <= listing.status_code < 300 and listing.status_code not in _NO_ROUTE:
        return _refused(provider, listing)
    listed = _model_ids(listing.json_object()) if listing.status_code < 300 else None
    if listed is None:
        return _no_list(listing)
    if _listed(provider.model, listed):
        message = f"{provider.name}: model {provider.model} listed at {listing.url}"
        return ProbeResult(ok=True, message=message)
    return _model_not_found(provider, listing, listed=listed)


def _no_list(answer: Received) -> ProbeResult:
    """404/405/501, or a page that is not a model list (HTML): the base URL's path is wrong, or the
    server has no models list at all; either way nothing here can vouch for the model."""
    message = no_models_endpoint_message(str(answer.url))
    return ProbeResult(ok=False, kind="no_models_endpoint", message=message)


def _get(provider: Probed, path: str) -> Received | ProbeResult:
    url = provider.base_url + path
    try:
        return provider.send("GET", path)
    except ResponseTooLarge as exc:
        message = f"{provider.name} HTTP {exc.status_code}: {exc} from {url}"
        return ProbeResult(ok=False, kind="network", message=message)
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        kind, message = provider.transport_failure(exc, url)
        return ProbeResult(ok=False, kind=kind, message=message)


def _refused(provider: Probed, response: Received) -> ProbeResult:
    err = provider.error_fields(response.json_object())
    kind = classify(
        status=response.status_code,
        error_type=err.type,
        error_code=err.code,
        error_message=err.message,
    )
    retry = retry_after_seconds(
        response.headers.get("retry-after"), value_ms=response.headers.get("retry-after-ms")
    )
    message = provider.describe(kind or "server_error", response.status_code, err.message, retry)
    return ProbeResult(ok=False, kind=kind or "server_error", message=message)


def _model_not_found(
    provider: Probed, response: Received, *, listed: list[str] | None
) -> ProbeResult:
    name, model = provider.name, provider.model
    if listed is not None:
        shown = ", ".join(listed[:_LISTED_MODELS_SHOWN]) or "none"
        more = ", …" if len(listed) > _LISTED_MODELS_SHOWN else ""
        what = f"{name}: model {model} is not among those {response.url} lists ({shown}{more})"
        closest = difflib.get_close_matches(model, listed, n=_CLOSEST_SHOWN, cutoff=0.4)
        what += f"; the closest listed: {', '.join(closest)}" if closest else ""
    else:
        said = provider.error_fields(response.json_object()).message
        what = f"{name} HTTP {response.status_code}: model {model} not found at {response.url}"
        what += f" (provider said: {provider.said(said)})" if said else ""
    message = f"{what}; {provider.list_models_hint()}"
    return ProbeResult(ok=False, kind="model_not_found", message=message)


def _model_ids(data: dict[str, Any] | None) -> list[str] | None:
    # OpenAI and every compatible server: {"object": "list", "data": [{"id": …}, …]}.
    entries = data.get("data") if data is not None else None
    if not isinstance(entries, list):
        return None
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


def _listed(model: str, ids: list[str]) -> bool:
    # Ollama lists "llama3.2:latest" and answers to "llama3.2" (and the other way round).
    def bare(name: str) -> str:
        return name.removesuffix(":latest")

    return bare(model) in {bare(i) for i in ids}
