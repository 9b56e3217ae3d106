"""The real Codex CLI and Claude Code, installed from npm and run offline against a fake model.

:func:`ensure_clients` gives one release of both clients — the pinned older one
(:data:`PINNED`) or the newest npm resolves — each installed once into its own directory under
:data:`CACHE` (``npm install --prefer-online --prefix DIR``); :class:`Workspace` is one test's
temporary world — the client's home, a project directory, a watcher data dir, and a
``watcher-bridge`` that the configs name (a wire tap in front of the real one, :mod:`_tap`).
:meth:`Workspace.codex` and :meth:`Workspace.claude` run one non-interactive session
(``codex exec`` / ``claude -p``) and return what it printed.

The clients see only loopback: the model is :mod:`_fake_models` on 127.0.0.1, every variable
that would reach a real service or a real key is left out of their environment, and
:mod:`_offline` witnesses that nothing else was tried.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _docs import block, insert_under_args, server_of
from _offline import Offline
from _proc import write_export
from _tap import read_log
from filelock import FileLock

# The lane runs every test against two releases of each client (conftest's ``clients`` fixture):
# the newest that npm resolves today, and this older one, which docs/agents.md was also checked
# against. A release is installed once into CACHE/<client>@<version>, outside the repository.
PINNED = {"codex": "0.165.0", "claude": "2.1.197"}
NPM = {"codex": "@openai/codex", "claude": "@anthropic-ai/claude-code"}
RELEASES = ("pinned", "newest")
CACHE = Path(
    os.environ.get("WATCHER_REALCLIENTS_DIR") or Path.home() / ".cache/devto-watcher/realclients"
)
# The newest versions, resolved once per run (conftest's pytest_configure) and handed to the
# xdist workers through the environment they inherit.
NEWEST_VAR = "WATCHER_REALCLIENTS_NEWEST"
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


def version_tuple(version: str) -> tuple[int, ...]:
    """``"2.1.332 (Claude Code)"`` or ``"codex-cli 0.171.0"`` -> ``(2, 1, 332)`` / ``(0, 171, 0)``."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", version)
    assert found, version
    return tuple(int(part) for part in found.groups())


@dataclass(frozen=True)
class Clients:
    """One release of both clients: ``release`` is "pinned" or "newest"."""

    release: str
    codex: tuple[str, ...]
    claude: tuple[str, ...]
    versions: dict[str, str]  # client -> the version npm installed
    bin_dirs: tuple[Path, ...]  # on PATH, for the documented `codex mcp add`, `claude -p` lines

    def at_least(self, client: str, version: str) -> bool:
        """This release of ``client`` is ``version`` or newer (where a behaviour differs)."""
        return version_tuple(self.versions[client]) >= version_tuple(version)


def resolve_newest() -> dict[str, str]:
    """The newest version of each client on npm (``npm view PACKAGE version --prefer-online``)."""
    if os.environ.get(NEWEST_VAR):
        return dict(json.loads(os.environ[NEWEST_VAR]))
    npm = shutil.which("npm")
    assert npm, "the real-clients lane needs npm (node 18+) on PATH"
    newest = {}
    for client, package in NPM.items():
        done = subprocess.run(
            [npm, "view", package, "version", "--prefer-online"],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        newest[client] = done.stdout.strip()
    os.environ[NEWEST_VAR] = json.dumps(newest)
    return newest


def wanted(release: str) -> dict[str, str]:
    assert release in RELEASES, release
    return dict(PINNED) if release == "pinned" else resolve_newest()


def installed_version(client: str, version: str) -> str | None:
    package = CACHE / f"{client}@{version}" / "node_modules" / NPM[client] / "package.json"
    try:
        return str(json.loads(package.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def _install(client: str, version: str) -> Path:
    """``client`` at ``version`` in its own npm prefix under :data:`CACHE` (under a lock: the xdist
    workers share it); the prefix's ``node_modules/.bin``."""
    prefix = CACHE / f"{client}@{version}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(CACHE / f".{client}@{version}.lock"), timeout=900):
        if (
            installed_version(client, version) != version
            or not (prefix / "node_modules/.bin" / client).exists()
        ):
            npm = shutil.which("npm")
            assert npm, "the real-clients lane needs npm (node 18+) on PATH"
            subprocess.run(
                [
                    npm,
                    "install",
                    "--no-fund",
                    "--no-audit",
                    "--prefer-online",
                    "--prefix",
                    str(prefix),
                    f"{NPM[client]}@{version}",
                ],
                check=True,
                stdout=sys.stderr,
                stderr=sys.stderr,
                timeout=900,
            )
    return prefix / "node_modules/.bin"


def ensure_clients(release: str) -> Clients:
    """Both clients at ``release``'s versions, installed into :data:`CACHE` if missing."""
    versions = wanted(release)
    codex = (str(_install("codex", versions["codex"]) / "codex"),)
    claude_bin = _install("claude", versions["claude"])
    claude: tuple[str, ...] = (str(claude_bin / "claude"),)
    # Claude Code's postinstall copies the native binary over a placeholder; where npm did not run
    # it (allowScripts), its own wrapper finds the binary instead.
    if _version(claude) is None:
        claude = (
            shutil.which("node") or "node",
            str(claude_bin.parent / NPM["claude"] / "cli-wrapper.cjs"),
        )
    for client, argv in (("codex", codex), ("claude", claude)):
        said = _version(argv)
        assert said and version_tuple(said) == version_tuple(versions[client]), (
            client,
            versions[client],
            said,
        )
    return Clients(release, codex, claude, versions, (Path(codex[0]).parent, claude_bin))


def _version(argv: tuple[str, ...]) -> str | None:
    try:
        done = subprocess.run(
            [*argv, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
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
    offline: Offline = field(default_factory=Offline)
    tap: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for d in (self.home, self.project, self.data, self.bin, self.codex_home):
            d.mkdir(parents=True, exist_ok=True)
        bridge = self.bin / "watcher-bridge"
        real = VENV_BIN / "watcher-bridge"
        if self.tap:
            bridge.write_text(
                f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "_tap.py"}" "{self.taplog}" -- "{real}" "$@"\n'
            )
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
        return (
            text.replace(DOC_BRIDGE, str(self.bin / "watcher-bridge"))
            .replace(DOC_DATA, str(self.data))
            .replace(DOC_USER, "maya_writes")
        )

    # ---- watcher itself -------------------------------------------------------------------------
    def seed(self, labels: list[str]) -> dict[str, Any]:
        """Record comments with provider agent (no model call), as `watcher scan --source FILE`."""
        export = write_export(self.root / "export.json", labels)
        done = subprocess.run(
            [str(VENV_BIN / "watcher"), "scan", "--source", str(export), "--json"],
            env=self._watcher_env({"WATCHER_PROVIDER": "agent"}),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return dict(json.loads(done.stdout))

    def inbox_records(self) -> dict[str, dict[str, Any]]:
        return {
            p.stem: json.loads(p.read_text()) for p in sorted((self.data / "inbox").glob("*.json"))
        }

    def _watcher_env(self, extra: Mapping[str, str]) -> dict[str, str]:
        env = _clean_env()
        env.update({"WATCHER_DATA_DIR": str(self.data), "NO_COLOR": "1", **extra})
        return env

    # ---- the clients ----------------------------------------------------------------------------
    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = _clean_env()
        # CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC for every Claude Code command, `claude mcp add`
        # and `claude mcp list` too: without it they reach api.anthropic.com (_offline's proxy saw it).
        env.update(
            {
                "HOME": str(self.home),
                "CODEX_HOME": str(self.codex_home),
                "NO_COLOR": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "PATH": os.pathsep.join([*map(str, self.clients.bin_dirs), env.get("PATH", "")]),
            }
        )
        env.update(self.offline.env())
        env.update(self.extra_env)
        env.update(extra or {})
        return env

    def run(
        self,
        argv: list[str],
        *,
        extra: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        timeout: float = TIMEOUT_S,
    ) -> Session:
        began = time.monotonic()
        argv = self.offline.traced(argv, self.root / "connect.trace")
        done = subprocess.run(
            argv,
            cwd=cwd or self.project,
            env=self.env(extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        return Session(
            argv, done.returncode, done.stdout, done.stderr, time.monotonic() - began, time.time()
        )

    def write_codex_config(self, model_url: str, snippet: str) -> Path:
        """``$CODEX_HOME/config.toml``: the lane's offline settings and fake provider, then the
        doc's snippet as written."""
        path = self.codex_home / "config.toml"
        path.write_text(codex_preamble(model_url) + self.placed(snippet).strip() + "\n")
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
            text = (
                block(settings)
                .text.replace('"watcher"', f'"{server}"')
                .replace("mcp__watcher", f"mcp__{server}")
            )
            (self.project / ".claude").mkdir(exist_ok=True)
            (self.project / ".claude" / "settings.local.json").write_text(text)
            self.trust_project()
        return server

    def trust_project(self) -> None:
        """What accepting Claude Code's trust dialog in the project once records (a project's own
        settings, permission rules included, are ignored until then)."""
        path = self.home / ".claude.json"
        doc = json.loads(path.read_text()) if path.exists() else {}
        doc.setdefault("projects", {}).setdefault(str(self.project), {})[
            "hasTrustDialogAccepted"
        ] = True
        path.write_text(json.dumps(doc))

    def mcp_json(self) -> dict[str, Any]:
        return dict(json.loads((self.project / ".mcp.json").read_text()))

    def write_mcp_json(self, doc: dict[str, Any]) -> None:
        (self.project / ".mcp.json").write_text(json.dumps(doc, indent=2))

    def codex(
        self,
        prompt: str,
        *,
        strict: bool = True,
        extra_args: list[str] | None = None,
        extra: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> Session:
        argv = [
            *self.clients.codex,
            "exec",
            *(["--strict-config"] if strict else []),
            "--skip-git-repo-check",
            "--ephemeral",
            *(extra_args or []),
            prompt,
        ]
        return self.run(argv, extra=extra, timeout=timeout)

    def claude_env(self, model_url: str) -> dict[str, str]:
        # MCP_CONNECT_TIMEOUT_MS: Claude Code waits at most 5 s for a server it waits for at all;
        # on this shared 2-core machine three lanes' servers can take longer to start.
        return {
            "ANTHROPIC_BASE_URL": model_url,
            "ANTHROPIC_API_KEY": CLAUDE_KEY,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "MCP_CONNECT_TIMEOUT_MS": "20000",
        }

    def claude(
        self,
        model_url: str,
        prompt: str,
        *,
        args: list[str] | None = None,
        extra: Mapping[str, str] | None = None,
        timeout: float = TIMEOUT_S,
    ) -> Session:
        argv = [*self.clients.claude, "-p", prompt, "--output-format", "json", *(args or [])]
        return self.run(
            argv, extra={**self.claude_env(model_url), **(extra or {})}, timeout=timeout
        )


def codex_preamble(model_url: str) -> str:
    """The top of the lane's ``config.toml``: the fake model as a custom provider, and
    docs/agents.md's tables that turn off what Codex fetches from the internet at every start
    (0.165.0 and 0.171.0: github.com, api.github.com and chatgpt.com for plugins, ab.chatgpt.com
    for analytics; _offline's proxy saw each)."""
    return (
        f'model = "fake-model"\nmodel_provider = "lane"\n\n'
        f'[model_providers.lane]\nname = "lane fake"\nbase_url = "{model_url}/v1"\nwire_api = "responses"\n\n'
        f"{block('codex-offline').text.strip()}\n\n"
    )


def _clean_env() -> dict[str, str]:
    """The test process's environment without anything that names a real service or key."""
    drop_prefixes = (
        "WATCHER_",
        "DEVTO_",
        "OPENAI_",
        "ANTHROPIC_",
        "CLAUDE_",
        "CODEX_",
        "MCP_",
        "PYTEST_",
        "COV_",
    )
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(drop_prefixes)
        and "KEY" not in k.upper()
        and "TOKEN" not in k.upper()
        and "SECRET" not in k.upper()
        and k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    }
    return keep
