"""SPEC §15.3: the MCP server's environment is its client's, so a provider's own key variable found
there (Claude Code hands over its own ANTHROPIC_API_KEY) is not spent until the user says so with
WATCHER_API_KEY; status and check say why. A terminal's ``watcher`` still uses the variable."""

from __future__ import annotations

import json
from pathlib import Path

from _proc import run
from mcp import ClientSession
from test_mcp_server import doc, run_session

CLIENTS_KEY = {"WATCHER_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-the-clients-own"}


def test_the_mcp_server_withholds_an_inherited_provider_key_and_says_so(data_dir: Path, tmp_path: Path) -> None:
    """Only ANTHROPIC_API_KEY in the server's env: status shows no key and why, check fails on
    it naming WATCHER_API_KEY, and scan stops with exit_code 2 before any work."""
    export = tmp_path / "export.json"
    export.write_text("[]")

    async def scenario(session: ClientSession) -> None:
        settings = doc(await session.call_tool("status", {}))["result"]["settings"]
        assert settings["api_key_set"] is False
        assert settings["api_key_from"].startswith("ANTHROPIC_API_KEY (withheld")
        checks = {c["name"]: c for c in doc(await session.call_tool("check", {}))["result"]["checks"]}
        assert checks["api_key"]["ok"] is False and "WATCHER_API_KEY" in checks["api_key"]["detail"]
        scan = doc(await session.call_tool("scan", {"source": str(export)}))
        assert scan["exit_code"] == 2 and "WATCHER_API_KEY" in scan["error"]["message"]

    run_session(data_dir, scenario, env=CLIENTS_KEY)


def test_watcher_api_key_lets_the_mcp_server_spend_the_key(data_dir: Path) -> None:
    """With WATCHER_API_KEY set as well, the server uses it."""
    async def scenario(session: ClientSession) -> None:
        settings = doc(await session.call_tool("status", {}))["result"]["settings"]
        assert (settings["api_key_set"], settings["api_key_from"]) == (True, "WATCHER_API_KEY")

    run_session(data_dir, scenario, env={**CLIENTS_KEY, "WATCHER_API_KEY": "sk-ant-for-watcher"})


def test_a_terminals_watcher_still_uses_the_provider_variable(data_dir: Path) -> None:
    """Outside the MCP server, ANTHROPIC_API_KEY is the key, as before."""
    proc = run("cli", "status", "--json", data_dir=data_dir, env=CLIENTS_KEY)
    settings = json.loads(proc.stdout)["result"]["settings"]
    assert (settings["api_key_set"], settings["api_key_from"]) == (True, "ANTHROPIC_API_KEY")
