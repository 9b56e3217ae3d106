"""What the HTTP providers share: one request, no retries, every outcome classified.

Imported only by :mod:`watcher.providers.openai` and :mod:`watcher.providers.anthropic`, so a
command that never calls a model never imports httpx.

The no-retry promise (SPEC §1: at most 3 calls per comment, each reserved durably first) needs
both halves: no loop here, and httpx's own transport, whose default ``retries=0`` means httpcore
does not quietly reconnect and resend either (tests/test_providers_loopback.py pins it). httpx
builds that transport itself, so it also reads ``HTTPS_PROXY``/``NO_PROXY`` and ``SSL_CERT_FILE``
as it documents (``trust_env``). Every request goes through
:func:`~watcher.providers._wire.exchange`: ``WATCHER_TIMEOUT`` bounds the whole call (connect to
last byte) and a body is read at most to 1 MiB (SPEC §13.1); the probe reads the same way.

Everything a call or a probe returns passes one boundary on the way out, :meth:`complete` and
:meth:`probe` themselves: :class:`~watcher.providers.redact.Redaction` takes the key out of the
raw body (before its 16 KiB cut), every verdict string and every message (SPEC §13.5). The server's
words inside a message are also redacted before they are clipped (:meth:`HttpProvider.said`).
"""

from __future__ import annotations

import functools
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar
from urllib.parse import unquote

import httpx

from watcher.models import AttemptError, ErrorKind, Prompt, Usage
from watcher.providers._probe import probe_models
from watcher.providers._wire import (
    DeadlinePassed,
    Received,
    ResponseTooLarge,
    Sockets,
    exchange,
    limits,
)
from watcher.providers.base import CallResult, ProbeResult, ProviderSettings, TextResult
from watcher.providers.classify import (
    Stop,
    Transport,
    classify,
    is_missing_route,
    missing_route_message,
    retry_after_seconds,
)
from watcher.providers.parse import parse_verdict_text
from watcher.providers.redact import Redaction, as_key, credential_secrets
from watcher.providers.registry import provider_spec
from watcher.state.tokens import OUTPUT_CAP
from watcher.util.urls import marked, split_credentials

# Enough for the verdict (≤ ~800 characters of JSON) with room for a reasoning model's
# thinking; a hard ceiling on what one call can cost, which the monthly token budget counts.
MAX_OUTPUT_TOKENS = OUTPUT_CAP
USER_AGENT = "devto-watcher/0.1 (+https://github.com/devto-watcher)"
_SERVER_MESSAGE_LIMIT = 300
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """What a 2xx body says: the answer text (``None`` if there is none), how it stopped, and a
    note for the error message (the refusal text, the finish reason, what is missing)."""

    text: str | None
    stop: Stop | None = None
    note: str = "the response has no answer text"


class NoResponse(NamedTuple):
    """A call that got no whole response: its error, the head of a body too large, how long."""

    error: AttemptError
    raw: str | None
    duration_ms: int


class ErrorFields(NamedTuple):
    """The error object of a response body, as :func:`classify` takes it."""

    type: str | None = None
    code: str | None = None
    message: str | None = None


class HttpProvider:
    """One provider over httpx. Subclasses describe the wire format; this class owns the call."""

    name: ClassVar[str]
    path: ClassVar[str]
    # Names of the input and output token counts inside the body's "usage" object.
    usage_keys: ClassVar[tuple[str, str]]

    def __init__(
        self, settings: ProviderSettings, *, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.model = settings.model
        self._secret = settings.api_key.get_secret_value() if settings.api_key is not None else ""
        self._key_from = settings.api_key_from or "WATCHER_API_KEY"
        # Credentials in WATCHER_BASE_URL (a proxy's login) go in the Authorization header, as
        # httpx sends a URL's userinfo, and never into a URL that a message or a file could
        # show (SPEC §15.5). Config took them out of base_url already; a Settings built by
        # hand may still have them there.
        bare, userinfo = split_credentials(settings.base_url.rstrip("/"))
        if settings.base_url_auth is not None:
            userinfo = settings.base_url_auth.get_secret_value()
        self._redaction = Redaction(as_key(self._secret), *credential_secrets(userinfo))
        self._timeout_s = settings.timeout
        # As messages name it: "http://[redacted]@host/v1" when credentials go with it.
        self.base_url = marked(bare) if userinfo else bare
        self._url = self.base_url + self.path
        self._sockets = Sockets()  # the client's sockets, for the deadline to cut
        self._client = httpx.Client(
            base_url=bare,
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "application/json",
                **self.auth_headers(self._secret),
            },
            auth=_basic_auth(userinfo),
            timeout=httpx.Timeout(settings.timeout),
            limits=limits(),
            verify=_tls_context(),
            trust_env=True,
            # None: httpx builds the transport (and one per proxy the environment names); tests
            # hand in an httpx.MockTransport here, httpx's own seam.
            transport=transport if transport is not None else default_transport(bare),
            follow_redirects=False,
        )

    # ---- wire format (subclasses) --------------------------------------------------------------

    def auth_headers(self, secret: str) -> dict[str, str]:
        raise NotImplementedError

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        raise NotImplementedError

    def text_request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        raise NotImplementedError

    def extract(self, data: dict[str, Any]) -> Answer:
        raise NotImplementedError

    def usage_of(self, data: dict[str, Any]) -> Usage:
        """Token counts from ``data["usage"]``, each ``None`` unless a non-negative integer."""
        counts = data.get("usage")
        if not isinstance(counts, dict):
            return Usage()
        input_key, output_key = self.usage_keys
        return Usage(
            input_tokens=_count(counts.get(input_key)), output_tokens=_count(counts.get(output_key))
        )

    def error_fields(self, data: dict[str, Any] | None) -> ErrorFields:
        """The error object of a JSON body (any status), for :func:`classify`.

        Reads the OpenAI shape ``{"error": {"message", "type", "code"}}``, Anthropic's
        ``{"type": "error", "error": {"type", "message"}}`` and ``{"error": "text"}`` (some
        compatible servers). A provider whose errors look different (Gemini: an integer ``code``
        and ``status: RESOURCE_EXHAUSTED``) overrides this and maps its body onto these fields.
        """
        error = data.get("error") if data is not None else None
        if isinstance(error, str):
            return ErrorFields(message=error)
        if not isinstance(error, dict):
            return ErrorFields()
        return ErrorFields(
            _str(error.get("type")), _str(error.get("code")), _str(error.get("message"))
        )

    # ---- the call ------------------------------------------------------------------------------

    def complete(self, prompt: Prompt) -> CallResult:
        """Exactly one POST, bounded by the total deadline and the body cap; never raises for
        HTTP, network or parse problems. The result holds the key nowhere (the boundary)."""
        return self._redaction.call(self._call(prompt))

    def _call(self, prompt: Prompt) -> CallResult:
        sent = self._post(self.request_body(prompt))
        if isinstance(sent, NoResponse):
            return CallResult(error=sent.error, raw=sent.raw, duration_ms=sent.duration_ms)
        return self.interpret(sent[0], duration_ms=sent[1])

    def complete_text(self, prompt: Prompt, *, max_tokens: int) -> TextResult:
        """One POST for free text (a reply draft, SPEC §16.5): no response format, at most
        ``max_tokens`` out; bounded, classified and redacted exactly as :meth:`complete`."""
        sent = self._post(self.text_request_body(prompt, max_tokens))
        if isinstance(sent, NoResponse):
            result = TextResult(error=sent.error, raw=sent.raw, duration_ms=sent.duration_ms)
        else:
            response, duration_ms = sent
            text, error, usage = self._judge(response, _answer_text)
            raw = response.text if error is not None else None
            result = TextResult(
                text=text, error=error, raw=raw, usage=usage, duration_ms=duration_ms
            )
        return self._redaction.text_call(result)

    def _post(self, body: dict[str, Any]) -> tuple[Received, int] | NoResponse:
        """The one POST of a call: the response and its duration in ms, or why there is none."""
        started = time.monotonic()
        try:
            response = self.send("POST", self.path, body)
        except ResponseTooLarge as exc:
            message = f"{self.name} HTTP {exc.status_code}: {exc} from {self._url}"
            error = AttemptError(kind="network", message=message, http_status=exc.status_code)
            raw = exc.head.decode("utf-8", "replace") if exc.head else None
            return NoResponse(error, raw, _elapsed_ms(started))
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            kind, message = self.transport_failure(exc, self._url)
            return NoResponse(AttemptError(kind=kind, message=message), None, _elapsed_ms(started))
        return response, _elapsed_ms(started)

    def close(self) -> None:
        self._client.close()

    def interpret(self, response: Received, *, duration_ms: int) -> CallResult:
        """Classify a response that arrived. Raw body, usage and duration are always kept (the
        whole body: :meth:`complete` redacts it, then cuts it to 16 KiB)."""
        verdict, error, usage = self._judge(response, parse_verdict_text)
        if error is None and verdict is not None:
            return CallResult(
                verdict=verdict, raw=response.text, usage=usage, duration_ms=duration_ms
            )
        assert error is not None
        return CallResult(error=error, raw=response.text, usage=usage, duration_ms=duration_ms)

    def _judge(
        self, response: Received, parse: Callable[[str], T | AttemptError]
    ) -> tuple[T | None, AttemptError | None, Usage]:
        """What a response says: the answer ``parse`` made of its text, or the classified error;
        and the usage. The verdict's and the draft's one classification (SPEC §6 table)."""
        data = response.json_object()
        usage = self.usage_of(data) if data is not None else Usage()
        status = response.status_code
        err_type, err_code, err_message = self.error_fields(data)
        answer, parsed = None, None
        if 200 <= status < 300 and not (err_type or err_code):
            answer, parsed = self._read_answer(data, parse)
        kind = classify(
            status=status,
            error_type=err_type,
            error_code=err_code,
            error_message=err_message,
            stop=answer.stop if answer else None,
            parse_failure=parsed.kind if isinstance(parsed, AttemptError) else None,
        )
        if kind is None and parsed is not None and not isinstance(parsed, AttemptError):
            return parsed, None, usage
        retry = retry_after_seconds(
            response.headers.get("retry-after"), value_ms=response.headers.get("retry-after-ms")
        )
        if answer is not None and answer.stop is not None:
            detail: str | None = answer.note
        else:
            detail = parsed.message if isinstance(parsed, AttemptError) else err_message
        message = self.describe(kind or "malformed_json", status, detail, retry)
        if kind is not None and is_missing_route(
            status, has_error_object=bool(err_type or err_code or err_message)
        ):
            message = missing_route_message(self.name, status, str(response.url))
        error = AttemptError(
            kind=kind or "malformed_json",
            message=message,
            http_status=status,
            retry_after_s=retry,
        )
        return None, error, usage

    # ---- the probe -----------------------------------------------------------------------------

    def probe(self) -> ProbeResult:
        """Ask the models endpoint whether :attr:`model` exists (:mod:`watcher.providers._probe`).

        Same client, headers and deadline as :meth:`complete`; reserves nothing, spends no tokens,
        never raises for HTTP or network problems. The message holds the key nowhere (the
        boundary).
        """
        return self._redaction.probe(probe_models(self))

    def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Received:
        """One bounded exchange (:func:`~watcher.providers._wire.exchange`) of a call or probe."""
        request = self._client.build_request(method, path, json=body)
        return exchange(self._client, request, timeout_s=self._timeout_s, sockets=self._sockets)

    def transport_failure(self, exc: Exception, url: str) -> tuple[Transport, str]:
        """The kind and message for a request that got no complete response (call and probe)."""
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return (
                "unreachable",
                f"{self.name}: could not connect to {url} ({said}); {self.hint('unreachable')}",
            )
        if isinstance(exc, httpx.TimeoutException):
            what = "no complete response" if isinstance(exc, DeadlinePassed) else "no response"
            return (
                "timeout",
                f"{self.name}: {what} from {url} within {self._timeout_s:g} s (WATCHER_TIMEOUT)",
            )
        return "network", f"{self.name}: could not reach {url}: {type(exc).__name__}: {exc}"

    def _read_answer(
        self, data: dict[str, Any] | None, parse: Callable[[str], T | AttemptError]
    ) -> tuple[Answer, T | AttemptError]:
        answer = (
            self.extract(data)
            if data is not None
            else Answer(None, note="the response body is not JSON")
        )
        if answer.text is None:
            return answer, AttemptError(kind="malformed_json", message=answer.note)
        return answer, parse(answer.text)

    # ---- helpers -------------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """``text`` without the API key, literal or JSON-escaped (a misbehaving server or proxy
        may echo it back)."""
        return self._redaction.text(text)

    def said(self, text: str) -> str:
        """The server's words, fit for a message: valid Unicode, one line, no key, at most 300
        characters.

        The order matters: replacing a lone surrogate (``"\\ud800"`` escaped in its JSON would make
        printing the summary fail after the outcome was saved) or folding whitespace can spell
        the key anew, and clipping before redacting could keep a prefix that no longer matches it.
        """
        fixed = text.encode("utf-8", "replace").decode("utf-8")
        return _clip(self.redact(" ".join(fixed.split())))

    def describe(
        self, kind: ErrorKind, status: int, detail: str | None, retry: float | None
    ) -> str:
        """A message that says what happened and what the user can do about it."""
        hint = self.hint(kind, retry)
        if kind in ("malformed_json", "invalid_verdict") and detail:
            return f"{self.name} HTTP {status}: {self.said(detail)}"
        said = f" (provider said: {self.said(detail)})" if detail else ""
        return f"{self.name} HTTP {status}: {hint}{said}"

    def hint(self, kind: ErrorKind, retry: float | None = None) -> str:
        """What happened, in words, and what the user can do about it."""
        wait = f"retry after {retry:g} s" if retry is not None else "wait before the next run"
        hints = {
            "rate_limited": f"rate limited by the provider; {wait}",
            "quota_exhausted": (
                "quota or spend limit exhausted; check the plan and billing of this API key"
            ),
            "auth": (
                f"the provider rejected the API key; check {self._key_from} and its permissions"
            ),
            "unreachable": f"is the server running? check WATCHER_BASE_URL ({self.base_url})",
            "model_not_found": (
                f"the provider does not know model {self.model}; {self.list_models_hint()}"
            ),
            "overloaded": "the provider is overloaded; `watcher recheck` later",
            "server_error": "the provider had an internal error; `watcher recheck` later",
            "bad_request": (
                f"the provider refused the request; check WATCHER_MODEL ({self.model}) and "
                "WATCHER_BASE_URL"
            ),
            "truncated": "the answer was cut off at the output token limit",
            "refused": "the model refused to answer or the answer was filtered",
            "malformed_json": "the answer is not a JSON object",
            "invalid_verdict": "the answer does not match the verdict schema",
        }
        return hints.get(kind, kind)

    def list_models_hint(self) -> str:
        # A 404 for every model usually means the base URL's path is wrong, each provider its
        # own way.
        return f"check WATCHER_MODEL; {provider_spec(self.name).models_hint(self.base_url)}"


def _answer_text(text: str) -> str | AttemptError:
    """A draft's answer as it is; an empty one is no answer."""
    if not text.strip():
        return AttemptError(kind="malformed_json", message="the answer text is empty")
    return text.strip()


def _basic_auth(userinfo: str | None) -> httpx.BasicAuth | None:
    """The Basic auth httpx derives from a URL's ``user:password@`` (percent-decoded), or none."""
    if not userinfo:
        return None
    user, _, password = userinfo.partition(":")
    return httpx.BasicAuth(unquote(user), unquote(password))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CA bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``),
    built once per process and shared by every client.

    httpx builds one per transport otherwise (the client's own and one per proxy it reads from
    the environment), and loading the CA bundle takes 27-43 ms each here (python -m timeit -n 3
    -s "import httpx" "httpx.create_ssl_context()"); a context is safe to share between
    connections and threads, and passing one as ``verify`` is how httpx documents it.
    """
    return httpx.create_ssl_context()


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _clip(text: str) -> str:
    return text if len(text) <= _SERVER_MESSAGE_LIMIT else text[: _SERVER_MESSAGE_LIMIT - 1] + "…"


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


if TYPE_CHECKING:  # mypy --strict proves here that the class satisfies the Provider protocol
    from watcher.providers.base import Provider

    _IS_A_PROVIDER: type[Provider] = HttpProvider


def default_transport(base_url: str) -> httpx.BaseTransport | None:
    """The transport of a provider given none: ``None``, so that httpx builds its own and reads
    the environment's proxies itself. 0.2.0 built one here, and code written against it (its
    test suite's reliability rig among them) may still replace this function: what the
    replacement returns is used."""
    return None
