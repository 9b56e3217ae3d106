"""SPEC §14, the agent as the model: official MCP client sessions against real ``watcher-bridge mcp``
processes with ``WATCHER_PROVIDER=agent`` and no key anywhere.

The agent claims (one attempt each, with a 15-minute lease), judges from the cached prompt and
submits; the pipeline's budget, lock and compare-and-swap hold whoever else touches the comment —
a second server claiming at the same moment, a CLI ``recheck`` with a real provider, a server
killed between its claim and its submit. The lease ends without sleeping: the run that comes
"after the lease" is started with the test clock of tests/_faults/sitecustomize.py moved on.
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TextIO

import anyio
import pytest
from _fakes.clock import LEASE_END
from _fakes.provider import VERDICT, FakeProvider, running_fake
from _proc import envelope, run, write_export
from jsonschema.validators import validator_for
from mcp import ClientSession
from test_mcp_server import doc, mcp_session, record, run_session

pytestmark = pytest.mark.slow

AGENT = {"WATCHER_PROVIDER": "agent"}  # and nothing else: no key, no model, no base URL
INVALID = {"needs_reply": "maybe", "category": "question"}


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def fits(schema: dict[str, Any], document: dict[str, Any]) -> None:
    """``document`` validates against ``schema`` with every open object closed (as test_mcp_results does)."""
    closed = json.loads(json.dumps(schema).replace('"additionalProperties": true', '"additionalProperties": false'))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator_for(closed)(closed).iter_errors(document)]
    assert not errors, errors[:5]


def inbox_bytes(data_dir: Path, cid: str) -> bytes:
    return (data_dir / "inbox" / f"{cid}.json").read_bytes()


def agent_attempts(data_dir: Path, cid: str) -> list[tuple[int, str | None, str | None]]:
    """(n, outcome, error kind) of each attempt, after checking every one is an agent's claim."""
    attempts = record(data_dir, cid).attempts
    assert all((a.provider, a.command, a.entrypoint) == ("agent", "claim", "bridge") and a.lease_until
               for a in attempts), attempts
    return [(a.n, a.outcome, a.error.kind if a.error else None) for a in attempts]


# ---- one server: the round trip, and everything a submit can meet ---------------------------------------


def test_claim_judge_submit_round_trip_and_what_a_second_or_invalid_submit_does(
        data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """The tools and the reply-session prompt know agent mode; scan records without a call; claim hands
    out prompts and spends one attempt each; a valid submit saves the verdict; the same submit again is
    refused and changes no byte; an invalid verdict counts; a CLI recheck with a real provider defers
    the comments still claimed, and calls nothing."""
    export = write_export(tmp_path / "export.json", ["one", "two", "three"])

    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        for name in ("claim", "submit"):
            hints = tools[name].annotations
            assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
                False, False, False, False), name
        limit = tools["claim"].input_schema["properties"]["limit"]
        assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 20, 5)
        assert set(tools["submit"].input_schema["required"]) == {"id", "n", "verdict"}
        described = " ".join((tools["claim"].description or "").split())
        assert "SPENDS ONE OF THE COMMENT'S 3 ATTEMPTS" in described and "15 minutes" in described

        prompt = (await session.get_prompt("reply-session", {})).messages[0].content.text  # type: ignore[union-attr]
        steps = [prompt.index(word) for word in ("`status`", "`scan`", "`claim`", "`submit`", "`inbox`", "`mark`")]
        assert steps == sorted(steps) and 'provider "agent"' in prompt  # the agent-mode steps come first

        scan = doc(await session.call_tool("scan", {"source": str(export)}))
        assert (scan["result"]["provider"], scan["result"]["calls"], scan["result"]["for_agent"]) == ("agent", 0, 3)
        claim = doc(await session.call_tool("claim", {"limit": 2}))
        fits(tools["claim"].output_schema, claim)
        got = claim["result"]
        assert (got["provider"], got["lease_minutes"], got["calls"], got["remaining"]) == ("agent", 15, 0, 1)
        assert [(c["id"], c["n"]) for c in got["claimed"]] == [("one", 1), ("two", 1)]
        first = got["claimed"][0]
        assert "TAG:one" in first["user"] and first["system"]
        assert set(first["schema"]["required"]) == set(VERDICT)  # the verdict's own schema, to answer with

        # A CLI recheck with a real provider meanwhile: both claims are in flight elsewhere.
        recheck = run("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
        assert recheck.returncode == 0, recheck.stderr
        assert {i["id"]: i["outcome"] for i in envelope(recheck)["result"]["items"]} == {
            "one": "deferred", "two": "deferred"}

        saved = doc(await session.call_tool("submit", {"id": "one", "n": 1, "verdict": VERDICT}))
        fits(tools["submit"].output_schema, saved)
        assert {k: saved["result"][k] for k in ("outcome", "attempts", "attempts_left", "state")} == {
            "outcome": "verdict", "attempts": 1, "attempts_left": 2, "state": "done"}
        on_disk = inbox_bytes(data_dir, "one")
        again = doc(await session.call_tool("submit", {"id": "one", "n": 1, "verdict": VERDICT}))
        assert (again["exit_code"], again["error"]["kind"]) == (2, "submit_refused")
        assert inbox_bytes(data_dir, "one") == on_disk

        invalid = doc(await session.call_tool("submit", {"id": "two", "n": 1, "verdict": json.dumps(INVALID)}))
        fits(tools["submit"].output_schema, invalid)
        assert (invalid["exit_code"], invalid["result"]["outcome"], invalid["result"]["kind"]) == (
            0, "error", "invalid_verdict")
        assert (invalid["result"]["attempts_left"], invalid["result"]["state"]) == (2, "failed")
        on_disk = inbox_bytes(data_dir, "two")
        late = doc(await session.call_tool("submit", {"id": "two", "n": 1, "verdict": VERDICT}))
        never = doc(await session.call_tool("submit", {"id": "three", "n": 1, "verdict": VERDICT}))
        not_json = doc(await session.call_tool("submit", {"id": "two", "n": 1, "verdict": 42}))
        assert [(d["exit_code"], d["error"]["kind"]) for d in (late, never, not_json)] == [
            (2, "submit_refused"), (2, "submit_refused"), (2, "usage")]
        assert inbox_bytes(data_dir, "two") == on_disk and record(data_dir, "three").attempts == []

    run_session(data_dir, scenario, env=AGENT)
    assert fake.calls == []
    assert agent_attempts(data_dir, "one") == [(1, "ok", None)]
    assert record(data_dir, "one").verdict.model_dump() == VERDICT  # type: ignore[union-attr]
    assert agent_attempts(data_dir, "two") == [(1, "error", "invalid_verdict")]
    # Any provider but agent: claim is a setup error through the bridge's envelope too, and spends nothing.
    refused = run("bridge", "claim", data_dir=data_dir, env=fake.env())
    assert (refused.returncode, envelope(refused)["error"]["kind"]) == (2, "config")
    assert record(data_dir, "three").attempts == []


# ---- two servers at once, then one killed between its claim and its submit ----------------------------


LABELS = ["c1", "c2", "c3", "c4", "c5"]


def test_two_servers_claiming_at_once_share_no_attempt_and_a_killed_claim_ends_interrupted(
        data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """Two MCP servers claim at the same moment, round after round, and submit invalid verdicts until
    every comment is exhausted: no attempt is handed out twice, none passes 3 (+ a grant). The granted
    attempt is claimed, then its server is SIGKILLed: a recheck inside the lease defers it, one after
    the lease records it interrupted; the real provider is never called."""
    export = write_export(tmp_path / "export.json", LABELS)
    assert run("cli", "scan", "--source", str(export), "--json", data_dir=data_dir, env=AGENT).returncode == 0
    handed: list[tuple[str, int, int]] = []  # (comment, attempt n, server)

    async def claim_round(sessions: list[ClientSession]) -> list[tuple[str, int, int]]:
        got: list[tuple[str, int, int]] = []

        async def one(number: int) -> None:
            claim = doc(await sessions[number].call_tool("claim", {"limit": 3}))
            assert claim["exit_code"] == 0, claim["error"]
            got.extend((c["id"], c["n"], number) for c in claim["result"]["claimed"])

        async with anyio.create_task_group() as both:  # the two claims go out together
            for number in range(len(sessions)):
                both.start_soon(one, number)
        return got

    async def main(errlog: TextIO) -> None:
        async with AsyncExitStack() as stack:
            sessions = [await stack.enter_async_context(mcp_session(data_dir, AGENT, errlog)) for _ in range(2)]
            while claimed := await claim_round(sessions):
                handed.extend(claimed)
                for cid, n, number in claimed:
                    judged = doc(await sessions[number].call_tool("submit", {"id": cid, "n": n, "verdict": INVALID}))
                    assert judged["result"]["kind"] == "invalid_verdict", judged

            granted = run("cli", "grant", "c1", "--yes", data_dir=data_dir, env=AGENT)  # the person's decision
            assert granted.returncode == 0, granted.stderr
            (extra,) = await claim_round(sessions[1:])
            assert extra[:2] == ("c1", 4)
            os.kill(record(data_dir, "c1").attempts[-1].pid, signal.SIGKILL)  # the server that claimed it
            # The other server goes on serving and claims nothing: the killed claim is in its lease.
            assert doc(await sessions[0].call_tool("claim", {}))["result"]["claimed"] == []

    with open(tmp_path / "servers.log", "w") as errlog:
        anyio.run(main, errlog)
    assert len(handed) == len({(cid, n) for cid, n, _ in handed}) == 3 * len(LABELS)
    assert Counter(cid for cid, _, _ in handed) == dict.fromkeys(LABELS, 3)
    assert {number for _, _, number in handed} == {0, 1}  # both servers got some
    for cid in LABELS[1:]:
        assert agent_attempts(data_dir, cid) == [(n, "error", "invalid_verdict") for n in (1, 2, 3)]

    inside = run("cli", "recheck", "--json", data_dir=data_dir, env=fake.env())
    after = run("cli", "recheck", "--json", data_dir=data_dir, env=fake.env(), clock_shift=LEASE_END)
    assert [(p.returncode, [(i["id"], i["outcome"], i["attempts"]) for i in envelope(p)["result"]["items"]])
            for p in (inside, after)] == [(0, [("c1", "deferred", 4)]), (0, [("c1", "interrupted", 4)])]
    assert "claimed by an agent" in envelope(after)["result"]["items"][0]["message"]
    assert agent_attempts(data_dir, "c1")[3] == (4, "error", "interrupted")
    assert fake.calls == []
