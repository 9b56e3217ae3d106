"""SPEC §14 in-process: provider agent, `claim` and `submit`, and lease-aware deciding.

The agent is the model: each claim is one of the comment's 3 attempts, reserved durably before the
agent sees the prompt, and a submit writes only onto the open claim it names. Time is moved with
the hooks' clock (``Hooks.clock``), never slept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from _fakes.clock import LEASE_END, later
from _fakes.provider import IN_PROCESS_ENV, VERDICT, FakeProvider, in_process_hooks
from _proc import run_main, write_export

from watcher.state import records
from watcher.config import Paths
from watcher.models import InboxRecord
from watcher.pipeline import Hooks
from watcher.providers.parse import verdict_json_schema
from watcher.store.files import FileStore
from watcher.util.timeutil import parse_iso, utcnow

AGENT_ENV = {"WATCHER_PROVIDER": "agent"}
Clock = Callable[[], datetime]


def _no_provider(_settings: object) -> Any:
    raise AssertionError("provider agent must never build a provider to call")


def agent(data_dir: Path, *args: str, clock: Clock | None = None, **hooks: Any) -> dict[str, Any]:
    """`watcher-bridge ARGS` in this process with WATCHER_PROVIDER=agent: its envelope (its
    ``exit_code`` is the process's). Building a provider to call fails the test."""
    done = run_main("bridge", *args, data_dir=data_dir, env=AGENT_ENV,
                    hooks=Hooks(make_provider=_no_provider, clock=clock, **hooks))
    assert done.envelope is not None and done.envelope["exit_code"] == done.returncode, done
    return done.envelope


def model(data_dir: Path, fake: FakeProvider, *args: str, clock: Clock | None = None) -> dict[str, Any]:
    """`watcher ARGS --json` in this process with a real provider (openai) whose calls go to ``fake``."""
    done = run_main("cli", *args, "--json", data_dir=data_dir, env=IN_PROCESS_ENV,
                    hooks=in_process_hooks(fake, clock=clock))
    assert done.envelope is not None, done.stderr
    return done.envelope


def _scan(data_dir: Path, tmp_path: Path, labels: list[str]) -> dict[str, Any]:
    export = write_export(tmp_path / "export.json", labels)
    return agent(data_dir, "scan", "--source", str(export))


def _claim(data_dir: Path, *, limit: int = 5, clock: Clock | None = None) -> dict[str, Any]:
    return agent(data_dir, "claim", "--limit", str(limit), clock=clock)


def _submit(data_dir: Path, cid: str, n: int, verdict: Any, *, clock: Clock | None = None) -> dict[str, Any]:
    text = verdict if isinstance(verdict, str) else json.dumps(verdict)
    return agent(data_dir, "submit", cid, str(n), text, clock=clock)


def _submit_over_mcp(data_dir: Path, verdict: dict[str, Any]) -> dict[str, Any]:
    """The submit tool of the MCP server (built in this process) with ``verdict`` as a JSON object:
    the one front end that hands the core an object rather than text."""
    from test_mcp_server import doc, run_memory_session

    answers: list[dict[str, Any]] = []

    async def scenario(session: Any) -> None:
        answers.append(doc(await session.call_tool("submit", {"id": "aa1", "n": 1, "verdict": verdict})))

    run_memory_session(data_dir, scenario, env=AGENT_ENV)
    return answers[0]


def _record(data_dir: Path, cid: str) -> InboxRecord:
    record = FileStore(Paths(data_dir)).load_record(cid)
    assert record is not None
    return record


def _status_of(data_dir: Path, cid: str) -> tuple[str, int]:
    entry = FileStore(Paths(data_dir)).load_index().comments[cid]
    return entry.status, entry.attempts


INVALID = {"needs_reply": "maybe"}


# ---- scan with provider agent ---------------------------------------------------------------------


def test_scan_with_agent_makes_no_call_and_leaves_comments_pending(data_dir: Path, tmp_path: Path) -> None:
    """scan records the comments, calls nothing, lists no error, and counts what waits for the agent."""
    planned: list[int] = []
    export = write_export(tmp_path / "export.json", ["aa1", "bb2"])
    envelope = agent(data_dir, "scan", "--source", str(export), on_planned=planned.append)
    assert envelope["exit_code"] == 0, envelope["error"]
    assert planned == [0]  # the progress a front end shows: no model call planned
    result = envelope["result"]
    assert (result["calls"], result["for_agent"], result["items"], result["provider"]) == (0, 2, [], "agent")
    assert [records.state_of(_record(data_dir, cid)) for cid in ("aa1", "bb2")] == ["pending", "pending"]
    assert _status_of(data_dir, "aa1") == ("pending", 0)


def test_recheck_with_agent_leaves_failed_comments_for_the_agent(data_dir: Path, tmp_path: Path) -> None:
    """A failed comment is not called by recheck under provider agent: it waits for a claim."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    _submit(data_dir, "aa1", 1, INVALID)
    envelope = agent(data_dir, "recheck")
    assert envelope["exit_code"] == 0 and (envelope["result"]["for_agent"], envelope["result"]["calls"]) == (1, 0)
    assert len(_record(data_dir, "aa1").attempts) == 1


def test_scan_with_agent_is_not_stopped_by_a_cooldown_or_a_breaker(data_dir: Path, tmp_path: Path) -> None:
    """No call is made, so a 429 cooldown left by a real provider does not apply: exit 0."""
    from watcher.pipeline.provider_state import write_cooldown

    write_cooldown(FileStore(Paths(data_dir)), 3600, reason="rate_limited: left by openai")
    envelope = _scan(data_dir, tmp_path, ["aa1"])
    assert envelope["exit_code"] == 0 and envelope["result"]["for_agent"] == 1 and envelope["result"]["stopped"] is None


def test_a_dry_run_with_agent_counts_what_waits_for_the_agent(data_dir: Path, tmp_path: Path) -> None:
    """--dry-run under provider agent would call nothing: it counts the comments left for the agent."""
    _scan(data_dir, tmp_path, ["aa1"])
    envelope = agent(data_dir, "scan", "--source", str(tmp_path / "export.json"), "--dry-run")
    assert (envelope["result"]["would_call"], envelope["result"]["for_agent"]) == ([], 1)


# ---- claim ----------------------------------------------------------------------------------------


def test_claim_reserves_one_attempt_durably_with_a_lease(data_dir: Path, tmp_path: Path) -> None:
    """The inbox file on disk holds the open attempt: provider agent, command claim, a 15-minute lease."""
    _scan(data_dir, tmp_path, ["aa1"])
    before = utcnow()
    envelope = _claim(data_dir)
    assert envelope["exit_code"] == 0, envelope["error"]
    on_disk = json.loads(Paths(data_dir).inbox_file("aa1").read_text())["attempts"]
    assert len(on_disk) == 1 and on_disk[0]["outcome"] is None
    assert (on_disk[0]["provider"], on_disk[0]["command"], on_disk[0]["entrypoint"]) == ("agent", "claim", "bridge")
    lease = parse_iso(on_disk[0]["lease_until"])
    assert before + timedelta(minutes=15) <= lease <= utcnow() + timedelta(minutes=15)
    assert envelope["result"]["claimed"][0]["lease_until"] == on_disk[0]["lease_until"]
    assert _status_of(data_dir, "aa1") == ("reserved", 1)


def test_claim_hands_out_the_cached_prompt_and_the_providers_schema(data_dir: Path, tmp_path: Path) -> None:
    """Each claim carries the record's cached prompt and the one verdict schema the providers send."""
    _scan(data_dir, tmp_path, ["aa1"])
    result = _claim(data_dir)["result"]
    record = _record(data_dir, "aa1")
    assert set(result) == {"provider", "lease_minutes", "claimed", "items", "remaining", "calls"}
    assert (result["provider"], result["lease_minutes"], result["calls"], result["remaining"]) == ("agent", 15, 0, 0)
    [claimed] = result["claimed"]
    assert set(claimed) == {"id", "n", "lease_until", "system", "user", "schema"}
    assert (claimed["id"], claimed["n"]) == ("aa1", 1)
    assert (claimed["system"], claimed["user"]) == (record.prompt.system, record.prompt.user)
    assert claimed["schema"] == verdict_json_schema()


def test_claim_takes_the_oldest_first_up_to_the_limit(data_dir: Path, tmp_path: Path) -> None:
    """--limit 2 of three pending comments: the two oldest are claimed, the third is counted remaining."""
    _scan(data_dir, tmp_path, ["cc3", "aa1", "bb2"])  # created 09:00, 09:01, 09:02 in this order
    result = _claim(data_dir, limit=2)["result"]
    assert [c["id"] for c in result["claimed"]] == ["cc3", "aa1"] and result["remaining"] == 1
    assert [c["id"] for c in _claim(data_dir, limit=2)["result"]["claimed"]] == ["bb2"]


@pytest.mark.parametrize("limit", [0, 21])
def test_claim_refuses_a_limit_outside_1_to_20(data_dir: Path, tmp_path: Path, limit: int) -> None:
    """A bad limit is exit 2 and nothing is reserved."""
    _scan(data_dir, tmp_path, ["aa1"])
    envelope = _claim(data_dir, limit=limit)
    assert envelope["exit_code"] == 2 and not _record(data_dir, "aa1").attempts


def test_claim_with_another_provider_is_a_config_error(data_dir: Path, tmp_path: Path) -> None:
    """claim under provider openai: exit 2, says to set WATCHER_PROVIDER=agent, reserves nothing."""
    fake = FakeProvider()
    export = write_export(tmp_path / "export.json", ["aa1"])
    fake.script("aa1", "malformed")
    model(data_dir, fake, "scan", "--source", str(export))
    envelope = model(data_dir, fake, "claim")
    assert envelope["exit_code"] == 2 and envelope["error"] is not None and envelope["error"]["kind"] == "config"
    assert "WATCHER_PROVIDER=agent" in envelope["error"]["message"]
    assert len(_record(data_dir, "aa1").attempts) == 1 and fake.calls == ["aa1"]


# ---- submit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("as_text", [False, True])
def test_a_valid_submit_stores_the_verdict(data_dir: Path, tmp_path: Path, as_text: bool) -> None:
    """A verdict (an object over MCP, or JSON text on the command line) on the open claim: saved, done,
    index updated, verdict_by agent."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    envelope = _submit(data_dir, "aa1", 1, json.dumps(VERDICT)) if as_text else _submit_over_mcp(data_dir, VERDICT)
    assert envelope["exit_code"] == 0, envelope["error"]
    assert envelope["result"] == {"id": "aa1", "n": 1, "outcome": "verdict", "kind": None, "message": None,
                               "attempts": 1, "attempts_left": 2, "state": "done", "verdict": VERDICT}
    record = _record(data_dir, "aa1")
    assert record.verdict is not None and record.verdict.model_dump() == VERDICT
    assert record.attempts[0].outcome == "ok" and json.loads(record.attempts[0].raw or "") == VERDICT
    assert _status_of(data_dir, "aa1") == ("done", 1)
    shown = agent(data_dir, "show", "aa1")["result"]
    listed = agent(data_dir, "inbox", "--all")["result"]
    assert shown["verdict_by"] == "agent" and listed["comments"][0]["verdict_by"] == "agent"


def test_a_second_submit_of_the_same_attempt_is_refused_and_changes_nothing(data_dir: Path, tmp_path: Path) -> None:
    """Double submit: SubmitRefused, exit 2, the inbox file byte for byte as before."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    _submit(data_dir, "aa1", 1, VERDICT)
    before = Paths(data_dir).inbox_file("aa1").read_bytes()
    envelope = _submit(data_dir, "aa1", 1, {**VERDICT, "summary": "Something else."})
    assert envelope["exit_code"] == 2 and envelope["error"] is not None
    assert envelope["error"]["kind"] == "submit_refused"
    assert envelope["error"]["message"] == "attempt 1 of aa1 already has an outcome (ok): nothing changed"
    assert Paths(data_dir).inbox_file("aa1").read_bytes() == before


def test_an_invalid_verdict_ends_the_attempt_and_counts(data_dir: Path, tmp_path: Path) -> None:
    """A verdict failing the schema is the attempt's invalid_verdict (exit 0); the message says claim again."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    envelope = _submit(data_dir, "aa1", 1, INVALID)
    assert envelope["exit_code"] == 0
    result = envelope["result"]
    assert (result["outcome"], result["kind"], result["attempts_left"], result["state"]) == (
        "error", "invalid_verdict", 2, "failed")
    assert "needs_reply" in result["message"] and "claim it again for attempt 2 of 3" in result["message"]
    last = _record(data_dir, "aa1").attempts[-1]
    assert last.error is not None and last.error.kind == "invalid_verdict" and last.raw == json.dumps(INVALID)
    assert _status_of(data_dir, "aa1") == ("failed", 1)


def test_text_that_is_not_json_is_malformed_json_as_for_a_provider(data_dir: Path, tmp_path: Path) -> None:
    """The providers' classification: not JSON at all → malformed_json."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    result = _submit(data_dir, "aa1", 1, "sure, it needs a reply")["result"]
    assert (result["outcome"], result["kind"]) == ("error", "malformed_json")


def test_three_invalid_rounds_exhaust_the_comment_and_a_fourth_claim_gets_nothing(
        data_dir: Path, tmp_path: Path) -> None:
    """claim/invalid submit three times → exhausted; the next claim claims nothing and adds no attempt."""
    _scan(data_dir, tmp_path, ["aa1"])
    for n in (1, 2, 3):
        assert [c["n"] for c in _claim(data_dir)["result"]["claimed"]] == [n]
        result = _submit(data_dir, "aa1", n, INVALID)["result"]
    assert (result["state"], result["attempts_left"]) == ("exhausted", 0)
    assert "no attempts left" in result["message"] and "watcher grant aa1" in result["message"]
    assert _claim(data_dir)["result"]["claimed"] == []
    assert len(_record(data_dir, "aa1").attempts) == 3 and _status_of(data_dir, "aa1") == ("exhausted", 3)


@pytest.mark.parametrize(("cid", "n"), [("zz9", 1), ("aa1", 0), ("aa1", 2), ("AA1", 1)])
def test_submit_with_a_bad_id_or_attempt_is_exit_2_and_writes_nothing(
        data_dir: Path, tmp_path: Path, cid: str, n: int) -> None:
    """Unknown id, n < 1, an attempt that does not exist, a malformed id: exit 2, nothing written."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    before = Paths(data_dir).inbox_file("aa1").read_bytes()
    assert _submit(data_dir, cid, n, VERDICT)["exit_code"] == 2
    assert Paths(data_dir).inbox_file("aa1").read_bytes() == before


def test_submit_needs_no_agent_setting_the_attempt_says_who_claimed_it(data_dir: Path, tmp_path: Path) -> None:
    """A claim is answered even where the provider configured now is another one (and has no key)."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    done = run_main("cli", "submit", "aa1", "1", json.dumps(VERDICT), "--json", data_dir=data_dir,
                    env={"WATCHER_PROVIDER": "openai"})
    envelope = done.envelope
    assert envelope is not None and done.returncode == envelope["exit_code"]
    assert envelope["exit_code"] == 0 and envelope["result"]["state"] == "done"


def test_submit_refuses_an_attempt_a_model_run_reserved(data_dir: Path, tmp_path: Path) -> None:
    """An open attempt reserved by scan for openai (its process died) is no agent's claim: refused."""
    _scan(data_dir, tmp_path, ["aa1"])
    paths = Paths(data_dir)
    record = _record(data_dir, "aa1")
    FileStore(paths).save_record(records.reserve(record, command="scan", entrypoint="cli", provider="openai", model="m"))
    before = paths.inbox_file("aa1").read_bytes()
    envelope = _submit(data_dir, "aa1", 1, VERDICT)
    assert envelope["exit_code"] == 2 and envelope["error"] is not None and envelope["error"]["kind"] == "submit_refused"
    assert "not claimed by an agent" in envelope["error"]["message"]
    assert paths.inbox_file("aa1").read_bytes() == before


# ---- leases -----------------------------------------------------------------------------------------


def test_a_recheck_defers_a_claim_whose_lease_runs_and_calls_nothing(data_dir: Path, tmp_path: Path) -> None:
    """A real provider's recheck (and scan) meet the agent's claim in its lease: deferred, no call."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    fake = FakeProvider()
    before = Paths(data_dir).inbox_file("aa1").read_bytes()
    out = model(data_dir, fake, "recheck")
    [item] = out["result"]["items"]
    assert (item["outcome"], out["error"]) == ("deferred", None)
    assert "claimed by an agent until" in item["message"]
    rescanned = model(data_dir, fake, "scan", "--source", str(tmp_path / "export.json"))
    assert [i["outcome"] for i in rescanned["result"]["items"]] == ["deferred"]
    assert fake.calls == [] and Paths(data_dir).inbox_file("aa1").read_bytes() == before


def test_a_claim_defers_another_agents_claim_in_its_lease(data_dir: Path, tmp_path: Path) -> None:
    """Two agents: the second claim gets nothing for a comment the first holds; it is reported deferred."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    result = _claim(data_dir)["result"]
    assert result["claimed"] == [] and [i["outcome"] for i in result["items"]] == ["deferred"]
    assert len(_record(data_dir, "aa1").attempts) == 1


def test_after_the_lease_a_recheck_records_the_claim_interrupted(data_dir: Path, tmp_path: Path) -> None:
    """Past the lease the claim is an orphan: closed as interrupted (counted), no call this run."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    fake = FakeProvider()
    out = model(data_dir, fake, "recheck", clock=later(LEASE_END))
    assert [i["outcome"] for i in out["result"]["items"]] == ["interrupted"] and fake.calls == []
    last = _record(data_dir, "aa1").attempts[-1]
    assert last.error is not None and last.error.kind == "interrupted" and last.lease_until is not None


def test_after_the_lease_a_claim_closes_it_and_claims_it_on_the_next_run(data_dir: Path, tmp_path: Path) -> None:
    """claim meets an expired claim: interrupted, not claimed this run (SPEC §7 4.3); the next claim gets n=2."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    result = _claim(data_dir, clock=later(LEASE_END))["result"]
    assert result["claimed"] == [] and [i["outcome"] for i in result["items"]] == ["interrupted"]
    assert [c["n"] for c in _claim(data_dir, clock=later(LEASE_END))["result"]["claimed"]] == [2]


def test_a_submit_after_the_lease_is_accepted_while_the_attempt_is_still_open(data_dir: Path, tmp_path: Path) -> None:
    """Nobody closed it yet: it is still the open claim, so the verdict is stored."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    envelope = _submit(data_dir, "aa1", 1, VERDICT, clock=later(LEASE_END))
    assert envelope["exit_code"] == 0 and envelope["result"]["state"] == "done"


def test_a_submit_after_the_claim_was_closed_is_refused(data_dir: Path, tmp_path: Path) -> None:
    """Late: the claim was closed as interrupted after its lease; the submit says to claim again."""
    _scan(data_dir, tmp_path, ["aa1"])
    lease = _claim(data_dir)["result"]["claimed"][0]["lease_until"]
    model(data_dir, FakeProvider(), "recheck", clock=later(LEASE_END))
    before = Paths(data_dir).inbox_file("aa1").read_bytes()
    envelope = _submit(data_dir, "aa1", 1, VERDICT)
    assert envelope["exit_code"] == 2 and envelope["error"] is not None
    assert envelope["error"]["message"] == (f"attempt 1 of aa1 was closed as interrupted after its lease ended at "
                                         f"{lease}: nothing changed — claim it again")
    assert Paths(data_dir).inbox_file("aa1").read_bytes() == before


def test_a_submit_for_an_older_attempt_is_refused(data_dir: Path, tmp_path: Path) -> None:
    """Attempt 1 closed and re-claimed as attempt 2: a submit for 1 is not the open attempt."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    _claim(data_dir, clock=later(LEASE_END))  # closes attempt 1
    _claim(data_dir, clock=later(LEASE_END))  # claims attempt 2
    envelope = _submit(data_dir, "aa1", 1, VERDICT)
    assert envelope["exit_code"] == 2 and envelope["error"] is not None
    assert envelope["error"]["message"].startswith("attempt 1 is not aa1's open attempt (it has 2")
    assert _submit(data_dir, "aa1", 2, VERDICT)["result"]["state"] == "done"


def test_status_counts_claims_in_flight_and_ended(data_dir: Path, tmp_path: Path) -> None:
    """status: claimed attempts in flight with the earliest lease end; read from the reserved ones only."""
    _scan(data_dir, tmp_path, ["aa1", "bb2"])
    claimed = _claim(data_dir)["result"]["claimed"]
    doc = agent(data_dir, "status")["result"]
    assert doc["claimed"] == {"in_flight": 2, "earliest_lease_until": claimed[0]["lease_until"], "lease_ended": 0}


def test_status_judges_leases_by_the_runs_clock_as_a_batch_does(data_dir: Path, tmp_path: Path) -> None:
    """status a lease's length later (Hooks.clock): the claim is counted as ended, not in flight."""
    _scan(data_dir, tmp_path, ["aa1"])
    _claim(data_dir)
    doc = agent(data_dir, "status", clock=later(LEASE_END))["result"]
    assert doc["claimed"] == {"in_flight": 0, "earliest_lease_until": None, "lease_ended": 1}


# ---- the budget, whoever spends it ------------------------------------------------------------------


def test_one_model_call_and_two_claims_spend_the_budget(data_dir: Path, tmp_path: Path) -> None:
    """openai scan (malformed) + two agent claims (invalid) → exhausted: no fourth call, no fourth claim."""
    fake = FakeProvider()
    fake.script("aa1", "malformed")
    export = write_export(tmp_path / "export.json", ["aa1"])
    model(data_dir, fake, "scan", "--source", str(export))
    for n in (2, 3):
        assert [c["n"] for c in _claim(data_dir)["result"]["claimed"]] == [n]
        _submit(data_dir, "aa1", n, INVALID)
    assert _claim(data_dir)["result"]["claimed"] == []
    model(data_dir, fake, "recheck")
    assert fake.calls == ["aa1"]
    assert [a.provider for a in _record(data_dir, "aa1").attempts] == ["openai", "agent", "agent"]
    assert _status_of(data_dir, "aa1") == ("exhausted", 3)


# ---- the CLI ----------------------------------------------------------------------------------------


def test_cli_claim_and_submit_round_trip(data_dir: Path, tmp_path: Path) -> None:
    """`watcher claim --json` then `watcher submit ID N -` with the verdict on stdin, as a user types it."""
    _scan(data_dir, tmp_path, ["aa0", "aa1"])
    human = run_main("cli", "claim", "--limit", "1", data_dir=data_dir, env=AGENT_ENV)
    assert human.returncode == 0 and "aa0  attempt 1  claimed until " in human.stdout
    assert "`watcher show ID --json`" in human.stdout and "1 more wait" in human.stdout
    claimed = run_main("cli", "claim", "--json", data_dir=data_dir, env=AGENT_ENV)
    assert claimed.returncode == 0, claimed.stdout + claimed.stderr
    [item] = json.loads(claimed.stdout)["result"]["claimed"]
    done = run_main("cli", "submit", item["id"], str(item["n"]), "-", data_dir=data_dir, env=AGENT_ENV,
                    stdin=json.dumps(VERDICT))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "aa1 attempt 1: verdict stored" in done.stdout
    again = run_main("bridge", "submit", "aa1", "1", json.dumps(VERDICT), data_dir=data_dir, env=AGENT_ENV)
    envelope = json.loads(again.stdout)
    assert again.returncode == 2 and envelope["error"]["kind"] == "submit_refused"


# ---- what an agent submits is redacted like a provider's answer (SPEC §15.5) ------------------------

KEYS = {"WATCHER_API_KEY": "sk-AGENT/SUBMIT+key1", "OPENAI_API_KEY": "sk-proj-OPENAI/key2",
        "ANTHROPIC_API_KEY": "sk-ant-ANTHROPIC/key3", "DEVTO_API_KEY": "devto-KEY/key4"}


def _leaked_anywhere(data_dir: Path, *texts: str) -> list[str]:
    from _fakes.provider import key_leaks

    found = [f"{name} in {p.relative_to(data_dir)}" for p in sorted(data_dir.rglob("*")) if p.is_file()
             for name, key in KEYS.items() if key_leaks(p.read_bytes().decode("utf-8", "replace"), key)]
    return found + [f"{name} in output" for text in texts for name, key in KEYS.items() if key_leaks(text, key)]


def test_a_submitted_verdict_holding_a_key_is_stored_and_answered_without_it(data_dir: Path, tmp_path: Path) -> None:
    """An agent that read the environment pastes the keys into its verdict (plain, \\/-escaped,
    \\u-escaped; a valid and an invalid one): the raw answer, the verdict, the error and the
    output hold none of them, as for a provider's answer."""
    from _fakes.provider import u_escaped

    env = {**AGENT_ENV, **KEYS}
    export = write_export(tmp_path / "export.json", ["ak1", "ak2"])
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=env).returncode == 0
    claim = run_main("cli", "claim", "--json", data_dir=data_dir, env=env)
    assert [c["id"] for c in json.loads(claim.stdout)["result"]["claimed"]] == ["ak1", "ak2"]
    keys = list(KEYS.values())
    valid = {**VERDICT, "summary": f"Asks about {keys[0]} and {keys[3]}.", "reply_hint": f"Quote {keys[1]}."}
    text = json.dumps(valid).replace(keys[0], keys[0].replace("/", "\\/")) + f" {u_escaped(keys[2])}"
    outputs = [run_main("cli", "submit", "ak1", "1", json.dumps(valid), "--json", data_dir=data_dir, env=env),
               run_main("bridge", "submit", "ak2", "1", json.dumps({"needs_reply": keys[2], "summary": text}),
                        data_dir=data_dir, env=env),
               run_main("cli", "show", "ak1", data_dir=data_dir, env=env),
               run_main("cli", "show", "ak2", "--json", data_dir=data_dir, env=env)]
    assert [o.returncode for o in outputs] == [0, 0, 0, 0], [o.stderr for o in outputs]
    stored = _record(data_dir, "ak1")
    assert stored.verdict is not None and "[redacted]" in stored.verdict.summary
    assert "[redacted]" in (stored.attempts[0].raw or "")
    failed = _record(data_dir, "ak2")
    assert failed.verdict is None and failed.attempts[0].error is not None
    assert failed.attempts[0].error.kind == "invalid_verdict"
    assert _leaked_anywhere(data_dir, *(o.stdout + o.stderr for o in outputs)) == []
