"""The real-clients lane: Codex CLI and Claude Code drive ``watcher-bridge mcp``, offline.

Opt-in: without ``WATCHER_REALCLIENTS=1`` every test here is deselected (the default
``pytest -q`` never installs or starts a client). With it, the lane asks npm for each client's
newest version, installs that and the pinned older release (:data:`_clients.PINNED`) into a cache
directory (:mod:`_clients`) the first time, and runs each test against both releases (ids
``[pinned]`` and ``[newest]``), with a fake model on 127.0.0.1 (:mod:`_fake_models`) and nothing
beyond loopback (:mod:`_offline`, checked after every test). At the end it prints one line per
client and release: the version and what passed.

    WATCHER_REALCLIENTS=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/realclients
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _clients import (
    NEWEST_VAR,
    PINNED,
    RELEASES,
    Clients,
    Workspace,
    ensure_clients,
    resolve_newest,
)
from _fake_models import FakeModel, running_model
from _offline import STRACE, Offline, Refuser, refusing_proxy

HERE = Path(__file__).resolve().parent
ENABLED = os.environ.get("WATCHER_REALCLIENTS", "") == "1"
_OUTCOMES: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    # Once, in the process that starts the xdist workers: they inherit the answer (NEWEST_VAR).
    if ENABLED and not hasattr(config, "workerinput"):
        resolve_newest()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if ENABLED:
        return
    # Resolved once per test file, not per item: every worker deselects here, over ~1,400 items.
    ours: dict[Path, bool] = {}
    for item in items:
        if item.path not in ours:
            ours[item.path] = HERE in item.path.resolve().parents
    lane = [item for item in items if ours[item.path]]
    if lane:
        config.hook.pytest_deselected(items=lane)
        items[:] = [item for item in items if not ours[item.path]]


def _asked_for(config: pytest.Config) -> bool:
    """The run names only paths inside this lane (also seen in an xdist controller, which collects nothing)."""
    paths = [Path(str(arg).split("::", 1)[0]).resolve() for arg in config.args]
    return bool(paths) and all(p == HERE or HERE in p.parents for p in paths)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Also called in the xdist controller for every worker's reports: the summary sees them all.
    if HERE.name not in report.nodeid:
        return
    if report.when == "call" or report.outcome != "passed":
        _OUTCOMES[report.nodeid] = (
            report.outcome if report.when == "call" else f"{report.outcome} ({report.when})"
        )


def _client_and_release(nodeid: str) -> tuple[str, str]:
    if "test_realclients_docs" in nodeid:
        return "docs", "-"
    client = "codex" if "test_realclients_codex" in nodeid else "claude"
    ids = nodeid.rsplit("[", 1)[1] if "[" in nodeid else ""
    return client, next((r for r in RELEASES if r in ids.rstrip("]").split("-")), "-")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ENABLED and _asked_for(terminalreporter.config):
        terminalreporter.write_line(
            "tests/realclients is deselected: WATCHER_REALCLIENTS=1 runs it "
            "(it installs Codex and Claude Code from npm the first time)"
        )
    if not ENABLED or not _OUTCOMES:
        return
    versions = {"pinned": PINNED, "newest": json.loads(os.environ.get(NEWEST_VAR) or "{}")}
    names = {"codex": "Codex CLI", "claude": "Claude Code", "docs": "docs/agents.md's blocks"}
    terminalreporter.write_sep(
        "-", "real clients" + (" (connections traced with strace)" if STRACE else "")
    )
    for nodeid, outcome in sorted(_OUTCOMES.items()):
        if outcome != "passed":
            terminalreporter.write_line(f"  {outcome}: {nodeid.split('::', 1)[1]}")
    tally: dict[tuple[str, str], list[str]] = {}
    for nodeid, outcome in _OUTCOMES.items():
        tally.setdefault(_client_and_release(nodeid), []).append(outcome)
    for (client, release), outcomes in sorted(tally.items()):
        version = versions.get(release, {}).get(client, "") if release in versions else ""
        passed = sum(o == "passed" for o in outcomes)
        label = f"{names[client]} {version} ({release})" if version else names[client]
        terminalreporter.write_line(
            f"realclients: {label}: {passed} passed, {len(outcomes) - passed} failed"
        )


@pytest.fixture(scope="session", params=RELEASES)
def clients(request: pytest.FixtureRequest) -> Clients:
    """Both clients at one release: the pinned older one, or the newest npm resolves."""
    return ensure_clients(str(request.param))


@pytest.fixture(scope="session")
def proxy() -> Iterator[Refuser]:
    with refusing_proxy() as refuser:
        yield refuser


@pytest.fixture
def ws(clients: Clients, proxy: Refuser, tmp_path: Path) -> Iterator[Workspace]:
    """A fresh client home, project, data dir and tapped watcher-bridge; afterwards, nothing of
    the test's sessions went beyond loopback (_offline)."""
    before = len(proxy.hits)
    workspace = Workspace(clients, tmp_path / "lane", offline=Offline(proxy.url))
    yield workspace
    assert proxy.hits[before:] == [], (
        f"a client tried to reach beyond loopback through the proxy: {proxy.hits[before:]}"
    )
    beyond = workspace.offline.beyond_loopback()
    assert beyond == [], "a client connected beyond loopback:\n" + "\n".join(beyond)


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with running_model() as fake:
        yield fake
