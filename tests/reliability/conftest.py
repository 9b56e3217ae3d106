"""The reliability rig (SPEC §12; docs/design.md "How it is checked"): crash matrix, failed writes, soak, bad input.

Quick by default; ``WATCHER_RELIABILITY=long`` runs the long mode. The counted figures are
printed as one line at the end of the pytest run.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator

import httpx
import pytest
from _fakes.provider import running_fake
from _rel_harness import Baseline, build_baseline

from watcher.providers import _http


@pytest.fixture(autouse=True)
def in_process_fsync_is_free(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In this process, fsync only costs time: the rig kills processes, it never cuts power, and
    a SIGKILLed process's writes survive in the page cache. Child processes keep the real fsync;
    the failed-write cases count (and fail) fsync calls on top of this."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    yield


@pytest.fixture(autouse=True)
def one_tls_context(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """In-process runs build a provider each; httpx would load the CA bundle every time (~50 ms)
    though the rig only ever speaks plain HTTP to 127.0.0.1. Same transport, one shared context."""
    monkeypatch.setattr(_http, "default_transport", lambda base_url: httpx.HTTPTransport(retries=0, verify=_TLS))
    yield


_TLS = ssl.create_default_context()


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Baseline:
    """The state every crash and failed-write case starts from, built once and cloned per case."""
    work = tmp_path_factory.mktemp("baseline")
    data = work / "data"
    data.mkdir()
    with running_fake() as fake:
        return build_baseline(data, fake, work)
