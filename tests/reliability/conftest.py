"""The reliability rig (SPEC §12; docs/design.md "How it is checked"): crash matrix, failed writes, soak, bad input.

Quick by default; ``WATCHER_RELIABILITY=long`` runs the long mode. The counted figures are
printed as one line at the end of the pytest run. In-process runs make real fsyncs: the suite's
temp dirs are on tmpfs (tests/conftest.py), where one costs next to nothing.
"""

from __future__ import annotations

import pytest
from _fakes.provider import running_fake
from _rel_harness import Baseline, build_baseline


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """The state every crash and failed-write case starts from, built once and cloned per case."""
    work = tmp_path_factory.mktemp("baseline")
    data = work / "data"
    data.mkdir()
    with running_fake() as fake:
        return build_baseline(data, fake, work)
