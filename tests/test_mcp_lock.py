"""SPEC §7/§10/§15.1: an MCP ``recheck`` and a CLI ``recheck`` on one data dir share the pipeline
lock, held for decisions and writes only, and the comment's call lock, held across its call.

The loopback provider records every call and holds the first request open, so one run's call is
out while the other arrives: the other defers that comment at once, without waiting. Where one run
is stopped inside a lock hold (``pause_at``), the other queues behind it, or exits 4 after its
wait. Whichever way round, the provider never sees a second call for the same attempt: the call
log is exactly ``["first"]``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import SHORT_LOCK_WAIT_S, Notices, envelope, hook_env, start, write_export
from mcp import ClientSession
from test_mcp_server import doc, record, run_session

pytestmark = pytest.mark.slow


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


@pytest.fixture
def export(fake: FakeProvider, tmp_path: Path) -> Path:
    """An export with comment ``first``: its first call answers malformed JSON, every later one holds."""
    fake.script("first", "malformed", "hold")
    return write_export(tmp_path / "export.json", ["first"])


async def _fail_once(session: ClientSession, fake: FakeProvider, export: Path) -> None:
    """The first attempt (an MCP scan) fails; the call log is then cleared."""
    scan = doc(await session.call_tool("scan", {"source": str(export)}))
    assert scan["result"]["items"][0]["outcome"] == "error"
    fake.calls.clear()


async def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    return await anyio.to_thread.run_sync(lambda: proc.communicate(timeout=40))


def test_cli_recheck_during_an_mcp_recheck_call_defers_it_at_once_and_no_second_call(
        data_dir: Path, fake: FakeProvider, export: Path) -> None:
    """MCP recheck's call is out: the CLI recheck defers the comment without waiting (exit 0); one call."""
    outcome: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        async with anyio.create_task_group() as tg:
            async def mcp_recheck() -> None:
                outcome["mcp"] = doc(await session.call_tool("recheck", {}))

            tg.start_soon(mcp_recheck)
            await anyio.to_thread.run_sync(fake.wait_in_flight)
            cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
            # It finishes while the MCP call is still held: it did not wait for that call.
            outcome["cli"] = (cli, await _finish(cli))
            fake.release()

    run_session(data_dir, scenario, env=fake.env())
    cli, out = outcome["cli"]
    assert cli.returncode == 0, out
    items = envelope(out)["result"]["items"]
    assert [i["outcome"] for i in items] == ["deferred"] and "in flight" in items[0]["message"]
    assert outcome["mcp"]["ok"] and outcome["mcp"]["result"]["items"][0]["outcome"] == "verdict"
    assert fake.calls == ["first"]
    attempts = record(data_dir, "first").attempts
    assert [(a.command, a.entrypoint, a.outcome) for a in attempts] == [("scan", "bridge", "error"),
                                                                       ("recheck", "bridge", "ok")]


def test_mcp_recheck_during_a_cli_recheck_call_defers_it_and_no_second_call(
        data_dir: Path, fake: FakeProvider, export: Path) -> None:
    """CLI recheck's call is out: the MCP recheck answers at once (ok, deferred, no tool error); one call."""
    outcome: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
        await anyio.to_thread.run_sync(fake.wait_in_flight)
        result = await session.call_tool("recheck", {})
        outcome["is_error"], outcome["mcp"] = result.is_error, doc(result)
        fake.release()
        outcome["cli"] = (cli, await _finish(cli))

    run_session(data_dir, scenario, env=fake.env())
    assert outcome["is_error"] is False
    assert outcome["mcp"]["ok"] and [i["outcome"] for i in outcome["mcp"]["result"]["items"]] == ["deferred"]
    cli, out = outcome["cli"]
    assert cli.returncode == 0, out
    assert envelope(out)["result"]["items"][0]["outcome"] == "verdict"
    assert fake.calls == ["first"]
    attempts = record(data_dir, "first").attempts
    assert [(a.command, a.entrypoint, a.outcome) for a in attempts] == [("scan", "bridge", "error"),
                                                                       ("recheck", "cli", "ok")]


def test_mcp_recheck_behind_a_lock_held_past_its_wait_is_a_lock_busy_tool_error(
        data_dir: Path, fake: FakeProvider, export: Path, tmp_path: Path) -> None:
    """A CLI recheck stopped inside its outcome write holds the lock: the MCP recheck is a tool error
    with exit_code 4 after its wait, and calls nothing; the CLI then saves its verdict."""
    outcome: dict[str, Any] = {}
    notices = Notices(tmp_path / "notices")

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        fake.script("first", "verdict")
        cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env(),
                    fault="pause_at=before_outcome_write", notices=notices)
        await anyio.to_thread.run_sync(notices.wait, "before_outcome_write", cli)
        began = time.monotonic()
        result = await session.call_tool("recheck", {})
        outcome["waited"] = time.monotonic() - began
        outcome["is_error"], outcome["mcp"] = result.is_error, doc(result)
        notices.resume()
        outcome["cli"] = (cli, await _finish(cli))

    run_session(data_dir, scenario, env={**fake.env(), **hook_env(lock_wait=SHORT_LOCK_WAIT_S)})
    assert outcome["is_error"] is True
    busy = outcome["mcp"]
    assert (busy["ok"], busy["exit_code"], busy["error"]["kind"]) == (False, 4, "lock_busy")
    assert "pipeline lock busy" in busy["error"]["message"]
    assert f"waited {SHORT_LOCK_WAIT_S} s" in busy["error"]["message"]
    assert outcome["waited"] >= SHORT_LOCK_WAIT_S
    cli, out = outcome["cli"]
    assert cli.returncode == 0 and envelope(out)["result"]["items"][0]["outcome"] == "verdict", out
    assert fake.calls == ["first"]


def test_mcp_recheck_queued_behind_a_cli_outcome_write_runs_after_it_and_makes_no_call(
        data_dir: Path, fake: FakeProvider, export: Path, tmp_path: Path) -> None:
    """The CLI holds the lock for its outcome write: the MCP recheck queues, then re-reads and calls
    nothing; a mark meanwhile never waits for the pipeline lock."""
    outcome: dict[str, Any] = {}
    notices = Notices(tmp_path / "notices")

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        fake.script("first", "verdict")
        cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env(),
                    fault="pause_at=before_outcome_write", notices=notices)
        await anyio.to_thread.run_sync(notices.wait, "before_outcome_write", cli)
        async with anyio.create_task_group() as tg:
            async def mcp_recheck() -> None:
                outcome["mcp"] = doc(await session.call_tool("recheck", {}))

            tg.start_soon(mcp_recheck)
            # the MCP recheck plans (attempt 2 reserved) and queues on the lock
            await anyio.to_thread.run_sync(notices.wait, "lock_queued")
            marked = doc(await session.call_tool("mark", {"id": "first", "triage": "ignored"}))
            assert marked["ok"]  # the server answers, and mark never waits for the pipeline lock
            notices.resume()
            outcome["cli"] = (cli, await _finish(cli))
        outcome["status"] = doc(await session.call_tool("status", {}))["result"]

    run_session(data_dir, scenario, env={**fake.env(), **hook_env(fault="notify_at=lock_queued", notices=notices)})
    cli, out = outcome["cli"]
    assert cli.returncode == 0 and envelope(out)["result"]["items"][0]["outcome"] == "verdict", out
    assert outcome["mcp"]["ok"], outcome["mcp"]
    assert [i["outcome"] for i in outcome["mcp"]["result"]["items"]] in (["skipped"], ["repaired"])
    assert fake.calls == ["first"]
    assert len(record(data_dir, "first").attempts) == 2
    status = outcome["status"]
    assert status["triage"]["ignored"] == 1 and status["states"]["done"] == 1
