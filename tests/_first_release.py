"""The first release of devto-watcher, installed for real beside this checkout (tests/test_cross_version.py).

Its tree comes from git (``git archive`` of :data:`COMMIT`, the commit tests/golden/formats.json
names as the first release), is installed with pip into a venv of its own
(``--no-deps``: its dependencies are this venv's, reached through a ``.pth`` line — the lines of
that directory's own ``.pth`` files are not read, so this checkout's editable install stays out),
and is built once per test session: under pytest-xdist the workers share one build through a lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from filelock import FileLock

COMMIT = "e0b6a47f582931e19971e724f114c9746ae2fbac"
REPO = Path(__file__).resolve().parent.parent
# The opt-in lane (building the release costs ~10 s a session): asked for, or the long reliability lane.
LANE = (os.environ.get("WATCHER_CROSS_VERSION") == "1"
        or os.environ.get("WATCHER_RELIABILITY", "").lower() == "long")


def available() -> str | None:
    """Why the first release cannot be built here (no git, a shallow clone), else ``None``."""
    try:
        found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{COMMIT}^{{commit}}"],
                               capture_output=True, check=False)
    except OSError as exc:
        return f"git is not available ({exc})"
    return None if found.returncode == 0 else f"commit {COMMIT[:12]} is not in this clone (shallow?)"


def for_session(tmp_path_factory: object) -> Path:
    """The first release's ``bin/`` for this test session; skips the test where it cannot be built."""
    import pytest

    why = available()
    if why is not None:
        pytest.skip(why)
    base = Path(tmp_path_factory.getbasetemp())  # type: ignore[attr-defined]
    # Under xdist every worker has a basetemp of its own inside the session's: build once for all.
    return installed(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)


def installed(cache: Path) -> Path:
    """The first release's ``bin/`` (``watcher``, ``watcher-bridge``), built under ``cache`` once."""
    venv = cache / f"first-release-{COMMIT[:12]}"
    done = venv / "installed"
    with FileLock(str(cache / f"first-release-{COMMIT[:12]}.lock")):
        if not done.exists():
            _build(venv)
            done.write_text(COMMIT + "\n", encoding="utf-8")
    return venv / "bin"


def _build(venv: Path) -> None:
    src = venv.parent / f"first-release-{COMMIT[:12]}-src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", COMMIT], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", str(src)], check=True, capture_output=True)
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    (purelib / "_dependencies_from_the_test_venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n",
                                                                   encoding="utf-8")


def env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a first-release process on ``data_dir`` (no key, no other setting)."""
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("WATCHER_", "DEVTO_", "PYTHON")) and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    return {**base, "WATCHER_DATA_DIR": str(data_dir), "NO_COLOR": "1", **extra}
