"""Codex CLI (``codex exec``) driving ``watcher-bridge mcp`` as docs/agents.md configures it.

Each test writes ``$CODEX_HOME/config.toml``: the lane's fake model as a custom provider
(``wire_api = "responses"``), then a block of docs/agents.md as written. ``--strict-config``
(which ``codex exec`` 0.171.0 has) makes any field Codex does not know an error.
"""

from __future__ import annotations

import json

import pytest
from _clients import DOC_BRIDGE, LANE_OPENAI_KEY, Workspace
from _docs import block, loaded
from _fake_models import Call, FakeModel, Final
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

from bridge.mcp_text import INSTRUCTIONS
from watcher.commands.registry import COMMANDS

# About as many variables as Codex 0.171.0 gives a stdio MCP server besides its env (the tap saw
# PATH, HOME, the locale, the shell, TMPDIR and the CA bundle paths).
BASIC_ENV = {
    "HOME",
    "LANG",
    "LC_ALL",
    "LOGNAME",
    "PATH",
    "PWD",
    "SHELL",
    "TERM",
    "TMPDIR",
    "USER",
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "PIP_CERT",
    "TZ",
    "XDG_RUNTIME_DIR",
}
# The tools the server lists: the registry's commands with a listed MCP entry (watcher/commands/registry.py).
TOOLS = {c.name for c in COMMANDS if c.mcp is not None and c.mcp.listed}
TRUSTED = '[projects."{project}"]\ntrust_level = "trusted"\n'
CODEX_BLOCKS = sorted(loaded("codex-config") | loaded("codex-add") | loaded("codex-extra"))


def _envelope(text: str) -> dict[str, object]:
    """Codex hands the model ``Wall time: … seconds`` / ``Output:`` and the envelope."""
    assert text.startswith("Wall time: ") and "\nOutput:\n" in text, text[:300]
    doc = json.loads(text.split("\nOutput:\n", 1)[1])
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("name", CODEX_BLOCKS)
def test_every_documented_codex_config_loads_strictly_and_serves_status(
    ws: Workspace, model: FakeModel, name: str
) -> None:
    """(a)+(b) Each Codex block of docs/agents.md loads under --strict-config; where it says
    required = true the server's tools are in the first model request and a status call's envelope
    comes back; where env_vars names WATCHER_API_KEY, status says the key came from it."""
    server = ws.codex_block(model.base_url, name)
    config = (ws.codex_home / "config.toml").read_text()
    model.server_name = server
    model.script = [Call(f"{server}.status"), Final()]
    session = ws.codex("What is the watcher status?", extra={"WATCHER_API_KEY": LANE_OPENAI_KEY})
    assert session.code == 0, session.why()
    got = ws.codex_get(server)
    assert got["enabled"] is True and got["transport"]["command"].endswith("/watcher-bridge")
    if "required = true" not in config:
        return  # `codex mcp add` alone: loads; the lines the doc adds next make it wait (codex-watcher-add-lines)
    assert set(model.watcher_tools(model.first_turn())) == TOOLS
    status = _envelope(model.result(0).text)
    assert status["exit_code"] == 0 and status["command"] == "status"
    settings = status["result"]["settings"]  # type: ignore[index]
    if "WATCHER_API_KEY" in " ".join(got["transport"].get("env_vars") or []):
        # env_vars passed the key on from Codex's own environment; status names it, never shows it.
        assert (settings["api_key_set"], settings["api_key_from"]) == (True, "WATCHER_API_KEY"), (
            settings
        )
    assert LANE_OPENAI_KEY not in model.result(0).text


def test_codex_lists_the_ten_tools_in_one_namespace_and_passes_results_back(
    ws: Workspace, model: FakeModel
) -> None:
    """(b) The twelve tools reach the model as namespace mcp__watcher, with input schemas and no output
    schema; status and inbox go through and their envelopes come back as compact JSON."""
    ws.seed(["aaa1", "bbb2"])
    ws.codex_block(model.base_url, "codex-watcher")
    model.script = [Call("status"), Call("inbox"), Call("show", {"id": "zzzz"}), Final()]
    session = ws.codex("What needs a reply?")
    assert session.code == 0, session.why()
    tools = model.watcher_tools(model.first_turn())
    assert set(tools) == TOOLS
    assert all(
        set(t) == {"type", "name", "description", "strict", "parameters"} for t in tools.values()
    ), tools
    limit = tools["scan"]["parameters"]["properties"]["limit"]
    assert (
        "maximum" not in limit and "minimum" not in limit
    )  # Codex drops them from the schema it sends
    assert "pattern" not in tools["show"]["parameters"]["properties"]["id"]
    status, inbox = _envelope(model.result(0).text), _envelope(model.result(1).text)
    assert status["result"]["states"]["pending"] == 2  # type: ignore[index]
    assert inbox["command"] == "inbox" and inbox["exit_code"] == 0
    assert (
        ", " not in model.result(1).text.split("\nOutput:\n", 1)[1][:40]
    )  # compact: the structuredContent
    unknown = model.result(2).text  # a tool error: same shape, exit_code 2 in the envelope
    assert _envelope(unknown)["exit_code"] == 2, unknown
    calls = [
        r["msg"]["params"]
        for r in wait_exit(ws.wire)
        if isinstance(r.get("msg"), dict) and r["msg"].get("method") == "tools/call"
    ]
    assert len(calls) == 3 and all(
        "progressToken" in c["_meta"] for c in calls
    )  # Codex asks for progress


def test_codex_gives_the_instructions_whole_as_the_namespace_description(
    ws: Workspace, model: FakeModel
) -> None:
    """(c) The server's instructions are the mcp__watcher namespace's description, character for character."""
    ws.codex_block(model.base_url, "codex-watcher")
    session = ws.codex("hello")
    assert session.code == 0, session.why()
    namespace = model.namespace(model.first_turn())
    assert namespace is not None and namespace["description"] == INSTRUCTIONS


def test_codex_agent_mode_claim_then_submit_leaves_the_verdict_on_disk(
    ws: Workspace, model: FakeModel
) -> None:
    """(d) The agent-mode block: namespace mcp__devto_watcher; claim and submit run without approval
    in codex exec; the inbox file holds the verdict, its attempt by provider agent."""
    ws.seed(["aaa1", "bbb2"])
    server = ws.codex_block(model.base_url, "codex-agent")
    model.server_name = server
    model.script = agent_script(server)
    session = ws.codex("Judge the comments waiting for you.")
    assert session.code == 0, session.why()
    assert model.namespace(model.first_turn())["name"] == "mcp__devto_watcher"  # type: ignore[index]
    assert _envelope(model.result(0).text)["result"]["settings"]["provider"] == "agent"  # type: ignore[index]
    submitted = _envelope(model.result(2).text)
    assert (submitted["exit_code"], submitted["result"]["outcome"]) == (0, "verdict"), submitted  # type: ignore[index]
    assert_agent_verdict_on_disk(ws.inbox_records(), model.result(1))


def test_lines_appended_after_codex_mcp_add_land_in_the_env_table(
    ws: Workspace, model: FakeModel
) -> None:
    """codex mcp add writes [mcp_servers.watcher.env] last: env_vars appended at the end is read as an
    env entry and Codex refuses the whole config; under args = it loads (the documented place)."""
    ws.codex_block(model.base_url, "codex-watcher-add")
    path = ws.codex_home / "config.toml"
    written = path.read_text()
    assert written.rstrip().splitlines()[-3] == "[mcp_servers.watcher.env]", written
    path.write_text(written + block("codex-watcher-add-lines").text)
    refused = ws.run([*ws.clients.codex, "mcp", "get", "watcher", "--json"])
    assert refused.code != 0
    assert "invalid type: sequence, expected a string" in refused.stderr
    assert "mcp_servers.watcher.env.env_vars" in refused.stderr
    ws.codex_block(model.base_url, "codex-watcher-add-lines")
    assert ws.codex_get("watcher")["transport"]["env_vars"] == [
        "WATCHER_API_KEY",
        "DEVTO_USERNAME",
        "DEVTO_API_KEY",
    ]


def test_codex_passes_no_key_without_env_vars(ws: Workspace, model: FakeModel) -> None:
    """Without env_vars the server sees neither WATCHER_API_KEY nor OPENAI_API_KEY from Codex's environment."""
    text = "\n".join(
        line for line in block("codex-watcher").text.splitlines() if not line.startswith("env_vars")
    )
    ws.write_codex_config(model.base_url, text)
    model.script = [Call("status"), Final()]
    session = ws.codex(
        "status?", extra={"WATCHER_API_KEY": LANE_OPENAI_KEY, "OPENAI_API_KEY": LANE_OPENAI_KEY}
    )
    assert session.code == 0, session.why()
    assert _envelope(model.result(0).text)["result"]["settings"]["api_key_set"] is False  # type: ignore[index]
    given = set(next(r["env"] for r in ws.wire() if r.get("event") == "start"))
    assert {"PATH", "HOME"} <= given and not {"WATCHER_API_KEY", "OPENAI_API_KEY"} & given, sorted(
        given
    )
    # Only basic variables besides the block's env: no *KEY*, *TOKEN*, *SECRET* of Codex's own.
    assert not [v for v in given if any(w in v for w in ("KEY", "TOKEN", "SECRET"))], sorted(given)
    assert len(given - {"WATCHER_DATA_DIR", "WATCHER_PROVIDER"}) <= len(BASIC_ENV), sorted(given)


def test_codex_exec_declines_what_needs_approval_and_runs_what_is_approved(
    ws: Workspace, model: FakeModel
) -> None:
    """Default auto: scan (open-world) is declined in codex exec, mark runs. The approvals block:
    scan approved runs, mark set to prompt is declined (exec cannot ask)."""
    ws.seed(["aaa1"])
    export = ws.root / "export.json"
    scan = Call("scan", {"dry_run": True, "source": str(export)})
    mark = Call("mark", {"id": "aaa1", "triage": "ignored"})
    declined = "MCP tool call requires approval, but approval policy is never"
    ws.codex_block(model.base_url, "codex-watcher")
    model.script = [scan, mark, Final()]
    assert ws.codex("scan, then mark").code == 0
    assert declined in model.result(0).text and _envelope(model.result(1).text)["exit_code"] == 0
    model.results.clear()
    ws.codex_block(model.base_url, "codex-approvals")
    assert ws.codex("scan, then mark").code == 0
    assert _envelope(model.result(0).text)["command"] == "scan" and declined in model.result(1).text
    # A tool's approval_mode wins over the server's default, whichever way.
    config = ws.codex_home / "config.toml"
    config.write_text(
        config.read_text().replace(
            'default_tools_approval_mode = "auto"', 'default_tools_approval_mode = "approve"'
        )
    )
    model.results.clear()
    assert ws.codex("scan, then mark").code == 0
    assert _envelope(model.result(0).text)["command"] == "scan" and declined in model.result(1).text


def test_codex_starts_its_first_turn_before_a_slow_server_unless_required(
    ws: Workspace, model: FakeModel
) -> None:
    """A server 3 s slow to start is missing from the first request; with required = true it is
    there; a required server that cannot start makes codex exec fail."""
    slow = {"TAP_DELAY_S": "3"}
    text = block("codex-watcher").text
    ws.write_codex_config(model.base_url, text.replace("required = true\n", ""))
    assert ws.codex("hello", extra=slow).code == 0
    assert model.watcher_tools(model.first_turn()) == {}
    model.turns.clear()
    ws.write_codex_config(model.base_url, text)
    assert ws.codex("hello", extra=slow).code == 0
    assert set(model.watcher_tools(model.first_turn())) == TOOLS
    ws.write_codex_config(model.base_url, text.replace(DOC_BRIDGE, "/nonexistent/watcher-bridge"))
    failed = ws.codex("hello")
    assert failed.code != 0, failed.why()


def test_codex_never_asks_for_prompts_and_its_model_reads_the_resources(
    ws: Workspace, model: FakeModel
) -> None:
    """No prompts/list on the wire; read_mcp_resource reads watcher://inbox and watcher://comment/ID."""
    ws.seed(["aaa1"])
    ws.codex_block(model.base_url, "codex-watcher")
    model.script = [
        Call("read_mcp_resource", {"server": "watcher", "uri": "watcher://inbox"}),
        Call("read_mcp_resource", {"server": "watcher", "uri": "watcher://comment/aaa1"}),
        Final(),
    ]
    assert ws.codex("read the inbox").code == 0
    wire = wait_exit(ws.wire)
    assert "prompts/list" not in methods(wire) and "prompts/get" not in methods(wire)
    inbox, comment = json.loads(model.result(0).text), json.loads(model.result(1).text)
    assert inbox["contents"][0]["uri"] == "watcher://inbox" and "unresolved" in json.loads(
        inbox["contents"][0]["text"]
    )
    assert json.loads(comment["contents"][0]["text"])["comment"]["id"] == "aaa1"


def test_codex_tool_timeout_cancel_starts_no_further_model_call(
    ws: Workspace, model: FakeModel
) -> None:
    """(e) tool_timeout_sec 4 on a scan of 5 comments whose calls take 1.5 s each: Codex gives up,
    sends notifications/cancelled, and from then on the server starts no model call (the session
    lives on for 6 s more)."""
    export = ws.root / "export.json"
    write_export(export, ["c1", "c2", "c3", "c4", "c5"])
    with slow_provider(1.5) as provider:
        env = ", ".join(
            f'{k} = "{v}"'
            for k, v in {**provider_env(provider), "WATCHER_DATA_DIR": str(ws.data)}.items()
        )
        ws.write_codex_config(
            model.base_url,
            f"""
[mcp_servers.watcher]
command = "{ws.bin / "watcher-bridge"}"
args = ["mcp"]
tool_timeout_sec = 4
required = true
env = {{ {env} }}

[mcp_servers.watcher.tools.scan]
approval_mode = "approve"
""",
        )
        model.script = [
            Call("scan", {"limit": 5, "source": str(export)}),
            Final("gave up", pause_s=6),
        ]
        session = ws.codex("scan")
        assert session.code == 0, session.why()
        wire = wait_exit(ws.wire)
        assert (
            "timed out awaiting tools/call after 4s" in model.result(0).text
        )  # the model is told it failed
        cancel = cancelled_at(wire)
        assert cancel is not None, f"Codex sent no notifications/cancelled: {methods(wire)}"
        late = [round(t - cancel, 2) for t in provider.started if t > cancel + 0.2]
        assert not late, (
            f"{len(provider.started)} model calls; started after the cancel (s): {late}"
        )


def test_codex_exec_end_kills_the_server_and_the_next_run_closes_its_call(
    ws: Workspace, model: FakeModel
) -> None:
    """(f) codex exec ends while a model call is in flight: it sends the server's process group
    SIGTERM and closes stdin (in either order), then SIGKILLs the server about 20 ms later, before
    it can close the call (0.165.0 and 0.171.0). The attempt stays reserved, counted, until the
    next run that takes the lock closes it as interrupted."""
    export = ws.root / "export.json"
    write_export(export, ["d1", "d2", "d3"])
    with slow_provider(15.0) as provider:
        env = ", ".join(
            f'{k} = "{v}"'
            for k, v in {**provider_env(provider), "WATCHER_DATA_DIR": str(ws.data)}.items()
        )
        ws.write_codex_config(
            model.base_url,
            f"""
[mcp_servers.watcher]
command = "{ws.bin / "watcher-bridge"}"
args = ["mcp"]
tool_timeout_sec = 5
required = true
env = {{ {env} }}

[mcp_servers.watcher.tools.scan]
approval_mode = "approve"
""",
        )
        model.script = [Call("scan", {"limit": 3, "source": str(export)}), Final("stop")]
        session = ws.codex("scan")
        assert session.code == 0, session.why()
        wire = wait_exit(ws.wire)  # the server is gone: its writes are all on disk
        assert provider.started, "no model call was in flight"
        # The SIGKILL can come before the tap has logged the SIGTERM: what it saw is one or both.
        seen = wire_events(wire)
        assert seen[-1] == "exit" and set(seen[:-1]) in (
            {"SIGTERM"},
            {"stdin_closed"},
            {"SIGTERM", "stdin_closed"},
        ), seen
        ended = next(r for r in wire if r.get("event") == "exit")
        assert ended.get("killed") is True, f"the server left by itself, not killed: {ended}"
    ws.seed(["d1", "d2", "d3"])  # the next run: `watcher scan`, which takes the lock
    records = ws.inbox_records()
    assert reserved(records) == [], f"left reserved after the next run: {reserved(records)}"
    closed = [
        a
        for r in records.values()
        for a in r["attempts"]
        if (a.get("error") or {}).get("kind") == "interrupted"
    ]
    assert len(closed) == len(provider.started), records


def test_codex_reads_a_projects_config_only_once_the_project_is_trusted(
    ws: Workspace, model: FakeModel
) -> None:
    """The documented block as <project>/.codex/config.toml: ignored in an untrusted project, used once
    it is trusted: `codex exec --trust` (0.171.0) records that as accepting the trust prompt does."""
    ws.write_codex_config(model.base_url, "")
    (ws.project / ".codex").mkdir()
    (ws.project / ".codex" / "config.toml").write_text(ws.placed(block("codex-watcher").text))
    assert ws.codex("hello").code == 0
    assert model.watcher_tools(model.first_turn()) == {}
    model.turns.clear()
    config = ws.codex_home / "config.toml"
    if ws.clients.at_least("codex", "0.171.0"):
        assert ws.codex("hello", extra_args=["--trust"]).code == 0
        assert TRUSTED.format(project=ws.project) in config.read_text()  # what --trust records
    else:  # 0.165.0 has no --trust: what accepting its trust prompt records
        config.write_text(config.read_text() + "\n" + TRUSTED.format(project=ws.project))
        assert ws.codex("hello").code == 0
    assert set(model.watcher_tools(model.first_turn())) == TOOLS


def test_codex_shell_commands_get_the_keys_but_no_network(ws: Workspace, model: FakeModel) -> None:
    """codex exec's own shell tool (exec_command): the command sees Codex's whole environment, *KEY*,
    *TOKEN* and *SECRET* variables included, but cannot open a socket, not even to 127.0.0.1."""
    ws.codex_block(model.base_url, "codex-watcher")
    port = model.server.server_address[1]  # type: ignore[union-attr]
    connect = (
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('CONNECTED')"
    )
    model.script = [
        Call("exec_command", {"cmd": "env | cut -d= -f1 | sort | tr '\\n' ' '"}),
        Call("exec_command", {"cmd": f'python3 -c "{connect}"'}),
        Final(),
    ]
    session = ws.codex(
        "look around",
        extra={"OPENAI_API_KEY": LANE_OPENAI_KEY, "LANE_TOKEN": "t", "LANE_SECRET": "s"},
    )
    assert session.code == 0, session.why()
    names = model.result(0).text.split("Output:", 1)[1].split()
    assert {"OPENAI_API_KEY", "LANE_TOKEN", "LANE_SECRET"} <= set(names), names
    assert (
        "CONNECTED" not in model.result(1).text
        and "Operation not permitted" in model.result(1).text
    )
