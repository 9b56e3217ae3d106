"""Claude Code (``claude -p``) driving ``watcher-bridge mcp`` as docs/agents.md configures it.

Each test runs ``claude -p`` in a project directory whose ``.mcp.json`` comes from a block of
docs/agents.md (written as shown, or by running the documented ``claude mcp add``), with the
documented ``.claude/settings.local.json`` approving the server and allowing its tools, against
the fake model through ``ANTHROPIC_BASE_URL`` and a dummy key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _clients import CLAUDE_KEY, LANE_OPENAI_KEY, Workspace
from _docs import block, loaded
from _fake_models import Call, FakeModel, Final, Turn
from _long_server import instructions
from _proc import write_export
from _scenarios import (
    agent_script,
    assert_agent_verdict_on_disk,
    cancelled_at,
    methods,
    provider_env,
    reserved,
    slow_provider,
    wait_exit,
    wire_events,
)

from bridge import mcp_text
from bridge.mcp_text import INSTRUCTIONS
from watcher.commands.registry import COMMANDS

# The tools the server lists: the registry's commands with a listed MCP entry (watcher/commands/registry.py).
TOOLS = {c.name for c in COMMANDS if c.mcp is not None and c.mcp.listed}
CLAUDE_BLOCKS = sorted(loaded("claude-mcp-json") | loaded("claude-add"))
# What the documented `${VAR}` references expand to in the lane.
YOURS = {"DEVTO_USERNAME": "maya_writes", "OPENAI_API_KEY": LANE_OPENAI_KEY}
WAIT = {"MCP_CONNECTION_NONBLOCKING": "0"}  # waits for servers without "alwaysLoad"
NEWER = "2.1.332"
HERE = Path(__file__).resolve().parent
NO_SUCH_COMMAND = "no command with that name"


def _newer(ws: Workspace) -> bool:
    return ws.clients.at_least("claude", NEWER)


def _defers(ws: Workspace, server: str = "watcher") -> bool:
    """The newer release offers a server's tools only by name, behind a ToolSearch call, unless the
    server is marked "alwaysLoad"."""
    return _newer(ws) and not ws.mcp_json()["mcpServers"][server].get("alwaysLoad")


def _tool_search(ws: Workspace, server: str, tools: list[str]) -> list[Call | Final]:
    """The ToolSearch turn a model makes first where the tools are deferred (else nothing)."""
    if not _defers(ws, server):
        return []
    return [
        Call("ToolSearch", {"query": "select:" + ",".join(f"mcp__{server}__{t}" for t in tools)})
    ]


def _named(model: FakeModel, turn: Turn, server: str = "watcher") -> bool:
    """Every watcher tool is named in the request (offered, or listed as a deferred tool)."""
    return all(f"mcp__{server}__{t}" in model.request_text(turn) for t in TOOLS)


def _doc(text: str) -> dict[str, Any]:
    doc = json.loads(text)
    assert isinstance(doc, dict) and "exit_code" in doc, text[:300]
    return doc


def _texts(turn: Turn) -> list[str]:
    """Every text block of the conversation the request carries."""
    out = []
    for message in turn.body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else [{"type": "text", "text": content}]:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                out.append(part["text"])
    return out


def _extra_for(ws: Workspace) -> dict[str, str]:
    return {
        **YOURS,
        **({} if any(s.get("alwaysLoad") for s in ws.mcp_json()["mcpServers"].values()) else WAIT),
    }


@pytest.mark.parametrize("name", CLAUDE_BLOCKS)
def test_every_documented_claude_config_connects_and_serves_status(
    ws: Workspace, model: FakeModel, name: str
) -> None:
    """(a)+(b) Each Claude Code block of docs/agents.md, with the documented settings: the tools are
    in the first request (the newer release: named only, unless "alwaysLoad", and a ToolSearch turn
    loads them) and a status call's envelope comes back to the model."""
    server = ws.claude_block(name)
    model.server_name = server
    first = _tool_search(ws, server, ["status"])
    model.script = [*first, Call(f"{server}.status"), Final()]
    session = ws.claude(model.base_url, "What is the watcher status?", extra=_extra_for(ws))
    assert session.code == 0, session.why()
    offered = set(model.watcher_tools(model.first_turn()))
    assert offered == (set() if first else TOOLS) and _named(model, model.first_turn(), server)
    result = model.result(len(first))
    status = _doc(result.text)
    assert status["exit_code"] == 0 and result.is_error is False
    settings = status["result"]["settings"]
    if "${DEVTO_USERNAME}" in block(name).text:
        assert (
            settings["devto_username"] == "maya_writes"
        )  # expanded from Claude Code's environment
    if '"WATCHER_API_KEY": "${OPENAI_API_KEY}"' in block(name).text:
        assert (settings["api_key_set"], settings["api_key_from"]) == (True, "WATCHER_API_KEY"), (
            settings
        )
    assert LANE_OPENAI_KEY not in result.text


def test_claude_lists_the_tools_and_passes_compact_structured_content_back(
    ws: Workspace, model: FakeModel
) -> None:
    """(b) Tools mcp__watcher__*, input schemas only; status and inbox come back as the compact JSON of
    the structuredContent (not the text block); an exit_code 2 result is marked is_error and comes
    back as the server's text block."""
    ws.seed(["aaa1", "bbb2"])
    ws.claude_block("claude-watcher")
    model.script = [Call("status"), Call("inbox"), Call("show", {"id": "zzzz"}), Final()]
    session = ws.claude(model.base_url, "What needs a reply?", extra=YOURS)
    assert session.code == 0, session.why()
    tools = model.watcher_tools(model.first_turn())
    assert set(tools) == TOOLS
    assert all(
        set(t) <= {"name", "description", "input_schema", "cache_control"} for t in tools.values()
    ), tools
    assert "maximum" in tools["scan"]["input_schema"]["properties"]["limit"]
    status, inbox, show = model.result(0), model.result(1), model.result(2)
    assert _doc(status.text)["result"]["states"]["pending"] == 2
    assert status.text.startswith(
        '{"ok":true,"command":"status"'
    )  # compact: not the server's text block
    assert _doc(inbox.text)["command"] == "inbox" and inbox.is_error is False
    assert _doc(show.text)["exit_code"] == 2 and show.is_error is True
    wire = wait_exit(ws.wire)
    calls = {
        r["msg"]["id"]: r["msg"]["params"]
        for r in wire
        if r.get("dir") == "in"
        and isinstance(r.get("msg"), dict)
        and r["msg"].get("method") == "tools/call"
    }
    assert len(calls) == 3 and all(
        "progressToken" in c["_meta"] for c in calls.values()
    )  # it asks for progress
    answers = [
        r["msg"]["result"]
        for r in wire
        if r.get("dir") == "out"
        and isinstance(r.get("msg"), dict)
        and r["msg"].get("id") in calls
        and "result" in r["msg"]
    ]
    text_block = answers[2]["content"][0]["text"]
    # A tool error is the server's text block as it is (json.dumps's spacing), not the compact
    # structured content a success comes back as.
    assert show.text == text_block and show.text.startswith('{"ok": false, "command": "show"'), (
        show.text
    )


def test_claude_gives_the_instructions_whole(ws: Workspace, model: FakeModel) -> None:
    """(c) Claude Code puts the instructions under "# MCP Server Instructions" / "## watcher" in the
    conversation: ours (under 2,048 characters, where 2.1.197 cuts) arrive whole, nothing cut."""
    ws.claude_block("claude-watcher")
    session = ws.claude(model.base_url, "hello", extra=YOURS)
    assert session.code == 0, session.why()
    texts = [t for t in _texts(model.first_turn()) if "# MCP Server Instructions" in t]
    assert texts, "no MCP Server Instructions section in the request"
    section = texts[0].split("## watcher\n", 1)[1]
    assert section.startswith(INSTRUCTIONS) and not section[len(INSTRUCTIONS) :].startswith("…")
    assert "[truncated]" not in section[: len(INSTRUCTIONS) + 20]


def test_claude_cuts_long_instructions_at_2048_or_keeps_them_whole(
    ws: Workspace, model: FakeModel
) -> None:
    """A server's 3,000-character instructions (_long_server): 2.1.197 keeps their first 2,048
    characters; the newer release keeps them whole."""
    long_server = {
        "type": "stdio",
        "command": sys.executable,
        "args": [str(HERE / "_long_server.py")],
        "alwaysLoad": True,
    }
    ws.write_mcp_json({"mcpServers": {"long": long_server}})
    session = ws.claude(model.base_url, "hello")
    assert session.code == 0, session.why()
    texts = [t for t in _texts(model.first_turn()) if "# MCP Server Instructions" in t]
    assert texts, "no MCP Server Instructions section in the request"
    section, whole = texts[0].split("## long\n", 1)[1], instructions()
    kept = next(
        (i for i, (a, b) in enumerate(zip(section, whole, strict=False)) if a != b),
        min(len(section), len(whole)),
    )
    assert kept == (len(whole) if _newer(ws) else 2048), (kept, section[kept - 20 : kept + 60])


def test_the_old_claude_mcp_add_order_fails(ws: Workspace) -> None:
    """--env takes several values: a server name after it is read as one more KEY=value."""
    wrong = (
        "claude mcp add --transport stdio --scope project --env WATCHER_DATA_DIR=/path/to/devto-watcher/data "
        "watcher -- /path/to/devto-watcher/.venv/bin/watcher-bridge mcp"
    )
    done = ws.bash(wrong)
    assert (
        done.code != 0
        and "Invalid environment variable format: watcher" in done.stdout + done.stderr
    )
    assert not (ws.project / ".mcp.json").exists()


def test_claude_p_starts_unapproved_servers_but_runs_no_tool_not_allowed(
    ws: Workspace, model: FakeModel
) -> None:
    """`claude -p` starts a project's .mcp.json server though nobody approved it, but denies its tool
    calls (permission_denials) unless allowed; the project's own allow rules count only once the
    project is trusted (2.1.197) or at once (the newer release); the documented
    `claude -p … --allowedTools mcp__watcher` runs them."""
    ws.claude_block("claude-watcher", settings=None)
    listed = ws.run([*ws.clients.claude, "mcp", "list"], extra=YOURS)
    assert "Pending approval" in listed.stdout, listed.why()
    allow = block("claude-allow").text
    for trusted in (False, True):
        (ws.project / ".claude").mkdir(exist_ok=True)
        (ws.project / ".claude" / "settings.local.json").write_text(allow)
        if trusted:
            ws.trust_project()
        model.script = [Call("status"), Final()]
        model.turns.clear()
        model.results.clear()
        session = ws.claude(model.base_url, "status?", extra=YOURS)
        assert session.code == 0 and set(model.watcher_tools(model.first_turn())) == TOOLS, (
            session.why()
        )
        denials = [d["tool_name"] for d in session.json_out()["permission_denials"]]
        # 2.1.197 reads the allow rules only in a trusted project; the newer release reads them anyway.
        allowed = trusted or _newer(ws)
        assert denials == ([] if allowed else ["mcp__watcher__status"]), (trusted, denials)
        assert ("exit_code" in model.result(0).text) is allowed
    (ws.project / ".claude" / "settings.local.json").unlink()
    model.turns.clear()
    model.results.clear()
    allowed = ws.bash(
        block("claude-p").text.strip() + " --output-format json",
        extra=ws.claude_env(model.base_url) | YOURS,
    )
    assert allowed.code == 0 and allowed.json_out()["permission_denials"] == [], allowed.why()
    assert _doc(model.result(0).text)["exit_code"] == 0


def test_claude_reply_session_is_the_mcp__watcher__reply_session_command(
    ws: Workspace, model: FakeModel
) -> None:
    """/mcp__watcher__reply-session aaa1 gets the prompt with id aaa1 and hands it to the model;
    /watcher:reply-session is an unknown command (2.1.197) or goes to the model as typed, with a
    note that no command has that name (the newer release)."""
    ws.claude_block("claude-watcher")
    ok = ws.claude(model.base_url, "/mcp__watcher__reply-session aaa1", extra=YOURS)
    assert ok.code == 0, ok.why()
    assert any(mcp_text.reply_session("aaa1") in t for t in _texts(model.first_turn()))
    gets = [
        r["msg"]
        for r in ws.wire()
        if isinstance(r.get("msg"), dict) and r["msg"].get("method") == "prompts/get"
    ]
    assert gets and (gets[0]["params"]["name"], gets[0]["params"]["arguments"]) == (
        "reply-session",
        {"id": "aaa1"},
    )
    model.turns.clear()
    unknown = ws.claude(model.base_url, "/watcher:reply-session aaa1", extra=YOURS)
    if _newer(ws):  # sent to the model as typed, with a note that no command has that name
        texts = _texts(model.first_turn())
        assert unknown.code == 0 and any("/watcher:reply-session aaa1" in t for t in texts), (
            unknown.why()
        )
        assert any(NO_SUCH_COMMAND in t for t in texts), texts[-3:]
        assert mcp_text.reply_session("aaa1") not in model.request_text(model.first_turn())
    else:
        assert unknown.json_out()["result"] == "Unknown command: /watcher:reply-session"


def test_claude_p_resolves_no_at_resource_but_its_model_reads_both(
    ws: Workspace, model: FakeModel
) -> None:
    """`claude -p "@watcher:watcher://inbox …"` sends no resources/read; the model's ReadMcpResourceTool
    reads watcher://inbox and watcher://comment/ID."""
    ws.seed(["aaa1"])
    ws.claude_block("claude-watcher")
    mention = ws.claude(model.base_url, "@watcher:watcher://inbox what needs a reply?", extra=YOURS)
    assert mention.code == 0, mention.why()
    assert "resources/read" not in methods(wait_exit(ws.wire))
    model.script = [
        Call("ReadMcpResourceTool", {"server": "watcher", "uri": "watcher://inbox"}),
        Call("ReadMcpResourceTool", {"server": "watcher", "uri": "watcher://comment/aaa1"}),
        Final(),
    ]
    model.turns.clear()
    read = ws.claude(model.base_url, "read the inbox", extra=YOURS)
    assert read.code == 0, read.why()
    inbox, comment = json.loads(model.result(0).text), json.loads(model.result(1).text)
    assert inbox["contents"][0]["uri"] == "watcher://inbox" and "unresolved" in json.loads(
        inbox["contents"][0]["text"]
    )
    assert json.loads(comment["contents"][0]["text"])["comment"]["id"] == "aaa1"


def test_claude_starts_before_a_slow_server_unless_told_to_wait(
    ws: Workspace, model: FakeModel
) -> None:
    """A server 1.5 s slow to start is missing from the first request; "alwaysLoad": true, or
    MCP_CONNECTION_NONBLOCKING=0, makes Claude Code wait for it — up to MCP_CONNECT_TIMEOUT_MS
    (5,000 ms when unset): a server 7 s slow is missing again unless that is raised. In the newer
    release only "alwaysLoad" puts the tools there; the other way names them, deferred."""
    ws.claude_block("claude-watcher")
    documented = ws.mcp_json()
    plain = json.loads(json.dumps(documented))
    del plain["mcpServers"]["watcher"]["alwaysLoad"]
    # The lane raises MCP_CONNECT_TIMEOUT_MS to 20 s (_clients.claude_env: a loaded machine can take more
    # than 5 s to start a server); "" is Claude Code's default again.
    default_wait = {**YOURS, "MCP_CONNECT_TIMEOUT_MS": ""}
    cases = (
        (plain, {**YOURS, "TAP_DELAY_S": "1.5"}, False),
        (documented, {**YOURS, "TAP_DELAY_S": "1.5"}, True),
        (plain, {**YOURS, **WAIT, "TAP_DELAY_S": "1.5"}, True),
        (documented, {**default_wait, "TAP_DELAY_S": "7"}, False),
        (documented, {**YOURS, "TAP_DELAY_S": "7"}, True),
    )
    for doc, extra, waits in cases:
        ws.write_mcp_json(doc)
        model.turns.clear()
        session = ws.claude(model.base_url, "hello", extra=extra)
        assert session.code == 0, session.why()
        first = model.first_turn()
        why = (doc["mcpServers"]["watcher"], extra)
        assert _named(model, first) is waits, why
        # The newer release offers the tools themselves only for an "alwaysLoad" server; the
        # waited-for others are named as deferred tools (a ToolSearch call loads them).
        loaded = waits and not _defers(ws)
        assert bool(model.watcher_tools(first)) is loaded, why


def test_claude_passes_an_unset_variable_literally_and_watcher_names_it(
    ws: Workspace, model: FakeModel
) -> None:
    """DEVTO_USERNAME not set where Claude Code runs: the server gets "${DEVTO_USERNAME}" and status
    answers exit_code 2 naming the variable."""
    ws.claude_block("claude-watcher")
    model.script = [Call("status"), Final()]
    session = ws.claude(model.base_url, "status?", extra={"OPENAI_API_KEY": LANE_OPENAI_KEY})
    assert session.code == 0, session.why()
    status = _doc(model.result(0).text)
    assert status["exit_code"] == 2 and model.result(0).is_error is True
    assert status["error"]["message"].startswith(
        "DEVTO_USERNAME is the unexpanded text ${DEVTO_USERNAME}"
    )


def test_claude_hands_the_server_its_own_anthropic_key_and_watcher_withholds_it(
    ws: Workspace, model: FakeModel
) -> None:
    """WATCHER_PROVIDER=anthropic and no key in .mcp.json: the server is started with Claude Code's own
    ANTHROPIC_API_KEY, which it does not spend: status says it is withheld (never the key)."""
    ws.claude_block("claude-watcher")
    doc = ws.mcp_json()
    env = doc["mcpServers"]["watcher"]["env"]
    env["WATCHER_PROVIDER"] = "anthropic"
    del env["WATCHER_API_KEY"]
    ws.write_mcp_json(doc)
    model.script = [Call("status"), Final()]
    session = ws.claude(model.base_url, "status?", extra=YOURS)
    assert session.code == 0, session.why()
    settings = _doc(model.result(0).text)["result"]["settings"]
    assert (settings["api_key_set"], settings["api_key_from"]) == (
        False,
        "ANTHROPIC_API_KEY (withheld: see check)",
    )
    assert "ANTHROPIC_API_KEY" in next(r["env"] for r in ws.wire() if r.get("event") == "start")
    assert CLAUDE_KEY not in model.result(0).text


def test_claude_agent_mode_claim_then_submit_leaves_the_verdict_on_disk(
    ws: Workspace, model: FakeModel
) -> None:
    """(d) The documented agent-mode `claude mcp add`: tools mcp__devto-watcher__* (the newer release:
    named, loaded by a ToolSearch turn); claim, then submit a valid verdict; the inbox file holds
    it, its attempt by provider agent."""
    ws.seed(["aaa1", "bbb2"])
    server = ws.claude_block("claude-agent")
    model.server_name = server
    first = _tool_search(ws, server, ["status", "claim", "submit"])
    model.script = agent_script(server, first)
    session = ws.claude(model.base_url, "Judge the comments waiting for you.", extra=WAIT)
    assert session.code == 0, session.why()
    offered = {t["name"] for t in model.first_turn().body["tools"]}
    assert ("mcp__devto-watcher__claim" in offered) is not bool(first) and _named(
        model, model.first_turn(), server
    )
    submitted = _doc(model.result(len(first) + 2).text)
    assert (submitted["exit_code"], submitted["result"]["outcome"]) == (0, "verdict"), submitted
    assert_agent_verdict_on_disk(ws.inbox_records(), model.result(len(first) + 1))
    slash = ws.claude(model.base_url, "/mcp__devto-watcher__reply-session", extra=WAIT)
    assert (
        slash.code == 0
        and slash.json_out()["result"] != "Unknown command: /mcp__devto-watcher__reply-session"
    )
    assert "prompts/get" in methods(ws.wire())


def _timed_server(ws: Workspace, provider_doc: dict[str, str], timeout_ms: int) -> None:
    ws.claude_block("claude-watcher")
    doc = ws.mcp_json()
    server = doc["mcpServers"]["watcher"]
    server["env"] = {**provider_doc, "WATCHER_DATA_DIR": str(ws.data)}
    if timeout_ms:
        server["timeout"] = timeout_ms
    else:
        server.pop("timeout", None)
    ws.write_mcp_json(doc)


def test_claude_tool_timeout_cancel_starts_no_further_model_call(
    ws: Workspace, model: FakeModel
) -> None:
    """(e) The server's "timeout": 4000 on a scan of 5 comments whose calls take 1.5 s each: Claude Code
    gives up, sends notifications/cancelled, and from then on the server starts no model call (the
    session lives on for 6 s more)."""
    export = write_export(ws.root / "export.json", ["c1", "c2", "c3", "c4", "c5"])
    with slow_provider(1.5) as provider:
        _timed_server(ws, provider_env(provider), 4000)
        model.script = [
            Call("scan", {"limit": 5, "source": str(export)}),
            Final("gave up", pause_s=6),
        ]
        session = ws.claude(model.base_url, "scan")
        assert session.code == 0, session.why()
        wire = wait_exit(ws.wire)
        assert model.result(0).is_error is True, model.result(0).text[
            :300
        ]  # the model is told it failed
        cancel = cancelled_at(wire)
        assert cancel is not None, f"Claude Code sent no notifications/cancelled: {methods(wire)}"
        late = [round(t - cancel, 2) for t in provider.started if t > cancel + 0.2]
        assert not late, (
            f"{len(provider.started)} model calls; started after the cancel (s): {late}"
        )


def test_claude_mcp_tool_timeout_sets_the_timeout_of_servers_without_their_own(
    ws: Workspace, model: FakeModel
) -> None:
    """MCP_TOOL_TIMEOUT=2000 and no "timeout" on the server: a scan whose first call takes 6 s comes back
    to the model as a failed call after about 2 s, and the server is sent notifications/cancelled."""
    export = write_export(ws.root / "export.json", ["t1"])
    with slow_provider(6.0) as provider:
        _timed_server(ws, provider_env(provider), 0)
        model.script = [Call("scan", {"limit": 1, "source": str(export)}), Final("gave up")]
        session = ws.claude(model.base_url, "scan", extra={"MCP_TOOL_TIMEOUT": "2000"})
        assert session.code == 0, session.why()
        called = next(t.at for t in model.main_turns() if t.step == 0)
        assert model.result(0).is_error is True and model.result(0).at - called < 5.0, model.result(
            0
        ).text[:300]
        assert cancelled_at(wait_exit(ws.wire)) is not None


def test_claude_p_end_leaves_no_attempt_reserved(ws: Workspace, model: FakeModel) -> None:
    """(f) claude -p ends (SIGINT, then SIGTERM) while a model call is in flight: once the server has
    exited, no attempt in the inbox files is left reserved (outcome null)."""
    export = write_export(ws.root / "export.json", ["d1", "d2", "d3"])
    with slow_provider(15.0) as provider:
        _timed_server(ws, provider_env(provider), 5000)
        model.script = [Call("scan", {"limit": 3, "source": str(export)}), Final("stop")]
        session = ws.claude(model.base_url, "scan")
        assert session.code == 0, session.why()
        wire = wait_exit(ws.wire)  # the server is gone: its writes are all on disk
        assert provider.started, "no model call was in flight"
        # Claude Code sends SIGINT, then SIGTERM 100 ms later; a server that closed its calls and
        # left within those 100 ms never sees the SIGTERM.
        assert wire_events(wire)[:2] in (["SIGINT", "SIGTERM"], ["SIGINT", "exit"]), wire_events(
            wire
        )
        assert reserved(ws.inbox_records()) == [], (
            f"left reserved after the session: {reserved(ws.inbox_records())}"
        )
