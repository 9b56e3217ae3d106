"""SPEC §7/§10: an MCP ``recheck`` and a CLI ``recheck`` on one data dir share the pipeline lock.

The loopback provider records every call and holds the first request open, so one run holds the
lock while the other arrives. Whichever way round, the provider never sees a second call for the
same attempt: the call log is exactly ``["first"]``.
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


def test_cli_recheck_behind_an_mcp_recheck_reports_lock_busy_and_no_second_call(
        data_dir: Path, fake: FakeProvider, export: Path) -> None:
    """MCP recheck holds the lock mid-call: the CLI recheck exits 4 after its wait; one call in all."""
    outcome: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        async with anyio.create_task_group() as tg:
            async def mcp_recheck() -> None:
                outcome["mcp"] = doc(await session.call_tool("recheck", {}))

            tg.start_soon(mcp_recheck)
            await anyio.to_thread.run_sync(fake.wait_in_flight)
            began = time.monotonic()
            cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env(), lock_wait=SHORT_LOCK_WAIT_S)
            outcome["cli"] = (cli, await _finish(cli), time.monotonic() - began)
            fake.release()

    run_session(data_dir, scenario, env=fake.env())
    cli, out, waited = outcome["cli"]
    assert cli.returncode == 4, out
    busy = envelope(out)
    assert busy["error"]["kind"] == "lock_busy" and f"waited {SHORT_LOCK_WAIT_S} s" in busy["error"]["message"]
    assert waited >= SHORT_LOCK_WAIT_S  # it waited for the lock, it did not fail fast
    assert outcome["mcp"]["ok"] and outcome["mcp"]["result"]["items"][0]["outcome"] == "verdict"
    assert fake.calls == ["first"]
    attempts = record(data_dir, "first").attempts
    assert [(a.command, a.entrypoint, a.outcome) for a in attempts] == [("scan", "bridge", "error"),
                                                                       ("recheck", "bridge", "ok")]


def test_mcp_recheck_behind_a_cli_recheck_is_a_lock_busy_tool_error_and_no_second_call(
        data_dir: Path, fake: FakeProvider, export: Path) -> None:
    """CLI recheck holds the lock mid-call: the MCP recheck is a tool error with exit_code 4; one call."""
    outcome: dict[str, Any] = {}

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
        await anyio.to_thread.run_sync(fake.wait_in_flight)
        began = time.monotonic()
        result = await session.call_tool("recheck", {})
        outcome["waited"] = time.monotonic() - began
        outcome["is_error"], outcome["mcp"] = result.is_error, doc(result)
        fake.release()
        outcome["cli"] = (cli, await _finish(cli))

    run_session(data_dir, scenario, env={**fake.env(), **hook_env(lock_wait=SHORT_LOCK_WAIT_S)})
    assert outcome["is_error"] is True
    busy = outcome["mcp"]
    assert (busy["ok"], busy["exit_code"], busy["error"]["kind"]) == (False, 4, "lock_busy")
    assert "pipeline lock busy" in busy["error"]["message"]
    assert f"waited {SHORT_LOCK_WAIT_S} s" in busy["error"]["message"]
    assert outcome["waited"] >= SHORT_LOCK_WAIT_S
    cli, out = outcome["cli"]
    assert cli.returncode == 0, out
    assert envelope(out)["result"]["items"][0]["outcome"] == "verdict"
    assert fake.calls == ["first"]
    attempts = record(data_dir, "first").attempts
    assert [(a.command, a.entrypoint, a.outcome) for a in attempts] == [("scan", "bridge", "error"),
                                                                       ("recheck", "cli", "ok")]


def test_mcp_recheck_queued_behind_a_cli_recheck_runs_after_it_and_makes_no_call(
        data_dir: Path, fake: FakeProvider, export: Path, tmp_path: Path) -> None:
    """The CLI finishes within 5 s: the MCP recheck then gets the lock, re-reads, and calls nothing."""
    outcome: dict[str, Any] = {}
    notices = Notices(tmp_path / "notices")

    async def scenario(session: ClientSession) -> None:
        await _fail_once(session, fake, export)
        cli = start("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
        await anyio.to_thread.run_sync(fake.wait_in_flight)
        async with anyio.create_task_group() as tg:
            async def mcp_recheck() -> None:
                outcome["mcp"] = doc(await session.call_tool("recheck", {}))

            tg.start_soon(mcp_recheck)
            # the MCP recheck plans (attempt 1 failed) and queues on the lock
            await anyio.to_thread.run_sync(notices.wait, "lock_queued")
            marked = doc(await session.call_tool("mark", {"id": "first", "triage": "ignored"}))
            assert marked["ok"]  # the server answers, and mark never waits for the pipeline lock
            fake.release()
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
