"""SPEC §10 "MCP, for agents": progress, version, no grant, the prompt-less show, resources, the
reply-session prompt, annotations, descriptions and the verbose request log — each through an
official-SDK client session.

What the server answers is checked against the real server built in this process, over the SDK's
in-memory transport (``run_memory_session``); the version a started ``watcher-bridge mcp`` reports
and the request log it writes on stderr are checked against the real process (``run_session``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import write_export
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from test_mcp_server import TOOLS, doc, run_memory_session, run_session

import watcher

pytestmark = pytest.mark.slow

Progress = list[tuple[float, float | None, str | None]]


def recorder() -> tuple[Progress, Callable[[float, float | None, str | None], Awaitable[None]]]:
    seen: Progress = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return seen, on_progress


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


# ---- progress --------------------------------------------------------------------------------------------


def test_scan_reports_progress_after_planning_and_after_each_call(data_dir: Path, tmp_path: Path) -> None:
    """limit 2 of 3 new comments: 0/2 after planning, then 1/2 and 2/2 named by id and outcome."""
    export = write_export(tmp_path / "export.json", ["one", "two", "three"])
    seen, on_progress = recorder()

    async def scenario(session: ClientSession) -> None:
        scan = doc(await session.call_tool("scan", {"limit": 2, "source": str(export)}, progress_callback=on_progress))
        assert scan["ok"] and scan["result"]["calls"] == 2

    run_memory_session(data_dir, scenario)
    assert seen == [(0, 2, "2 model calls planned"), (1, 2, "one: verdict"), (2, 2, "two: verdict")]


def test_recheck_progress_counts_calls_only_and_names_error_kinds(
        data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """A scan's malformed answers show their kind; a recheck of a failed and a done comment steps once
    (the done one makes no call), never past its total."""
    fake.script("bad", "malformed", "verdict")
    export = write_export(tmp_path / "export.json", ["good", "bad"])
    scan_seen, on_scan = recorder()
    recheck_seen, on_recheck = recorder()

    async def scenario(session: ClientSession) -> None:
        await session.call_tool("scan", {"source": str(export)}, progress_callback=on_scan)
        recheck = doc(await session.call_tool("recheck", {"ids": ["good", "bad"]}, progress_callback=on_recheck))
        assert [i["outcome"] for i in recheck["result"]["items"]] == ["skipped", "verdict"]

    run_memory_session(data_dir, scenario, env=fake.env())
    assert scan_seen == [(0, 2, "2 model calls planned"), (1, 2, "good: verdict"),
                         (2, 2, "bad: error (malformed_json)")]
    assert recheck_seen == [(0, 2, "2 model calls planned"), (1, 2, "bad: verdict")]
    assert fake.calls == ["good", "bad", "bad"]


def test_a_dry_run_and_the_free_tools_send_no_progress(data_dir: Path, tmp_path: Path) -> None:
    """dry_run plans and stops: nothing to wait for, so no notification; status sends none either."""
    export = write_export(tmp_path / "export.json", ["one"])
    seen, on_progress = recorder()

    async def scenario(session: ClientSession) -> None:
        dry = doc(await session.call_tool("scan", {"dry_run": True, "source": str(export)},
                                          progress_callback=on_progress))
        assert dry["result"]["would_call"] == ["one"]
        await session.call_tool("status", {}, progress_callback=on_progress)

    run_memory_session(data_dir, scenario)
    assert seen == []


# ---- identity, tools, annotations ---------------------------------------------------------------------------


def test_server_info_names_the_package_version(data_dir: Path) -> None:
    """initialize answers serverInfo {name: devto-watcher, version: watcher.__version__}."""
    async def scenario(session: ClientSession) -> None:
        init = session.initialize_result
        assert init is not None
        assert (init.server_info.name, init.server_info.version) == ("devto-watcher", watcher.__version__)
        assert "Nothing is ever posted" in (init.instructions or "")

    run_session(data_dir, scenario)


def test_there_is_no_grant_tool_and_calling_one_is_a_usage_envelope(data_dir: Path) -> None:
    """grant is not listed; called anyway, the core's refusal comes back as exit 2; so does an unknown tool."""
    async def scenario(session: ClientSession) -> None:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        grant = doc(await session.call_tool("grant", {"id": "abc"}))
        assert (grant["command"], grant["exit_code"], grant["error"]["kind"]) == ("grant", 2, "usage")
        assert "person's decision" in grant["error"]["message"]
        unknown = doc(await session.call_tool("publish", {}))
        assert (unknown["command"], unknown["exit_code"], unknown["result"]) == ("publish", 2, None)
        assert "no tool 'publish'" in unknown["error"]["message"] and "scan" in unknown["error"]["message"]

    run_memory_session(data_dir, scenario)


def test_scan_of_the_sample_is_refused_pointing_at_watcher_demo(data_dir: Path) -> None:
    """scan {source: sample} (also as a dry run) is a usage envelope naming `watcher demo`; nothing is written."""
    async def scenario(session: ClientSession) -> None:
        for arguments in ({"source": "sample"}, {"source": "sample", "dry_run": True}):
            refused = doc(await session.call_tool("scan", arguments))
            assert (refused["command"], refused["exit_code"], refused["error"]["kind"]) == ("scan", 2, "usage")
            assert "`watcher demo`" in refused["error"]["message"] and refused["result"] is None
        status = doc(await session.call_tool("status", {}))
        assert status["result"]["comments"] == 0

    run_memory_session(data_dir, scenario)
    assert not (data_dir / "inbox").exists() or not any((data_dir / "inbox").iterdir())
    assert not (data_dir / "demo").exists() and not (Path.cwd() / "data" / "demo").exists()


def test_annotations_say_what_each_tool_may_touch(data_dir: Path) -> None:
    """status, inbox, show, check read-only; mark, signals non-destructive and idempotent; scan, recheck open-world."""
    async def scenario(session: ClientSession) -> None:
        hints = {t.name: t.annotations for t in (await session.list_tools()).tools}
        for name in ("status", "inbox", "show", "check"):
            assert hints[name].read_only_hint is True, name
        for name in ("mark", "signals"):
            assert (hints[name].read_only_hint, hints[name].destructive_hint, hints[name].idempotent_hint) == (
                False, False, True), name
        for name in ("scan", "recheck"):
            assert (hints[name].read_only_hint, hints[name].destructive_hint, hints[name].open_world_hint) == (
                False, False, True), name

    run_memory_session(data_dir, scenario)


def test_descriptions_tell_an_agent_what_to_do_with_each_exit_code(data_dir: Path) -> None:
    """scan and recheck: 2 never retry, 3 wait, 4 later; recheck: never in a loop; every tool names its codes."""
    async def scenario(session: ClientSession) -> None:
        described = {t.name: " ".join((t.description or "").split()) for t in (await session.list_tools()).tools}
        for name in ("scan", "recheck"):
            text = described[name]
            assert "exit_code 2: fix" in text and "never retry" in text, name
            assert "exit_code 3: wait" in text and "until when" in text, name
            assert "exit_code 4:" in text and "try again later" in text and "do not loop" in text, name
        assert "Never call recheck in a loop" in described["recheck"]
        assert all("exit_code " in text for text in described.values())

    run_memory_session(data_dir, scenario)


def test_show_leaves_the_cached_prompt_out_unless_asked(data_dir: Path, tmp_path: Path) -> None:
    """show {id} has no prompt; show {id, prompt: true} has the prompt the model was sent."""
    export = write_export(tmp_path / "export.json", ["one"])

    async def scenario(session: ClientSession) -> None:
        await session.call_tool("scan", {"source": str(export)})
        short = doc(await session.call_tool("show", {"id": "one"}))["result"]
        full = doc(await session.call_tool("show", {"id": "one", "prompt": True}))["result"]
        assert "prompt" not in short and short["comment"]["id"] == "one" and short["verdict"] is not None
        assert "TAG:one" in full["prompt"]["user"]
        assert {k: v for k, v in full.items() if k != "prompt"} == short

    run_memory_session(data_dir, scenario)


def test_verbose_logs_each_request_on_stderr(data_dir: Path, tmp_path: Path) -> None:
    """--verbose: one stderr line per request (tool, arguments, exit code, duration); quiet without it."""
    async def calls(session: ClientSession) -> None:
        await session.call_tool("status", {})
        await session.call_tool("mark", {"id": "nosuch", "triage": "replied"})

    run_session(data_dir, calls, errlog=tmp_path / "verbose", args=["mcp", "--verbose"])
    run_session(data_dir, calls, errlog=tmp_path / "quiet")
    lines = (tmp_path / "verbose").read_text().splitlines()
    assert any("status {} -> exit_code 0 in " in line for line in lines), lines
    assert any('mark {"id": "nosuch", "triage": "replied"} -> exit_code 2 in ' in line for line in lines), lines
    assert "exit_code" not in (tmp_path / "quiet").read_text()


# ---- resources and the prompt -----------------------------------------------------------------------------


def test_resources_hold_the_inbox_and_each_comment(data_dir: Path, tmp_path: Path) -> None:
    """watcher://inbox is the inbox tool's result; watcher://comment/{id} is show's; an unknown id is an error."""
    export = write_export(tmp_path / "export.json", ["one", "two"])

    async def scenario(session: ClientSession) -> None:
        listed = (await session.list_resources()).resources
        assert [(str(r.uri), r.mime_type) for r in listed] == [("watcher://inbox", "application/json")]
        templates = (await session.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["watcher://comment/{id}"]
        await session.call_tool("scan", {"source": str(export)})

        inbox = json.loads((await session.read_resource("watcher://inbox")).contents[0].text)
        assert inbox == doc(await session.call_tool("inbox", {}))["result"]
        assert inbox["count"] == 2 and inbox["comments"][0]["verdict"]["reply_hint"]
        comment = json.loads((await session.read_resource("watcher://comment/one")).contents[0].text)
        assert comment == doc(await session.call_tool("show", {"id": "one"}))["result"]
        with pytest.raises(MCPError, match="no comment nosuch"):
            await session.read_resource("watcher://comment/nosuch")

    run_memory_session(data_dir, scenario)


def test_reply_session_walks_status_inbox_show_draft_mark_and_never_posts(data_dir: Path) -> None:
    """prompts/list has reply-session (id optional); its text walks the steps in order and forbids posting."""
    async def scenario(session: ClientSession) -> None:
        prompts = {p.name: p for p in (await session.list_prompts()).prompts}
        assert set(prompts) == {"reply-session"}
        assert [(a.name, a.required) for a in prompts["reply-session"].arguments or []] == [("id", False)]
        got = await session.get_prompt("reply-session", {})
        text = got.messages[0].content.text  # type: ignore[union-attr]
        steps = [text.index(word) for word in ("`status`", "`inbox`", "`show`", "a draft reply", "`mark`")]
        assert steps == sorted(steps)
        for says in ("Nothing is ever posted", "cannot post", "reply_hint", "quote", "my voice", '"replied"',
                     "Only when I say the reply is posted"):
            assert says in " ".join(text.split()), says
        started = await session.get_prompt("reply-session", {"id": "3bkf"})
        assert 'id "3bkf"' in started.messages[0].content.text  # type: ignore[union-attr]

    run_memory_session(data_dir, scenario)
