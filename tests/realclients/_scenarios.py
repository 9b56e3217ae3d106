"""What both clients' tests share: a slow real provider, the agent-mode script, the wire's facts."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from _fake_models import Call, Final, Result
from _fakes import provider as _fake_provider

VERDICT = {
    "needs_reply": True,
    "category": "question",
    "priority": "normal",
    "summary": "Asks how to configure the cache and whether it works on Windows.",
    "reply_hint": "Point to the config section; say Windows is supported.",
}


class TimedProvider(_fake_provider.FakeProvider):
    """The suite's loopback OpenAI-compatible provider, also noting when each model call started."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[float] = []  # time.time() of each model call

    def _next(self, label: str) -> str:
        self.started.append(time.time())
        return super()._next(label)


@contextmanager
def slow_provider(seconds: float) -> Iterator[TimedProvider]:
    """Every model call answers a valid verdict after ``seconds``."""
    fake = TimedProvider()
    fake.default, fake.slow_s = "slow", seconds
    with _fake_provider.serving(_fake_provider._handler(fake)) as server:
        fake.server = server
        yield fake


def provider_env(fake: TimedProvider) -> dict[str, str]:
    return {**fake.env(), "WATCHER_PARALLEL": "1"}


def agent_script(server: str | None = None, first: list[Call] | None = None) -> list[Call | Final]:
    """``first`` (a ToolSearch turn, where the client defers the tools), then status → claim
    {limit 1} → submit {id, n, verdict} from what claim returned → done."""
    prefix = f"{server}." if server else ""

    def submit(results: list[Result]) -> dict[str, Any]:
        claim = next(r for r in results if r.tool.endswith("claim"))
        claimed = claim.envelope()["result"]["claimed"]
        assert claimed, f"claim handed out nothing: {claim.text[:500]}"
        return {"id": claimed[0]["id"], "n": claimed[0]["n"], "verdict": VERDICT}

    return [
        *(first or []),
        Call(f"{prefix}status"),
        Call(f"{prefix}claim", {"limit": 1}),
        Call(f"{prefix}submit", submit),
        Final("judged"),
    ]


def assert_agent_verdict_on_disk(records: dict[str, dict[str, Any]], claimed: Result) -> None:
    """The claimed comment's inbox file holds the submitted verdict, its attempt by provider agent."""
    comment = claimed.envelope()["result"]["claimed"][0]["id"]
    record = records[comment]
    assert record["verdict"] == VERDICT, json.dumps(record)[:800]
    last = record["attempts"][-1]
    assert (last["provider"], last["command"], last["entrypoint"], last["outcome"]) == (
        "agent",
        "claim",
        "bridge",
        "ok",
    )


def reserved(records: dict[str, dict[str, Any]]) -> list[str]:
    """``id#n`` of every attempt still open (outcome null) in the inbox files."""
    return [
        f"{cid}#{a['n']}"
        for cid, r in records.items()
        for a in r["attempts"]
        if a.get("outcome") is None
    ]


def wire_events(wire: list[dict[str, Any]]) -> list[str]:
    """How the session ended for the server, from the tap: signals, stdin closed, exit."""
    out = []
    for record in wire:
        event = record.get("event")
        if event == "signal":
            out.append(
                {2: "SIGINT", 15: "SIGTERM"}.get(record["signum"], f"signal {record['signum']}")
            )
        elif event in ("stdin_closed", "exit"):
            out.append(event)
    return out


def methods(wire: list[dict[str, Any]], direction: str = "in") -> list[str]:
    return [
        r["msg"].get("method")
        for r in wire
        if r.get("dir") == direction and isinstance(r.get("msg"), dict) and r["msg"].get("method")
    ]


def cancelled_at(wire: list[dict[str, Any]]) -> float | None:
    """time.time() of the client's first notifications/cancelled."""
    return next(
        (
            r["t"]
            for r in wire
            if r.get("dir") == "in"
            and isinstance(r.get("msg"), dict)
            and r["msg"].get("method") == "notifications/cancelled"
        ),
        None,
    )


def wait_exit(ws_wire: Any, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The tap's log once the server has exited (the tap logs ``exit`` after its child is reaped, so
    everything the server wrote is on disk). A server still running after ``timeout`` seconds —
    once its client has ended — fails the test, with how the session ended so far."""
    deadline = time.monotonic() + timeout
    while True:
        wire = list(ws_wire())
        if any(r.get("event") == "exit" for r in wire):
            return wire
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the server had not exited {timeout} s after its client ended: "
                f"{wire_events(wire)}, last methods {methods(wire)[-5:]}"
            )
        time.sleep(0.05)  # polling the tap's log for the exit record, not waiting for it to happen
