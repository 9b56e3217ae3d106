"""A loopback OpenAI-compatible provider that records every call (SPEC §12).

Each comment used in process tests carries a tag ``TAG:<label>`` in its text; the cached prompt
contains it, so the server knows which comment a request is for. Per label, a script of
behaviours is consumed one per call (the last one repeats):

- ``"verdict"``   a valid verdict; to a reply draft's request (prompts/draft.md, no
  ``response_format``), :data:`DRAFT` as the answer text
- ``"malformed"`` a 200 whose content is not JSON
- ``"429"`` / ``"429:<seconds>"``  rate limited, with ``Retry-After`` (``"429:"`` sends it empty, and
  any text after the colon is sent as it is: ``"429:NaN"``, an HTTP date); ``"429-none"`` sends none
- ``"529"``       overloaded
- ``"hold"``      keep the request open until :meth:`release` (then answer a verdict)
- ``"hold-malformed"``  hold, then answer malformed JSON
- ``"slow"``      answer a verdict after :attr:`FakeProvider.slow_s` seconds
- ``"invalid"``   a 200 whose content is JSON that fails the verdict schema
- ``"401"``       auth error; ``"echo-key-401"`` also echoes the request's Authorization header
  in the body (a misbehaving proxy), so tests can prove the key never reaches the data dir
- ``"echo-key-summary"``  a 200 verdict whose summary and reply_hint quote the key (the request's
  Authorization header without ``Bearer``), as a model that repeats its context might
- ``"echo-key-escaped"``  the same verdict, the key also in a top-level field, every ``/`` sent as
  ``\\/`` (the key's, escaped once more, inside the answer text too)
- ``"echo-key-unicode"``  the same, the key fully ``\\uXXXX``-escaped (hex case alternating)
  (the three spell the key for keys without ``"`` or ``\\``)
- ``"echo-key-400"``  a 400 whose error message quotes the key, once ``\\/``-escaped and once
  ``\\u``-escaped (:func:`key_leaks` tells whether a text still holds the key in any such form)
- ``"surrogate-400"``  a 400 whose JSON error message escapes a lone surrogate (valid JSON,
  not valid Unicode)
- ``"404-model"`` a 404 ``model_not_found`` naming the requested model, as OpenAI answers
- ``"404"``       a bare ``404 page not found``, as Ollama answers a base URL without ``/v1``
- ``"400"``       a plain ``invalid_request_error`` 400 (the request shape, not the model)
- ``"500"``       a ``server_error`` 500
- ``"trickle"``   a 200 verdict whose body is sent one byte every :attr:`FakeProvider.trickle_s`
  seconds (default 1.0), with its full Content-Length: only a total deadline ends it
- ``"huge"``      a 200 with a 3 MiB body (over the 1 MiB cap)

``trickle`` and ``huge`` are meant for the loopback server; :func:`in_process` serves them too
(a slow generator, a 3 MiB content) but a MockTransport has no socket for a deadline to cut.

The models endpoint (the free probe, SPEC §13.1) is recorded apart, in :attr:`FakeProvider.probes`
(the paths asked), so :attr:`FakeProvider.calls` stays model calls only:

- ``GET /v1/models``        the list of :attr:`FakeProvider.models` (default ``["fake-model"]``)
- ``GET /v1/models/{id}``   200 if ``id`` is in :attr:`FakeProvider.models`, else OpenAI's 404
  ``model_not_found``
- ``fake.models_endpoint = False`` makes both a plain 404 (a server without a models endpoint)

:meth:`FakeProvider.chaos` makes labels without a script draw a behaviour at random (seeded).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

TAG = re.compile(r"TAG:([a-z0-9_-]+)")
VERDICT = {"needs_reply": True, "category": "question", "priority": "normal",
           "summary": "Asks how to configure the thing.", "reply_hint": "Point to the docs."}
NO_REPLY = {"needs_reply": False, "category": "praise", "priority": "low", "summary": "Says thanks.",
            "reply_hint": ""}
HUGE_BYTES = 3 * 1024 * 1024
DRAFT = "Thanks for asking! It works on Windows since […]."


class Trickle(bytes):
    """A payload the server sends one byte every :attr:`FakeProvider.trickle_s` seconds."""


class FakeProvider:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.scripts: dict[str, list[str]] = {}
        self.default = "verdict"
        self.in_flight = threading.Event()
        self._release = threading.Event()
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.slow_s = 0.5
        self.trickle_s = 1.0
        # The models endpoint: the paths GET-ed (never in ``calls``), what it lists, whether it exists.
        self.probes: list[str] = []
        self.models: list[str] = ["fake-model"]
        self.models_endpoint = True
        self._chaos: tuple[random.Random, list[str], list[float]] | None = None
        # Concurrency, for parallel batches (SPEC §15.1): requests being answered now, the most
        # at once so far, and how many ``hold`` requests wait for :meth:`release`.
        self._active = 0
        self.max_active = 0
        self._held = 0
        self._changed = threading.Condition(self._lock)
        self.spans: list[tuple[str, float, float]] = []  # (label, monotonic start, end) per model call
        # A reply's prompt quotes its parent first: with this set, a call is labelled by the last
        # TAG in the request (the comment's own) instead of the first.
        self.label_last = False
        # Every model request's JSON body, in order (a draft's prompt is checked in it, SPEC §16.5).
        self.bodies: list[dict[str, Any]] = []

    # ---- test-facing ----
    def script(self, label: str, *behaviours: str) -> None:
        self.scripts[label] = list(behaviours)

    def chaos(self, seed: int, weights: dict[str, float]) -> None:
        """Labels without a script draw each call's behaviour from ``weights`` (seeded)."""
        self._chaos = (random.Random(seed), list(weights), list(weights.values()))

    def release(self) -> None:
        self._release.set()

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def env(self) -> dict[str, str]:
        return {"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": self.base_url, "WATCHER_API_KEY": "sk-test-fake",
                "WATCHER_MODEL": "fake-model", "WATCHER_TIMEOUT": "30"}

    def wait_in_flight(self, timeout: float = 20.0, *, count: int = 1) -> None:
        """Return once ``count`` ``hold`` requests are held open at the same time."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._held >= count, timeout):
                raise AssertionError(f"the provider never held {count} request(s) at once (held {self._held})")

    def label_of(self, body: dict[str, Any]) -> str:
        found = TAG.findall(json.dumps(body))
        return (found[-1] if self.label_last else found[0]) if found else "?"

    # ---- server side ----
    def _next(self, label: str) -> str:
        with self._lock:
            self.calls.append(label)
            script = self.scripts.get(label)
            if not script and self._chaos is not None:
                rng, names, weights = self._chaos
                return rng.choices(names, weights)[0]
            if not script:
                return self.default
            return script.pop(0) if len(script) > 1 else script[0]

    def handle(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        with self._changed:
            self._active += 1
            self.max_active = max(self.max_active, self._active)
            self.bodies.append(body)
        began = time.monotonic()
        try:
            return self._answer(body, headers)
        finally:
            with self._changed:
                self._active -= 1
                self.spans.append((self.label_of(body), began, time.monotonic()))

    def _answer(self, body: dict[str, Any], headers: dict[str, str] | None) -> tuple[int, dict[str, str], bytes]:
        label = self.label_of(body)
        behaviour = self._next(label)
        if behaviour.startswith("hold"):
            with self._changed:
                self._held += 1
                self._changed.notify_all()
            self.in_flight.set()
            self._release.wait(60)
            with self._changed:
                self._held -= 1
            behaviour = "malformed" if behaviour == "hold-malformed" else "verdict"
        if behaviour.startswith("429"):
            retry = behaviour.split(":", 1)[1] if ":" in behaviour else "30"
            err = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            return 429, {} if behaviour == "429-none" else {"Retry-After": retry}, json.dumps(err).encode()
        if behaviour == "slow":
            time.sleep(self.slow_s)
            behaviour = "verdict"
        if behaviour in ("401", "echo-key-401"):
            said = "Incorrect API key provided"
            if behaviour == "echo-key-401":
                said += f": {(headers or {}).get('authorization', '')}"
            err = {"error": {"message": said, "type": "invalid_request_error", "code": "invalid_api_key"}}
            return 401, {}, json.dumps(err).encode()
        if behaviour.startswith("echo-key-"):
            return _echo_key(behaviour, (headers or {}).get("authorization", "").removeprefix("Bearer "))
        if behaviour == "surrogate-400":
            return 400, {}, b'{"error": {"message": "bad \\ud800 request", "type": "invalid_request_error"}}'
        if behaviour == "529":
            return 529, {}, b'{"error": {"message": "Overloaded", "type": "overloaded_error"}}'
        if behaviour == "404-model":
            return 404, {}, _model_not_found(str(body.get("model", "")))
        if behaviour == "404":
            return 404, {}, b"404 page not found"
        if behaviour == "400":
            err = {"error": {"message": "Invalid value for 'messages': expected an array.",
                             "type": "invalid_request_error", "param": "messages", "code": None}}
            return 400, {}, json.dumps(err).encode()
        if behaviour == "500":
            err = {"error": {"message": "The server had an error while processing your request.",
                             "type": "server_error", "param": None, "code": None}}
            return 500, {}, json.dumps(err).encode()
        if behaviour == "huge":
            return 200, {}, b" " * HUGE_BYTES
        content = {"malformed": "this is not json {", "invalid": json.dumps({"needs_reply": "maybe"}),
                   "no-reply": json.dumps(NO_REPLY)}.get(behaviour, json.dumps(VERDICT))
        if behaviour == "verdict" and _asks_for_a_draft(body):
            content = DRAFT  # prompts/draft.md's free-text request (SPEC §16.5)
        doc = {"id": "chatcmpl-1", "object": "chat.completion", "model": "fake-model",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
        payload = json.dumps(doc).encode()
        return 200, {}, Trickle(payload) if behaviour == "trickle" else payload

    def handle_get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """The models endpoint: recorded in :attr:`probes`, never in :attr:`calls`."""
        path = urlsplit(path).path
        with self._lock:
            self.probes.append(path)
        if self.models_endpoint and path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            return 200, {}, json.dumps({"object": "list", "data": data}).encode()
        if self.models_endpoint and path.startswith("/v1/models/"):
            model = unquote(path.removeprefix("/v1/models/"))
            if model in self.models:
                return 200, {}, json.dumps({"id": model, "object": "model", "created": 0, "owned_by": "fake"}).encode()
            return 404, {}, _model_not_found(model)
        return 404, {}, b"404 page not found"


def _echo_key(behaviour: str, key: str) -> tuple[int, dict[str, str], bytes]:
    """The echo-key-* answers; the key arrives escaped the way the behaviour names."""
    if behaviour == "echo-key-400":
        said = f"Invalid key {key.replace('/', chr(92) + '/')} (also known as {u_escaped(key)})"
        # Put in after json.dumps, which would escape the backslashes the echo is made of.
        body = json.dumps({"error": {"message": "@@", "type": "invalid_request_error", "code": None}})
        return 400, {}, body.replace("@@", said).encode()
    spell = {"echo-key-summary": str, "echo-key-escaped": lambda k: k.replace("/", "\\/"),
             "echo-key-unicode": u_escaped}[behaviour]
    marker = "@@KEY@@"
    verdict = {**VERDICT, "summary": f"Asks about the key {marker}.", "reply_hint": f"Never share {marker}."}
    # Spelled inside the answer text, which the body then escapes once more (its backslashes).
    content = json.dumps(verdict).replace(marker, spell(key))
    doc = {"id": "chatcmpl-1", "object": "chat.completion", "model": "fake-model", "x_echo": marker,
           "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
    text = json.dumps(doc)
    if behaviour == "echo-key-escaped":
        text = text.replace("/", "\\/")  # valid JSON: "/" only occurs inside strings
    return 200, {}, text.replace(marker, spell(key)).encode()


def _asks_for_a_draft(body: dict[str, Any]) -> bool:
    """A reply draft's request: no verdict schema, and the draft prompt's system text."""
    messages = body.get("messages") or [{}]
    system = messages[0].get("content") if isinstance(messages[0], dict) else None
    return "response_format" not in body and isinstance(system, str) and system.startswith("You draft replies")


def u_escaped(text: str) -> str:
    """Every character as ``\\uXXXX``, the hex in lower and upper case by turns."""
    return "".join((f"\\u{ord(c):04x}" if i % 2 else f"\\u{ord(c):04X}") for i, c in enumerate(text))


def key_leaks(text: str, key: str) -> bool:
    """Whether ``text`` holds ``key`` in any JSON spelling, at any depth of escaping.

    Written apart from the code under test: undo every ``\\u`` escape (however many backslashes
    lead it), drop every backslash, then look for the key. For keys without a backslash.
    """
    plain = re.sub(r"\\+u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    return key in plain.replace("\\", "")


def _model_not_found(model: str) -> bytes:
    err = {"error": {"message": f"The model `{model}` does not exist or you do not have access to it.",
                     "type": "invalid_request_error", "param": None, "code": "model_not_found"}}
    return json.dumps(err).encode()


def _handler(fake: FakeProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # the name is http.server API
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if len(raw) < length:
                # The client died between its headers and the end of its body (a SIGKILL while
                # several requests are being written): no request reached the model, none is counted.
                self.close_connection = True
                return
            body = json.loads(raw or b"{}")
            status, headers, payload = fake.handle(body, {k.lower(): v for k, v in self.headers.items()})
            self._answer(status, headers, payload)

        def do_GET(self) -> None:  # the name is http.server API
            self._answer(*fake.handle_get(self.path))

        def _answer(self, status: int, headers: dict[str, str], payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if isinstance(payload, Trickle):
                    for i in range(len(payload)):
                        self.wfile.write(payload[i : i + 1])
                        self.wfile.flush()
                        time.sleep(fake.trickle_s)
                else:
                    self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client was killed while we held its request, or gave up on a trickle

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """``handler`` served on 127.0.0.1 (a free port) from a daemon thread, shut down afterwards.

    A short poll interval: shutdown() waits up to one interval, and the rig starts hundreds."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextmanager
def running_fake(fake: FakeProvider | None = None) -> Iterator[FakeProvider]:
    """``fake`` (a new :class:`FakeProvider` when none is given) served on loopback."""
    fake = fake if fake is not None else FakeProvider()
    with serving(_handler(fake)) as server:
        fake.server = server
        try:
            yield fake
        finally:
            fake.release()


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def in_process(fake: FakeProvider) -> Any:
    """A provider factory for :class:`watcher.pipeline.Hooks`: the real provider of the settings,
    with ``fake`` answering through an ``httpx.MockTransport`` — no socket, no thread, the same
    call log. The test mode by injection: the whole pipeline runs, only the wire is swapped."""
    import httpx

    from watcher.providers import make_provider

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            status, headers, payload = fake.handle_get(request.url.raw_path.decode("ascii"))
        else:
            body = json.loads(request.content or b"{}")
            status, headers, payload = fake.handle(body, {k.lower(): v for k, v in request.headers.items()})
        headers = {"Content-Type": "application/json", **headers}
        if isinstance(payload, Trickle):
            headers["Content-Length"] = str(len(payload))
            return httpx.Response(status, headers=headers, content=_trickled(payload, fake.trickle_s))
        return httpx.Response(status, headers=headers, content=payload)

    return lambda settings: make_provider(settings, transport=httpx.MockTransport(answer))


def _trickled(payload: bytes, pause_s: float) -> Iterator[bytes]:
    for i in range(len(payload)):
        time.sleep(pause_s)
        yield payload[i : i + 1]


# Settings that point the real OpenAI provider at a fake; with :func:`in_process` no socket is used.
IN_PROCESS_ENV = {"WATCHER_PROVIDER": "openai", "WATCHER_BASE_URL": "http://fake.invalid/v1",
                  "WATCHER_API_KEY": "sk-test-fake", "WATCHER_MODEL": "fake-model"}


def in_process_hooks(fake: FakeProvider, **hooks: Any) -> Any:
    """:class:`watcher.pipeline.Hooks` whose provider is ``fake`` in process (:func:`in_process`),
    and ``hooks`` besides; with :data:`IN_PROCESS_ENV` for the settings (``_proc.run_main``)."""
    from watcher.pipeline import Hooks

    return Hooks(make_provider=in_process(fake), **hooks)
