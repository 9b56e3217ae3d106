"""Run ``watcher`` / ``watcher-bridge`` as real processes against a temp data dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
FAULTS = Path(__file__).parent / "_faults"
ENTRYPOINTS = {"cli": BIN / "watcher", "bridge": BIN / "watcher-bridge"}


def env_for(data_dir: Path, extra: dict[str, str] | None = None, fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WATCHER_", "DEVTO_")) and k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["WATCHER_DATA_DIR"] = str(data_dir)
    env["NO_COLOR"] = "1"
    env.update(extra or {})
    if fault:
        # Fault injection lives in the tests: a sitecustomize loaded only into this process.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(FAULTS), env.get("PYTHONPATH")]))
        env["WATCHER_TEST_FAULT"] = fault
    return env


def command(entry: str, *args: str) -> list[str]:
    return [str(ENTRYPOINTS[entry]), *args]


def run(entry: str, *args: str, data_dir: Path, env: dict[str, str] | None = None, fault: str | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command(entry, *args), env=env_for(data_dir, env, fault), capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def start(entry: str, *args: str, data_dir: Path, env: dict[str, str] | None = None,
          fault: str | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(command(entry, *args), env=env_for(data_dir, env, fault), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)


def envelope(proc: subprocess.CompletedProcess[str] | tuple[str, str]) -> dict[str, Any]:
    out = proc[0] if isinstance(proc, tuple) else proc.stdout
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines, f"no JSON on stdout; stderr: {proc[1] if isinstance(proc, tuple) else proc.stderr}"
    return json.loads(out)


def write_export(path: Path, labels: list[str], *, article_id: int = 1201, comments_count: int | None = None) -> Path:
    """A Forem-format export with one comment per label; each text carries ``TAG:<label>``."""
    comments = [
        {"type_of": "comment", "id_code": label, "created_at": f"2026-05-14T09:{i:02d}:00Z",
         "body_html": f"<p>TAG:{label} How do I configure the cache for this, and does it work on Windows?</p>",
         "user": {"name": f"Reader {i}", "username": f"reader{i}"}, "children": []}
        for i, label in enumerate(labels)
    ]
    doc = {"username": "maya_writes", "articles": [{
        "id": article_id, "title": "Caching in Python", "url": "https://dev.to/maya_writes/caching-in-python",
        "comments_count": len(labels) if comments_count is None else comments_count, "comments": comments}]}
    path.write_text(json.dumps(doc))
    return path
