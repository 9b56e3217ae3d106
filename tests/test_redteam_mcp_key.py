"""SPEC §15.3: the MCP server's environment is its client's, so a provider's own key variable found
there (Claude Code hands over its own ANTHROPIC_API_KEY) is not spent until the user says so with
WATCHER_API_KEY, or names the variable to spend with ``api_key_env`` (config.toml, or
WATCHER_API_KEY_ENV); status and check say why, and where the key came from. A terminal's
``watcher`` still uses the variable."""

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


def test_api_key_env_in_the_config_file_lets_the_mcp_server_spend_that_variable(data_dir: Path) -> None:
    """`api_key_env = "ANTHROPIC_API_KEY"` in config.toml: the server spends it, and says from where."""
    (data_dir / "config.toml").write_text('api_key_env = "ANTHROPIC_API_KEY"\n')

    async def scenario(session: ClientSession) -> None:
        settings = doc(await session.call_tool("status", {}))["result"]["settings"]
        assert settings["api_key_set"] is True
        assert settings["api_key_from"] == f"ANTHROPIC_API_KEY (named by api_key_env in {data_dir / 'config.toml'})"
        checks = {c["name"]: c for c in doc(await session.call_tool("check", {}))["result"]["checks"]}
        assert checks["api_key"]["ok"] is True and "ANTHROPIC_API_KEY (named by" in checks["api_key"]["detail"]
        assert CLIENTS_KEY["ANTHROPIC_API_KEY"] not in json.dumps(settings) + json.dumps(checks)

    run_session(data_dir, scenario, env=CLIENTS_KEY)


def test_api_key_env_naming_an_unset_variable_is_no_key_and_says_which(data_dir: Path) -> None:
    """WATCHER_API_KEY_ENV=MY_KEY with MY_KEY unset: no fallback to ANTHROPIC_API_KEY; exit 2 names MY_KEY."""
    env = {**CLIENTS_KEY, "WATCHER_API_KEY_ENV": "MY_KEY"}
    status = json.loads(run("cli", "status", "--json", data_dir=data_dir, env=env).stdout)["result"]["settings"]
    assert (status["api_key_set"], status["api_key_from"]) == (False, "MY_KEY (named by WATCHER_API_KEY_ENV): not set")
    scan = run("cli", "scan", "--source", "none.json", "--json", data_dir=data_dir, env=env)
    assert scan.returncode == 2 and "MY_KEY (named by WATCHER_API_KEY_ENV) is not set" in scan.stdout


def test_api_key_env_must_name_a_variable_and_not_another_secret(data_dir: Path) -> None:
    """A name no shell exports, or DEVTO_API_KEY (the dev.to key), is a config error (exit 2)."""
    for name, said in (("OPENAI API KEY", "must be the name of an environment variable"),
                       ("DEVTO_API_KEY", "a watcher setting that is not the model's key")):
        (data_dir / "config.toml").write_text(f'api_key_env = "{name}"\n')
        proc = run("cli", "status", "--json", data_dir=data_dir, env=CLIENTS_KEY)
        assert proc.returncode == 2 and said in proc.stdout, proc.stdout
