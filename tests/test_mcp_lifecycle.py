"""SPEC §15.4: a client's cancel or exit costs nothing — real ``watcher-bridge mcp`` processes.

A ``notifications/cancelled`` for a running ``scan`` starts no further model call (the call out
finishes and is saved); SIGINT, SIGTERM or stdin closing record every attempt in flight as
``interrupted`` at once and the server is gone within a second, busy or idle.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import start, write_export
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import REQUEST_TIMEOUT
from test_mcp_server import doc, run_session

from watcher.config import Paths
from watcher.state import records
from watcher.store.files import FileStore

pytestmark = pytest.mark.slow

# Gone within a second of the signal, measured from outside on a loaded machine: a second and a half.
GONE_WITHIN_S = 1.5


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def _states(data_dir: Path, ids: list[str]) -> dict[str, str]:
    store = FileStore(Paths(data_dir))
    found = {cid: store.load_record(cid) for cid in ids}
    return {cid: records.state_of(r) if r else "missing" for cid, r in found.items()}


def _wait_for(predicate: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.02)


def test_a_cancelled_scan_starts_no_further_call_and_saves_the_one_out(
        data_dir: Path, fake: FakeProvider, tmp_path: Path) -> None:
    """The client gives up on a scan (its tool timeout): the call out finishes and is saved, the
    other comments get no call, and the server goes on answering."""
    export = write_export(tmp_path / "e.json", ["a1", "b1", "c1"])
    fake.script("a1", "hold")
    log = data_dir / "observations.jsonl"
    outcome: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        with pytest.raises(MCPError, match="timed out") as gave_up:  # the SDK cancels the request it gave up on
            await session.call_tool("scan", {"source": str(export)}, read_timeout_seconds=1.0)
        assert gave_up.value.code == REQUEST_TIMEOUT
        # The server reads its stdin in order: once a ping sent after the cancel is answered, the
        # cancel has been read and applied. Released before that, a1's answer can race the cancel
        # and the batch rightly starts b1 (seen once in CI under load).
        await session.send_ping()
        fake.release()
        await anyio.to_thread.run_sync(lambda: _wait_for(
            lambda: log.exists() and "batch.stopped.cancelled" in log.read_text()))
        outcome["status"] = doc(await session.call_tool("status", {}))

    run_session(data_dir, scenario, env=fake.env())
    assert fake.calls == ["a1"]
    assert _states(data_dir, ["a1", "b1", "c1"]) == {"a1": "done", "b1": "pending", "c1": "pending"}
    assert outcome["status"]["ok"] and outcome["status"]["result"]["states"]["done"] == 1


class RawServer:
    """``watcher-bridge mcp`` driven over its pipes by hand, so the test can signal it and close its
    stdin at the moment it chooses (the SDK's client owns both)."""

    def __init__(self, data_dir: Path, env: dict[str, str]) -> None:
        self.proc = start("bridge", "mcp", data_dir=data_dir, env=env, stdin=subprocess.PIPE, sdk=True)
        self._id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "test", "version": "1"}})
        self.notify("notifications/initialized")

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})})

    def send(self, method: str, params: dict[str, Any]) -> int:
        self._id += 1
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        return self._id

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        wanted = self.send(method, params)
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            message = json.loads(line)
            if message.get("id") == wanted:
                return message  # type: ignore[no-any-return]
        raise AssertionError(f"the server ended before answering {method}: {self.stderr()}")

    def stderr(self) -> str:
        self.proc.kill()
        return self.proc.communicate()[1][-2000:]

    def gone_within(self, seconds: float) -> tuple[float, int]:
        began = time.monotonic()
        try:
            code = self.proc.wait(seconds * 4)
        finally:
            took = time.monotonic() - began
            if self.proc.poll() is None:
                self.proc.kill()
        return took, code


@pytest.mark.parametrize(("how", "code"), [("SIGTERM", 143), ("SIGINT", 130), ("stdin", 0)])
def test_a_going_server_closes_every_call_in_flight_as_interrupted_at_once(
        data_dir: Path, fake: FakeProvider, tmp_path: Path, how: str, code: int) -> None:
    """Two calls held open by the provider, then the client ends its session (Codex: SIGTERM;
    Claude Code: SIGINT, then SIGTERM; or just closing stdin): both attempts are recorded
    interrupted — not left reserved for a later run — and the server is gone within a second."""
    # g0 answers first: a batch's first call goes out alone, the rest in parallel (SPEC §16.6).
    export = write_export(tmp_path / "e.json", ["g0", "g1", "g2", "g3"])
    for label in ("g1", "g2"):
        fake.script(label, "hold")
    server = RawServer(data_dir, {**fake.env(), "WATCHER_PARALLEL": "2"})
    server.send("tools/call", {"name": "scan", "arguments": {"source": str(export)}})
    fake.wait_in_flight(count=2)
    if how == "stdin":
        assert server.proc.stdin is not None
        server.proc.stdin.close()
    else:
        server.proc.send_signal(getattr(signal, how))
    took, exit_code = server.gone_within(GONE_WITHIN_S)
    fake.release()
    assert exit_code == code and took <= GONE_WITHIN_S, (took, exit_code)
    assert _states(data_dir, ["g1", "g2", "g3"]) == {"g1": "failed", "g2": "failed", "g3": "pending"}
    store = FileStore(Paths(data_dir))
    for cid in ("g1", "g2"):
        record = store.load_record(cid)
        assert record is not None and record.attempts[-1].error is not None
        assert record.attempts[-1].error.kind == "interrupted"
    assert sorted(fake.calls) == ["g0", "g1", "g2"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_idle_server_is_gone_within_a_second_of_a_signal(data_dir: Path, sig: int) -> None:
    """No call running: SIGINT or SIGTERM ends the server at once, with the signal's exit code."""
    server = RawServer(data_dir, {"WATCHER_PROVIDER": "offline"})
    assert server.request("tools/call", {"name": "status", "arguments": {}})["result"]
    server.proc.send_signal(sig)
    took, exit_code = server.gone_within(GONE_WITHIN_S)
    assert exit_code == 128 + sig and took <= GONE_WITHIN_S
