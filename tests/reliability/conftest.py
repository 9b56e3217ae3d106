"""The reliability rig (SPEC §12; docs/design.md "How it is checked"): crash matrix, failed writes, soak, bad input.

Quick by default; ``WATCHER_RELIABILITY=long`` runs the long mode. The counted figures are
printed as one line at the end of the pytest run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _fakes.provider import running_fake
from _rel_harness import Baseline, build_baseline


@pytest.fixture(autouse=True)
def in_process_fsync_is_free(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In this process, fsync only costs time: the rig kills processes, it never cuts power, and
    a SIGKILLed process's writes survive in the page cache. Child processes keep the real fsync;
    the failed-write cases count (and fail) fsync calls on top of this."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    yield


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """The state every crash and failed-write case starts from, built once and cloned per case."""
    work = tmp_path_factory.mktemp("baseline")
    data = work / "data"
    data.mkdir()
    with running_fake() as fake:
        return build_baseline(data, fake, work)
