"""The real-clients lane: Codex CLI and Claude Code drive ``watcher-bridge mcp``, offline.

Opt-in: without ``WATCHER_REALCLIENTS=1`` every test here is deselected (the default
``pytest -q`` never installs or starts a client). With it, the lane installs both clients from
npm into a cache directory (:mod:`_clients`) the first time, and runs each test against a fake
model on 127.0.0.1 (:mod:`_fake_models`). At the end it prints one line: the client versions and
what passed.

    WATCHER_REALCLIENTS=1 .venv/bin/python -m pytest -q -p no:cacheprovider tests/realclients
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from _clients import Clients, Workspace, ensure_clients
from _fake_models import FakeModel, running_model

HERE = Path(__file__).resolve().parent
ENABLED = os.environ.get("WATCHER_REALCLIENTS", "") == "1"
_OUTCOMES: dict[str, str] = {}


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
        _OUTCOMES[report.nodeid] = report.outcome if report.when == "call" else f"{report.outcome} ({report.when})"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not ENABLED and _asked_for(terminalreporter.config):
        terminalreporter.write_line("tests/realclients is deselected: WATCHER_REALCLIENTS=1 runs it "
                                    "(it installs Codex and Claude Code from npm the first time)")
    if not ENABLED or not _OUTCOMES:
        return
    versions = ensure_clients().versions
    passed = sorted(n for n, o in _OUTCOMES.items() if o == "passed")
    failed = sorted(n for n, o in _OUTCOMES.items() if o != "passed")
    terminalreporter.write_sep("-", "real clients")
    for nodeid in failed:
        terminalreporter.write_line(f"  {_OUTCOMES[nodeid]}: {nodeid.split('::', 1)[1]}")
    terminalreporter.write_line(f"realclients: {versions['codex']}, Claude Code {versions['claude'].split()[0]}: "
                                f"{len(passed)} passed, {len(failed)} failed")


@pytest.fixture(scope="session")
def clients() -> Clients:
    return ensure_clients()


@pytest.fixture
def ws(clients: Clients, tmp_path: Path) -> Workspace:
    """A fresh client home, project, data dir and tapped watcher-bridge."""
    return Workspace(clients, tmp_path / "lane")


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with running_model() as fake:
        yield fake
