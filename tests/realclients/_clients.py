"""The real Codex CLI and Claude Code, installed from npm and run offline against a fake model.

:func:`ensure_clients` installs both into a cache directory once (``npm install --prefix DIR``);
:class:`Workspace` is one test's temporary world — the client's home, a project directory, a
watcher data dir, and a ``watcher-bridge`` that the configs name (a wire tap in front of the
real one, :mod:`_tap`). :meth:`Workspace.codex` and :meth:`Workspace.claude` run one
non-interactive session (``codex exec`` / ``claude -p``) and return what it printed.

The clients see only loopback: the model is :mod:`_fake_models` on 127.0.0.1, and every
variable that would reach a real service or a real key is left out of their environment.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _docs import block, insert_under_args, server_of
from _proc import write_export
from _tap import read_log
from filelock import FileLock

# The versions docs/agents.md was checked against; WATCHER_REALCLIENTS_PACKAGES overrides
# (e.g. "@openai/codex@latest @anthropic-ai/claude-code@latest") to try newer ones.
PACKAGES = ("@openai/codex@0.171.0", "@anthropic-ai/claude-code@2.1.197")
CACHE = Path(os.environ.get("WATCHER_REALCLIENTS_DIR") or Path.home() / ".cache/devto-watcher/realclients")
VENV_BIN = Path(sys.executable).parent
HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
# The placeholders docs/agents.md writes; the lane puts this workspace's paths in their place.
DOC_BRIDGE = "/path/to/devto-watcher/.venv/bin/watcher-bridge"
DOC_DATA = "/path/to/devto-watcher/data"
DOC_USER = "your_name"
# Dummy keys: the clients want one; nothing but the loopback fake ever sees it.
CLAUDE_KEY = "sk-ant-lane-dummy"
LANE_OPENAI_KEY = "sk-lane-openai-dummy"
TIMEOUT_S = 120


@dataclass(frozen=True)
class Clients:
    codex: tuple[str, ...]
    claude: tuple[str, ...]
    versions: dict[str, str]
    bin_dir: Path


def _packages() -> tuple[str, ...]:
    override = os.environ.get("WATCHER_REALCLIENTS_PACKAGES", "").split()
    return tuple(override) or PACKAGES


def _installed_version(package: str) -> str | None:
    name = package.rsplit("@", 1)[0] if package.count("@") > 1 else package
    try:
        return str(json.loads((CACHE / "node_modules" / name / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def ensure_clients() -> Clients:
    """Both clients, installed into :data:`CACHE` if missing (under a lock: xdist workers share it)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / ".install.lock"), timeout=600):
        wanted = _packages()
        stale = [p for p in wanted if p.count("@") > 1 and not p.endswith("@latest")
                 and _installed_version(p) != p.rsplit("@", 1)[1]]
        if stale or not (CACHE / "node_modules/.bin/codex").exists() or not (CACHE / "node_modules/.bin/claude").exists():
            npm = shutil.which("npm")
            assert npm, "the real-clients lane needs npm (node 18+) on PATH"
            subprocess.run([npm, "install", "--no-fund", "--no-audit", "--prefix", str(CACHE), *wanted],
                           check=True, stdout=sys.stderr, stderr=sys.stderr, timeout=900)
    bin_dir = CACHE / "node_modules/.bin"
    codex = (str(bin_dir / "codex"),)
    claude: tuple[str, ...] = (str(bin_dir / "claude"),)
    # Claude Code's postinstall copies the native binary over a placeholder; where npm did not run
    # it (allowScripts), its own wrapper finds the binary instead.
    if _version(claude) is None:
        claude = (shutil.which("node") or "node", str(CACHE / "node_modules/@anthropic-ai/claude-code/cli-wrapper.cjs"))
    versions = {"codex": _version(codex) or "?", "claude": _version(claude) or "?"}
    return Clients(codex, claude, versions, bin_dir)


def _version(argv: tuple[str, ...]) -> str | None:
    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60, check=False)
    except OSError:
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@dataclass
class Session:
    """One finished client session."""

    argv: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float
    ended_at: float  # time.time()

    def json_out(self) -> dict[str, Any]:
        """Claude Code's ``--output-format json`` document."""
        return dict(json.loads(self.stdout))

    def why(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout[-3000:]}\n--- stderr\n{self.stderr[-3000:]}"


@dataclass
class Workspace:
    clients: Clients
    root: Path
    tap: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for d in (self.home, self.project, self.data, self.bin, self.codex_home):
            d.mkdir(parents=True, exist_ok=True)
        bridge = self.bin / "watcher-bridge"
        real = VENV_BIN / "watcher-bridge"
        if self.tap:
            bridge.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "_tap.py"}" "{self.taplog}" -- "{real}" "$@"\n')
        else:
            bridge.write_text(f'#!/bin/sh\nexec "{real}" "$@"\n')
        bridge.chmod(0o755)

    # ---- places ---------------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def bin(self) -> Path:
        return self.root / "install" / ".venv" / "bin"

    @property
    def taplog(self) -> Path:
        return self.root / "tap.jsonl"

    def wire(self) -> list[dict[str, Any]]:
        return read_log(self.taplog)

    def placed(self, text: str) -> str:
        """A doc snippet with this workspace's paths in place of the doc's placeholders."""
        return (text.replace(DOC_BRIDGE, str(self.bin / "watcher-bridge")).replace(DOC_DATA, str(self.data))
                .replace(DOC_USER, "maya_writes"))

    # ---- watcher itself -------------------------------------------------------------------------
    def seed(self, labels: list[str]) -> dict[str, Any]:
        """Record comments with provider agent (no model call), as `watcher scan --source FILE`."""
        export = write_export(self.root / "export.json", labels)
        done = subprocess.run([str(VENV_BIN / "watcher"), "scan", "--source", str(export), "--json"],
                              env=self._watcher_env({"WATCHER_PROVIDER": "agent"}), capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    def inbox_records(self) -> dict[str, dict[str, Any]]:
        return {p.stem: json.loads(p.read_text()) for p in sorted((self.data / "inbox").glob("*.json"))}

    def _watcher_env(self, extra: Mapping[str, str]) -> dict[str, str]:
        env = _clean_env()
        env.update({"WATCHER_DATA_DIR": str(self.data), "NO_COLOR": "1", **extra})
        return env

    # ---- the clients ----------------------------------------------------------------------------
    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = _clean_env()
        env.update({"HOME": str(self.home), "CODEX_HOME": str(self.codex_home), "NO_COLOR": "1",
                    "PATH": os.pathsep.join([str(self.clients.bin_dir), env.get("PATH", "")])})
        env.update(self.extra_env)
        env.update(extra or {})
        return env

    def run(self, argv: list[str], *, extra: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout: float = TIMEOUT_S) -> Session:
        began = time.monotonic()
        done = subprocess.run(argv, cwd=cwd or self.project, env=self.env(extra), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        return Session(argv, done.returncode, done.stdout, done.stderr, time.monotonic() - began, time.time())

    def write_codex_config(self, model_url: str, snippet: str) -> Path:
        """``$CODEX_HOME/config.toml``: the lane's fake provider, then the doc's snippet as written."""
        preamble = (f'model = "fake-model"\nmodel_provider = "lane"\n\n[model_providers.lane]\nname = "lane fake"\n'
                    f'base_url = "{model_url}/v1"\nwire_api = "responses"\n\n')
        path = self.codex_home / "config.toml"
        path.write_text(preamble + self.placed(snippet).strip() + "\n")
        return path

    def bash(self, command: str, *, extra: Mapping[str, str] | None = None) -> Session:
        """A documented shell command, as written (placeholders put in place), in the project."""
        return self.run(["bash", "-c", self.placed(command)], extra=extra)

    def codex_block(self, model_url: str, name: str) -> str:
        """Configure Codex from docs/agents.md's block ``name``; the server name it configures."""
        doc = block(name)
        if doc.kind == "codex-config":
            self.write_codex_config(model_url, doc.text)
            return server_of(doc.text)
        if doc.kind == "codex-add":
            self.write_codex_config(model_url, "")
            added = self.bash(doc.text.strip())
            assert added.code == 0, added.why()
            return server_of(doc.text)
        assert doc.kind == "codex-extra" and doc.on, doc
        server = self.codex_block(model_url, doc.on)
        path = self.codex_home / "config.toml"
        path.write_text(insert_under_args(path.read_text(), server, self.placed(doc.text)))
        return server

    def codex_get(self, server: str) -> dict[str, Any]:
        """``codex mcp get SERVER --json``: the server as Codex parsed it."""
        done = self.run([*self.clients.codex, "mcp", "get", server, "--json"])
        assert done.code == 0, done.why()
        return dict(json.loads(done.stdout))

    def claude_block(self, name: str, *, settings: str | None = "claude-allow") -> str:
        """Configure the project from docs/agents.md's block ``name`` (and the documented settings,
        with the server's name in place of ``watcher``); the server name it configures."""
        doc = block(name)
        if doc.kind == "claude-mcp-json":
            (self.project / ".mcp.json").write_text(self.placed(doc.text))
        else:
            assert doc.kind == "claude-add", doc
            added = self.bash(doc.text.strip())
            assert added.code == 0, added.why()
        server = next(iter(json.loads((self.project / ".mcp.json").read_text())["mcpServers"]))
        if settings:
            text = block(settings).text.replace('"watcher"', f'"{server}"').replace("mcp__watcher", f"mcp__{server}")
            (self.project / ".claude").mkdir(exist_ok=True)
            (self.project / ".claude" / "settings.local.json").write_text(text)
            self.trust_project()
        return server

    def trust_project(self) -> None:
        """What accepting Claude Code's trust dialog in the project once records (a project's own
        settings, permission rules included, are ignored until then)."""
        path = self.home / ".claude.json"
        doc = json.loads(path.read_text()) if path.exists() else {}
        doc.setdefault("projects", {}).setdefault(str(self.project), {})["hasTrustDialogAccepted"] = True
        path.write_text(json.dumps(doc))

    def mcp_json(self) -> dict[str, Any]:
        return dict(json.loads((self.project / ".mcp.json").read_text()))

    def write_mcp_json(self, doc: dict[str, Any]) -> None:
        (self.project / ".mcp.json").write_text(json.dumps(doc, indent=2))

    def codex(self, prompt: str, *, strict: bool = True, extra_args: list[str] | None = None,
              extra: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S) -> Session:
        argv = [*self.clients.codex, "exec", *(["--strict-config"] if strict else []), "--skip-git-repo-check",
                "--ephemeral", *(extra_args or []), prompt]
        return self.run(argv, extra=extra, timeout=timeout)

    def claude_env(self, model_url: str) -> dict[str, str]:
        # MCP_CONNECT_TIMEOUT_MS: Claude Code waits at most 5 s for a server it waits for at all;
        # on this shared 2-core machine three lanes' servers can take longer to start.
        return {"ANTHROPIC_BASE_URL": model_url, "ANTHROPIC_API_KEY": CLAUDE_KEY,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "MCP_CONNECT_TIMEOUT_MS": "20000"}

    def claude(self, model_url: str, prompt: str, *, args: list[str] | None = None,
               extra: Mapping[str, str] | None = None, timeout: float = TIMEOUT_S) -> Session:
        argv = [*self.clients.claude, "-p", prompt, "--output-format", "json", *(args or [])]
        return self.run(argv, extra={**self.claude_env(model_url), **(extra or {})}, timeout=timeout)


def _clean_env() -> dict[str, str]:
    """The test process's environment without anything that names a real service or key."""
    drop_prefixes = ("WATCHER_", "DEVTO_", "OPENAI_", "ANTHROPIC_", "CLAUDE_", "CODEX_", "MCP_", "PYTEST_", "COV_")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(drop_prefixes)
            and "KEY" not in k.upper() and "TOKEN" not in k.upper() and "SECRET" not in k.upper()
            and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    return keep
