"""The suite's one in-process HTTP fake, and the one raw-socket helper (tests/README.md says why).

``Wire`` is a handler for ``httpx.MockTransport``: the code under test takes the transport
(``make_provider(settings, transport=…)``, ``fetch_devto(…, transport=…)``), so nothing is
patched. It answers by method and path, records every request, and fails the test on a request
no route expects::

    wire = Wire()
    articles = wire.on("GET", "/api/articles", httpx.Response(200, json=[]))
    fetch_devto(settings, seen, transport=wire.transport())
    assert articles.calls == 1

A reply is an ``httpx.Response`` (a fresh copy is sent each time), an exception (class or
instance; httpx's are raised with the request attached) or a function of the request. Several
replies are given in turn; the last one repeats.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

Reply = httpx.Response | BaseException | type[BaseException] | Callable[[httpx.Request], httpx.Response]


@dataclass
class Route:
    """One method and path (and, if given, query parameters) with its replies and requests."""

    method: str
    path: str
    params: Mapping[str, str]
    replies: list[Reply]
    requests: list[httpx.Request] = field(default_factory=list)

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def last(self) -> httpx.Request:
        return self.requests[-1]

    def matches(self, request: httpx.Request) -> bool:
        if (request.method, request.url.path) != (self.method, self.path):
            return False
        return all(request.url.params.get(k) == v for k, v in self.params.items())

    def answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, type) and issubclass(reply, httpx.RequestError):
            raise reply(f"{reply.__name__} (fake)", request=request)
        if isinstance(reply, (BaseException, type)):
            raise reply
        if isinstance(reply, httpx.Response):
            return httpx.Response(reply.status_code, headers=reply.headers, content=reply.content)
        return reply(request)


class Wire:
    """Routes for one test; the first route that matches a request answers it."""

    def __init__(self) -> None:
        self.routes: list[Route] = []
        self.requests: list[httpx.Request] = []

    def on(
        self, method: str, path: str, *replies: Reply, params: Mapping[str, str] | None = None
    ) -> Route:
        assert replies, "a route needs a reply"
        route = Route(method, path, params or {}, list(replies))
        self.routes.append(route)
        return route

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        for route in self.routes:
            if route.matches(request):
                return route.answer(request)
        raise AssertionError(f"no route for {request.method} {request.url}")

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once.

    A raw socket on purpose: a refused connection is what the tests using it are about, and only
    the real network stack refuses one."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
