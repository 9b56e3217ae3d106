"""The one small provider interface: one call in, one classified outcome out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from watcher.models import AttemptError, Prompt, Usage, Verdict

if TYPE_CHECKING:
    from pydantic import SecretStr


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


@dataclass(frozen=True, kw_only=True)
class TextResult:
    """A free-text answer (a reply draft, SPEC §16.5): exactly one of ``text`` / ``error``."""

    text: str | None = None
    error: AttemptError | None = None
    raw: str | None = None
    usage: Usage | None = None
    duration_ms: int | None = None

    def __post_init__(self) -> None:
        if (self.text is None) == (self.error is None):
            raise ValueError("TextResult needs exactly one of text or error")


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    """Whether the provider answers and knows the model, found without spending anything.

    ``kind`` is ``None`` when ``ok``; otherwise ``unreachable`` (no connection made),
    ``model_not_found``, ``no_models_endpoint`` (the server has no models endpoint, so the probe
    cannot tell), or a :func:`~watcher.providers.classify.classify` kind of the answer
    (``auth``, ``rate_limited``, ``quota_exhausted``, ``server_error``, ``timeout``, …).
    ``message`` says what happened and what to change; it never contains the key.
    """

    ok: bool
    kind: str | None = None
    message: str

    def __post_init__(self) -> None:
        if self.ok != (self.kind is None):
            raise ValueError("ProbeResult: kind is None exactly when ok")


class Provider(Protocol):
    """Makes exactly one model request per :meth:`complete`; never retries, never raises for
    HTTP, network or parse problems (those are classified into ``CallResult.error``).

    :meth:`probe` asks the provider's models endpoint whether :attr:`model` exists: it reserves
    no attempt and spends no tokens. :meth:`close` releases the connection pool.
    """

    # Read-only properties: an implementation may declare them per class (``ClassVar``) or per
    # instance, and mypy accepts both only for a read-only protocol member.
    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    def complete(self, prompt: Prompt) -> CallResult: ...

    def probe(self) -> ProbeResult: ...

    def close(self) -> None: ...


class ProviderSettings(Protocol):
    """What the providers read of the settings; :class:`watcher.config.Settings` is one.

    Named here, not imported from :mod:`watcher.config`: config reads the provider registry for
    its defaults, so the providers depend only downwards (tests/test_imports.py holds the graph
    free of cycles).
    """

    # Read-only, as the frozen Settings dataclass has them.
    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def base_url(self) -> str: ...

    # ``user:password`` (percent-encoded) from WATCHER_BASE_URL, kept apart from ``base_url`` so
    # that no message, file or status line built from the URL holds it (SPEC §15.5).
    @property
    def base_url_auth(self) -> SecretStr | None: ...

    @property
    def api_key(self) -> SecretStr | None: ...

    # The variable (or config file entry) the key came from, for messages: a refused key is
    # fixed where it was set, OPENAI_API_KEY as often as WATCHER_API_KEY.
    @property
    def api_key_from(self) -> str | None: ...

    @property
    def timeout(self) -> float: ...
