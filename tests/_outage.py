"""Provider outages played against the loopback recording fake, with an injected clock (SPEC §16.6).

An outage is one way the chat endpoint fails while the models endpoint still says yes (it lists
the model: the free probe passes): the connection refused (no server at the port), a revoked key
(401), a 429 with and without Retry-After, a quota refused, 500, 503, 529, a hang (no answer within the deadline)
and a drop (the connection closed after the request was sent). Each cron round is ``scan`` then
``recheck``, run in this process with the round's clock (``Hooks.clock``), over real sockets.

:func:`play` returns, per round, the requests the fake received and the attempts each comment has
counted on disk, so a test asserts on the call log and a bench prints the totals.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from _fakes.provider import FakeProvider
from _proc import run_main, write_export

from watcher.config import Paths
from watcher.pipeline import Hooks
from watcher.state import records
from watcher.store.files import FileStore
from watcher.util.timeutil import utcnow

# kind -> the answer of the chat endpoint during the outage (None: no server at all).
ANSWERS: dict[str, tuple[int, dict[str, str], dict[str, Any]] | None] = {
    "refused": None,
    "401": (401, {}, {"error": {"message": "Incorrect API key", "code": "invalid_api_key"}}),
    "429": (429, {"Retry-After": "60"}, {"error": {"message": "Rate limit reached"}}),
    "429-none": (429, {}, {"error": {"message": "Rate limit reached"}}),
    "quota": (429, {}, {"error": {"message": "You exceeded your current quota",
                                  "code": "insufficient_quota"}}),
    "500": (500, {}, {"error": {"message": "The server had an error", "type": "server_error"}}),
    "503": (503, {}, {"error": {"message": "Service unavailable"}}),
    "529": (529, {}, {"error": {"message": "Overloaded", "type": "overloaded_error"}}),
    "hang": (500, {}, {}),  # answered only after the deadline has cut the call
    "drop": (0, {}, {}),  # the connection closes without an answer
}
KINDS = tuple(ANSWERS)
# Kinds that stop the batch only as the second in a row (SPEC §13.1): the first run spends two.
TRANSIENT = frozenset({"500", "503", "529", "hang", "drop"})
DEADLINE_S = 0.4  # short: a hung call costs the suite its deadline plus the hang below


class _Dropped(Exception):
    """Raised in the fake's handler: the server closes the connection without an answer."""


class Failing:
    """The fake's chat endpoint failing as one kind while :attr:`on` (the models endpoint keeps
    saying yes); the requests are recorded in ``fake.calls`` as ever, and the most answered at
    once in :attr:`max_active`."""

    def __init__(self, fake: FakeProvider, kind: str) -> None:
        self.fake, self.kind, self.on = fake, kind, False
        self.max_active = 0
        self._active = 0
        self._healthy = fake.handle
        fake.handle = self.handle  # type: ignore[method-assign]

    def handle(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        if not self.on:
            return self._healthy(body, headers)
        fake = self.fake
        with fake._lock:
            fake.calls.append(fake.label_of(body))
            self._active += 1
            self.max_active = max(self.max_active, self._active)
        try:
            status, extra, doc = ANSWERS[self.kind] or (500, {}, {})
            if self.kind == "hang":
                time.sleep(DEADLINE_S + 0.3)
            if self.kind == "drop":
                raise _Dropped("closed without an answer")
            return status, extra, json.dumps(doc).encode()
        finally:
            with fake._lock:
                self._active -= 1


def in_process_answer(kind: str) -> tuple[int, dict[str, str], bytes]:
    """The failing answer for a provider reached in process (``_fakes.provider.in_process``): the
    transport errors an httpx client meets (refused, a hang past the deadline, a drop) are raised
    from the handler, which the MockTransport lets through."""
    import httpx

    if kind == "refused":
        raise httpx.ConnectError("[Errno 111] Connection refused")
    if kind == "hang":
        raise httpx.ReadTimeout("no answer within the deadline")
    if kind == "drop":
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
    status, extra, doc = ANSWERS[kind] or (500, {}, {})
    return status, extra, json.dumps(doc).encode()


def closed_port_url() -> str:
    """A loopback base URL where nothing listens: every connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@dataclass
class Round:
    at: timedelta
    requests: list[str]  # the labels the chat endpoint received this round
    exits: tuple[int, ...]


@dataclass
class Played:
    rounds: list[Round] = field(default_factory=list)
    counted: dict[str, int] = field(default_factory=dict)  # attempts counted per comment
    reserved: int = 0  # attempts reserved on disk, counted or not (not_sent)
    verdicts: int = 0
    max_active: int = 0  # the most requests the failing endpoint answered at once
    # Attempts counted per comment when the outage ended (at its last round).
    in_outage: dict[str, int] = field(default_factory=dict)

    @property
    def requests(self) -> int:
        return sum(len(r.requests) for r in self.rounds)

    @property
    def attempts(self) -> int:
        return sum(self.counted.values())


def play(
    tmp: Path,
    fake: FakeProvider,
    kind: str,
    *,
    parallel: int,
    schedule: list[timedelta],
    outage_until: timedelta,
    comments: int = 20,
) -> Played:
    """Cron rounds at ``schedule`` (offsets from the start), the provider failing as ``kind``
    until ``outage_until`` and answering after: per round ``scan`` then ``recheck``."""
    labels = [f"o{i:02d}" for i in range(comments)]
    export = write_export(tmp / "export.json", labels)
    data_dir = tmp / "data"
    failing = Failing(fake, kind)
    start = utcnow()
    played = Played()
    nowhere = closed_port_url()
    for at in schedule:
        down = at < outage_until
        failing.on = down
        env = {**fake.env(), "WATCHER_TIMEOUT": str(DEADLINE_S if kind == "hang" and down else 30)}
        if kind == "refused" and down:
            env["WATCHER_BASE_URL"] = nowhere
        before = len(fake.calls)
        hooks = Hooks(clock=_fixed(start + at))
        exits = []
        for args in (("scan", "--source", str(export)), ("recheck",)):
            done = run_main(
                "cli", *args, "--parallel", str(parallel), "--limit", "20", "--json",
                data_dir=data_dir, env=env, hooks=hooks,
            )
            assert done.envelope is not None, done.stderr
            exits.append(done.returncode)
        played.rounds.append(Round(at, fake.calls[before:], tuple(exits)))
        if down:
            played.in_outage = _counted(data_dir, labels)
    played.max_active = failing.max_active
    store = FileStore(Paths(data_dir))
    for cid in labels:
        record = store.load_record(cid)
        if record is None:
            continue
        played.counted[cid] = records.spent(record)
        played.reserved += len(record.attempts)
        played.verdicts += record.verdict is not None
    return played


def _counted(data_dir: Path, labels: list[str]) -> dict[str, int]:
    store = FileStore(Paths(data_dir))
    return {cid: records.spent(r) for cid in labels if (r := store.load_record(cid)) is not None}


def _fixed(at: datetime) -> Callable[[], datetime]:
    """The round's clock: its start, moving with real time (a command's few seconds)."""
    began = time.monotonic()
    return lambda: at + timedelta(seconds=time.monotonic() - began)


def cron(hours: float, every: timedelta = timedelta(minutes=30)) -> list[timedelta]:
    """The offsets of a cron every ``every`` for ``hours``."""
    n = int(timedelta(hours=hours) / every)
    return [every * i for i in range(n)]
