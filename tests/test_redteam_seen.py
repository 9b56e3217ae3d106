"""SPEC §4.2: seen.json is read once, the same way, for every view: an article entry under a key
that is no article id (a hand edit) is left out of all of them, never an internal error in one."""

from __future__ import annotations

import json
from pathlib import Path

from _proc import envelope, run, write_export
from mcp import ClientSession
from test_mcp_server import doc, run_memory_session


def _seen_with_a_bad_article_key(data_dir: Path, tmp_path: Path) -> None:
    export = write_export(tmp_path / "export.json", ["one", "two"])
    assert run("cli", "scan", "--source", str(export), "--json", data_dir=data_dir,
               env={"WATCHER_PROVIDER": "offline"}).returncode == 0
    seen = data_dir / "seen.json"
    doc_ = json.loads(seen.read_text())
    assert list(doc_["articles"]) == ["1201"]
    doc_["articles"]["not-a-number"] = doc_["articles"]["1201"]
    seen.write_text(json.dumps(doc_))


def test_articles_leaves_out_an_article_key_that_is_no_number(data_dir: Path, tmp_path: Path) -> None:
    """`watcher articles --json` answers 0 with the real article only, as status and inbox do."""
    _seen_with_a_bad_article_key(data_dir, tmp_path)
    for command in ("articles", "status", "inbox"):
        proc = run("cli", command, "--json", data_dir=data_dir)
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
    listed = envelope(run("cli", "articles", "--json", data_dir=data_dir))["result"]
    assert "not-a-number" not in json.dumps(listed) and "Caching in Python" in json.dumps(listed)


def test_the_articles_tool_answers_too(data_dir: Path, tmp_path: Path) -> None:
    """The MCP articles tool reads the same seen.json the same way: exit_code 0."""
    _seen_with_a_bad_article_key(data_dir, tmp_path)

    async def scenario(session: ClientSession) -> None:
        assert doc(await session.call_tool("articles", {}))["exit_code"] == 0

    run_memory_session(data_dir, scenario)
