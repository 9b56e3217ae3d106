"""SPEC §9, §10: what every command prints — ``--json``, the bridge's envelope, the MCP tool text
and the human tables — pinned byte for byte on fixed data dirs.

Each scenario runs the real front ends in process (:func:`_proc.run_main`; the MCP server over
the SDK's in-memory transport) and compares stdout with ``tests/golden/<scenario>.txt`` after
the values that differ from run to run (the temp path, timestamps, pids, durations, the loopback
port, the observation log's byte count) are replaced by placeholders. Keys, their order, null
versus absent, indentation: all of it is compared.

``RESULTS_GOLDEN_WRITE=1`` writes the files instead of comparing (read at import: the autouse
fixture clears ``WATCHER_*``). A change to a golden file is a change to what users and agents
read, and belongs in its own commit that says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import run_main
from mcp import ClientSession
from test_mcp_server import memory_session

from watcher.config import Settings
from watcher.models import SeenFile
from watcher.pipeline import Hooks
from watcher.source import FetchResult, Source, read_export, resolve_source

GOLDEN = Path(__file__).parent / "golden"
WRITE = os.environ.get("RESULTS_GOLDEN_WRITE") == "1"
VERDICT = json.dumps({"needs_reply": True, "category": "question", "priority": "high",
                      "summary": "Asks whether the cache works on Windows.", "reply_hint": "Say yes, since 3.2."})

_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
_LOCAL = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d(?: [A-Z][A-Za-z0-9+-]*)?")  # human output's local time
_DATE = re.compile(r"\b\d{4}-\d\d-\d\d\b")
_NUMBERS = re.compile(r'("(?:pid|duration_ms|applied)": )\d+')
_PORT = re.compile(r"127\.0\.0\.1:\d+")


def normalised(text: str, root: Path) -> str:
    for path in sorted({str(root), os.path.realpath(root)}, key=len, reverse=True):
        text = text.replace(path, "<TMP>")
    text = _TIME.sub("<TIME>", text)
    text = _LOCAL.sub("<LOCAL TIME>", text)
    text = _DATE.sub("<DATE>", text)
    text = _NUMBERS.sub(r"\g<1>0", text)
    return _PORT.sub("127.0.0.1:<PORT>", text)


def ago(**delta: float) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _comment(label: str, text: str, created_at: str, *, author: str = "reader",
             children: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type_of": "comment", "id_code": label, "created_at": created_at,
            "body_html": f"<p>TAG:{label} {text}</p>", "user": {"name": author.title(), "username": author},
            "children": children or []}


def export(path: Path, labels: list[str]) -> Path:
    """Recent comments (one a question, one praise, one spam-like), one the author had answered
    already, and one older than the backlog window (baseline on the first scan)."""
    texts = ["How do I configure the cache for this, and does it work on Windows?",
             "Great article, thanks for writing it!",
             "Buy cheap followers at example dot com, best prices!!!",
             "Could you explain why the second benchmark is slower? I got different numbers."]
    comments = [_comment(label, texts[i % len(texts)], ago(minutes=50 - i), author=f"reader{i}")
                for i, label in enumerate(labels)]
    answered = _comment("ans1", "Does this need Python 3.12 or does 3.11 work?", ago(minutes=30), author="quinn",
                        children=[_comment("rep1", "3.11 works.", ago(minutes=20), author="maya_writes")])
    old = _comment("old1", "Is there a follow-up planned?", ago(days=400), author="ola")
    doc = {"username": "maya_writes", "articles": [{
        "id": 1201, "title": "Caching in Python", "url": "https://dev.to/maya_writes/caching-in-python",
        "comments_count": len(comments) + 3, "comments": [*comments, answered, old]}]}
    path.write_text(json.dumps(doc))
    return path


@dataclass(frozen=True)
class Account:
    """dev.to as the pipeline sees it (a source named "devto"), served from an export file, so a
    first scan records the comment older than the backlog window as baseline (SPEC §13.3)."""

    path: Path
    name: str = "devto"

    def fetch(self, settings: Settings, index: SeenFile, *, full: bool = False) -> FetchResult:
        return read_export(self.path, settings)


ACCOUNT = "account-golden"


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A temp dir whose path has the same length on every run (``/tmp/wg`` and 8 characters):
    human output wraps at the width (SPEC §16.4), so where a line breaks around a path depends on
    the path's length, and the golden files replace the path by ``<TMP>``."""
    root = Path(tempfile.mkdtemp(prefix="wg", dir="/tmp"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def account(tmp_path: Path) -> Hooks:
    """The hooks' source factory: ``--source account-golden`` is the account of ``tmp_path/export.json``,
    and so is dev.to itself (``watcher cron`` scans the configured account)."""
    def source(name: str) -> Source:
        return Account(tmp_path / "export.json") if name in (ACCOUNT, "devto") else resolve_source(name)

    return Hooks(make_source=source)


class Transcript:
    """The steps of one scenario: each command line, its exit code and its normalised stdout."""

    def __init__(self, name: str, root: Path, data_dir: Path, env: dict[str, str], hooks: Hooks | None = None) -> None:
        self.name, self.root, self.data_dir, self.env, self.hooks = name, root, data_dir, env, hooks
        self.parts: list[str] = []

    def run(self, entry: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any] | None:
        # The width of a pipe, whatever the shell running the tests exports (SPEC §16.4).
        env = {"COLUMNS": "80", **self.env, **(env or {})}
        proc = run_main(entry, *args, data_dir=self.data_dir, env=env, hooks=self.hooks)
        self.add(f"{'watcher' if entry == 'cli' else 'watcher-bridge'} {' '.join(args)}", proc.returncode,
                 proc.stdout)
        try:
            parsed: dict[str, Any] = json.loads(proc.stdout)
        except ValueError:
            return None
        return parsed

    def add(self, title: str, code: int | None, text: str) -> None:
        head = f"=== {normalised(title, self.root)}" + (f" (exit {code})" if code is not None else "")
        self.parts.append(f"{head}\n{normalised(text, self.root).rstrip()}\n")

    def check(self) -> None:
        got = "\n".join(self.parts)
        path = GOLDEN / f"{self.name}.txt"
        if WRITE:
            GOLDEN.mkdir(exist_ok=True)
            path.write_text(got)
            return
        want = path.read_text()
        assert got == want, _first_difference(got, want)


def _first_difference(got: str, want: str) -> str:
    for n, (a, b) in enumerate(zip(got.splitlines(), want.splitlines(), strict=False), 1):
        if a != b:
            return f"line {n} differs:\n  got:  {a[:400]}\n  want: {b[:400]}"
    return f"lengths differ: got {len(got.splitlines())} lines, want {len(want.splitlines())}"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def test_offline_scan_and_the_read_commands_print_what_they_printed(data_dir: Path, tmp_path: Path,
                                                                    account: Hooks) -> None:
    """check, scan (dry and real), status, inbox (all, new), show (a verdict, a baseline, an
    answered comment), mark, eval, recheck, signals, cron, open, notify --test, schedule and
    draft and refusals, as --json, envelope and tables."""
    export(tmp_path / "export.json", ["q1", "p1", "s1", "q2"])
    source = ACCOUNT
    t = Transcript("offline", tmp_path, data_dir, {"WATCHER_PROVIDER": "offline"}, hooks=account)
    t.run("cli", "check", "--json")
    t.run("cli", "check")
    t.run("cli", "scan", "--dry-run", "--source", source, "--json")
    t.run("bridge", "scan", "--dry-run", "--source", source, "--limit", "1")
    t.run("cli", "scan", "--dry-run", "--source", source)
    t.run("cli", "scan", "--source", source, "--limit", "2", "--json")
    t.run("bridge", "scan", "--source", source, "--limit", "1")
    t.run("cli", "scan", "--source", source)
    for entry, args in [("cli", ("status", "--json")), ("bridge", ("status",)), ("cli", ("status",)),
                        ("cli", ("inbox", "--json")), ("cli", ("inbox", "--all", "--json")),
                        ("bridge", ("inbox", "--all")), ("cli", ("inbox",)), ("cli", ("inbox", "--all")),
                        ("cli", ("inbox", "--new", "--json")), ("cli", ("inbox", "--new", "--json")),
                        ("cli", ("show", "q1", "--json")), ("bridge", ("show", "q1")), ("cli", ("show", "q1")),
                        ("cli", ("show", "old1", "--json")), ("cli", ("show", "ans1", "--json")),
                        ("cli", ("show", "ans1")),
                        ("cli", ("mark", "q1", "replied", "--json")), ("bridge", ("mark", "q2", "ignored")),
                        ("cli", ("mark", "q2", "open")), ("cli", ("articles", "--json")), ("cli", ("articles",)),
                        ("cli", ("mark", "p1", "ignored")),
                        ("cli", ("eval", "--json")), ("bridge", ("eval",)), ("cli", ("eval",)),
                        ("cli", ("recheck", "--json")), ("bridge", ("recheck", "--dry-run", "q1")),
                        ("cli", ("recheck", "q1")),
                        ("cli", ("signals", "--json")), ("bridge", ("signals",)), ("cli", ("signals",)),
                        ("bridge", ("show", "nosuch")), ("cli", ("show", "nosuch", "--json")),
                        ("bridge", ("scan", "--limit", "0")), ("bridge", ("grant", "q1")),
                        ("bridge", ("scan", "--limit", "many"))]:
        t.run(entry, *args)
    cron = {"DEVTO_USERNAME": "maya_writes"}
    t.run("cli", "cron", "--json", env=cron)
    t.run("cli", "cron", env=cron)
    nobrowser = {"BROWSER": str(tmp_path / "no-browser")}  # webbrowser's own choice: none here
    t.run("cli", "open", "q1", "--json", env=nobrowser)
    t.run("cli", "open", "q1", env=nobrowser)
    t.run("cli", "draft", "q1", "--json")  # SPEC §16.5: the offline template, labelled
    t.run("cli", "draft", "q1")
    # A target Apprise has no plugin for: refused without a send, in watcher's own words.
    notify = {"WATCHER_NOTIFY": "nosuchservice://golden-topic"}
    t.run("cli", "notify", "--test", "--json", env=notify)
    t.run("cli", "notify", "--test", env=notify)
    for args in (("schedule", "cron", "--json"), ("schedule", "cron")):
        # The executable is this interpreter's path: the one part of the line that is the machine's.
        proc = run_main("cli", *args, data_dir=data_dir, env={**t.env, "HOME": str(tmp_path)},
                        hooks=account)
        t.add(f"watcher {' '.join(args)}", proc.returncode,
              re.sub(r"exec \S+( -m watcher)?", "exec <WATCHER>", proc.stdout))
    # SPEC §16.3: a comment out of every view, and another store brought into the data dir.
    t.run("cli", "forget", "s1", "--json")
    t.run("cli", "forget", "s1")
    old = tmp_path / "old"
    moved = export(tmp_path / "old.json", ["o1", "q1"])
    assert run_main("cli", "scan", "--source", str(moved), data_dir=old, env={"WATCHER_PROVIDER": "offline"}
                    ).returncode == 0
    t.run("cli", "migrate", str(old), "--json")
    t.run("cli", "migrate", str(old))
    t.check()


def test_provider_errors_grants_cooldown_and_breaker_print_what_they_printed(
        data_dir: Path, tmp_path: Path, fake: FakeProvider) -> None:
    """Per-item errors, a grant, a batch stopped by a 429 and the cooldown after it, then a 401
    that opens the breaker: each summary, status and refusal as it was printed."""
    source = str(export(tmp_path / "export.json", ["e1", "e2", "ok1"]))
    fake.script("e1", "500")
    fake.script("e2", "malformed")
    t = Transcript("provider", tmp_path, data_dir, fake.env())
    t.run("cli", "check", "--json", env={"DEVTO_USERNAME": ""})
    t.run("cli", "scan", "--source", source, "--json")
    t.run("cli", "grant", "e1", "--json")  # no terminal and no --yes: refused (SPEC §15.5)
    t.run("cli", "grant", "e1", "--yes", "--json")
    t.run("cli", "grant", "e2", "--attempts", "2", "--yes")
    t.run("cli", "grant", "ok1", "--yes", "--json")
    fake.script("e1", "429:600")
    t.run("cli", "recheck", "e1", "--json")  # named: its 500 does not keep it 10 minutes (§16.3)
    t.run("cli", "status", "--json")
    t.run("cli", "status")
    t.run("bridge", "recheck")
    t.run("cli", "recheck")
    t.run("cli", "show", "e1", "--json")
    t.run("cli", "show", "e1")

    other = tmp_path / "breaker"
    other.mkdir()
    fake.script("e1", "401")
    b = Transcript("breaker", tmp_path, other, fake.env())
    b.run("cli", "scan", "--source", source, "--json")
    b.run("cli", "status", "--json")
    b.run("bridge", "status")
    b.run("cli", "status")
    # The free probe passes; a half-open call to a comment the outage has not touched closes it.
    b.run("cli", "scan", "--source", source)
    t.check()
    b.check()


def test_the_agent_as_the_model_prints_what_it_printed(data_dir: Path, tmp_path: Path) -> None:
    """Provider agent (SPEC §14): a scan that leaves comments for the agent, claims, a valid and
    an invalid submit, a refused late submit, and the status and show of claimed comments."""
    source = str(export(tmp_path / "export.json", ["g1", "g2", "g3"]))
    t = Transcript("agent", tmp_path, data_dir, {"WATCHER_PROVIDER": "agent"})
    t.run("cli", "scan", "--dry-run", "--source", source, "--json")
    t.run("cli", "scan", "--source", source, "--json")
    t.run("cli", "scan", "--source", source)
    t.run("cli", "claim", "--limit", "1", "--json")
    t.run("bridge", "claim", "--limit", "1")
    t.run("cli", "claim", "--limit", "1")
    t.run("cli", "status", "--json")
    t.run("cli", "status")
    t.run("cli", "show", "g3", "--json")
    t.run("cli", "show", "g3")
    t.run("cli", "scan", "--source", source, "--json")
    t.run("cli", "submit", "g1", "1", VERDICT, "--json")
    t.run("bridge", "submit", "g2", "1", "sure, it needs a reply")
    t.run("cli", "submit", "g3", "1", VERDICT)
    t.run("cli", "submit", "g3", "1", VERDICT, "--json")
    t.run("cli", "submit", "g2", "1", VERDICT)
    t.run("cli", "inbox", "--all", "--json")
    t.run("cli", "inbox", "--all")
    t.run("bridge", "claim", "--limit", "5")
    t.check()


def test_demo_prints_what_it_printed(tmp_path: Path) -> None:
    """`watcher demo`: both scans of the bundled sample and the inbox after them."""
    t = Transcript("demo", tmp_path, tmp_path / "demo-unused", {})
    t.run("cli", "--data-dir", str(tmp_path / "d1"), "demo", "--json")
    t.run("cli", "--data-dir", str(tmp_path / "d2"), "demo")
    t.check()


def test_mcp_tools_and_resources_answer_what_they_answered(data_dir: Path, tmp_path: Path) -> None:
    """The MCP text of scan, show (with and without the prompt), inbox, status, a usage error,
    and the two resources, as the client receives them."""
    source = str(export(tmp_path / "export.json", ["m1", "m2"]))
    t = Transcript("mcp", tmp_path, data_dir, {})

    async def scenario(session: ClientSession) -> None:
        for name, arguments in [("scan", {"dry_run": True, "source": source}), ("scan", {"source": source}),
                                ("show", {"id": "m1"}), ("show", {"id": "m1", "prompt": True}),
                                ("inbox", {"all": True}), ("status", {}), ("mark", {"id": "m1", "triage": "ignored"}), ("eval", {}),
                                ("signals", {}), ("check", {}), ("show", {"id": "nosuch"}),
                                ("scan", {"limit": 0}), ("claim", {})]:
            result = await session.call_tool(name, arguments)
            text = result.content[0].text if result.content and result.content[0].type == "text" else ""
            t.add(f"tool {name} {json.dumps(arguments)}", None, text)
        for uri in ("watcher://inbox", "watcher://comment/m2"):
            contents = (await session.read_resource(uri)).contents
            t.add(f"resource {uri}", None, getattr(contents[0], "text", ""))

    async def main() -> None:
        async with memory_session(data_dir) as session:
            await scenario(session)

    anyio.run(main)
    t.check()
