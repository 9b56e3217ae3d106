"""SPEC §15.5, "Terminal safety": text from outside reaches a terminal with its control and escape
characters made visible — never raw, never silently dropped — in every human view, in what the
MCP server says, and in the JSON the bridge and ``--json`` print (which still decodes to the
exact data).

The hostile comment arrives the way a Forem payload brings it: raw in ``body_html``, as a numeric
entity (``&#27;``) that the HTML conversion decodes, in the author's name and the article title,
and through the model (the offline classifier quotes the text in its summary).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from _proc import run_main
from _terminal import HOSTILE, unsafe, unsafe_in_json
from test_mcp_server import memory_session

OFFLINE = {"WATCHER_PROVIDER": "offline", "COLUMNS": "200"}


def _hostile_export(path: Path) -> Path:
    """One question on an article, its parent carrying the escapes too; every outside string hostile."""
    entity = "&#27;]0;entity-title&#7;&#x1b;[2J&#155;"  # what _html.py decodes into ESC, BEL, CSI
    child = {"type_of": "comment", "id_code": "evil1", "created_at": "2026-05-14T09:01:00Z",
             "body_html": f"<p>How do I fix this? {entity} {HOSTILE}</p>",
             "user": {"name": "Eve", "username": f"eve{HOSTILE}"}, "children": []}
    parent = {"type_of": "comment", "id_code": "par1", "created_at": "2026-05-14T09:00:00Z",
              "body_html": f"<p>Why is it slow? {HOSTILE}</p>", "user": {"name": "P", "username": "pat"},
              "children": [child]}
    doc = {"username": "maya", "articles": [{"id": 7, "title": f"Caching {HOSTILE}", "url": "https://dev.to/maya/c",
                                             "comments_count": 2, "comments": [parent]}]}
    path.write_text(json.dumps(doc))
    return path


def test_visible_names_every_control_character_and_keeps_layout() -> None:
    """ESC, BEL, C1, DEL and bidi controls become escapes; newline and tab stay; CRLF is a newline."""
    from watcher.util.visible import visible

    assert visible("a\x1b[2Jb\x07\x9b\x7f\u202e\u2066z") == "a\\x1b[2Jb\\x07\\x9b\\x7f\\u202e\\u2066z"
    assert visible("line one\r\n\tline two\rover") == "line one\n\tline two\\rover"
    assert visible("a\nb\tc", one_line=True) == "a\\nb\\tc"
    assert visible("caf\u00e9 \U0001f468\u200d\U0001f469 \u65e5\u672c") == "caf\u00e9 \U0001f468\u200d\U0001f469 \u65e5\u672c"
    assert visible(visible(HOSTILE)) == visible(HOSTILE)  # escapes are plain text: rendering twice is harmless
    assert unsafe(visible(HOSTILE)) == []


def test_json_safe_escapes_what_json_leaves_raw_and_decodes_to_the_same_data() -> None:
    """json.dumps(ensure_ascii=False) leaves DEL, C1 and bidi controls raw: they become \\u escapes."""
    from watcher.util.visible import json_safe

    doc = {"text": HOSTILE + " caf\u00e9", "lone": "\ud800"}
    text = json_safe(json.dumps(doc, ensure_ascii=False))
    assert unsafe_in_json(text) == [] and json.loads(text) == doc
    assert "caf\u00e9" in text  # only the dangerous characters are escaped


def test_no_human_view_passes_an_escape_sequence_to_the_terminal(tmp_path: Path, data_dir: Path) -> None:
    """The scan table, inbox, inbox --all and show (text, parent, title, author, summary) print the
    escapes as visible text: no window-title change, no cleared screen, no fake all-clear line."""
    source = str(_hostile_export(tmp_path / "export.json"))
    scan = run_main("cli", "scan", "--source", source, data_dir=data_dir, env=OFFLINE)
    assert scan.returncode == 0, scan.stderr
    wide = {**OFFLINE, "COLUMNS": "1000"}  # each escape sequence on one line, to be found whole
    views = [scan] + [run_main("cli", *args, data_dir=data_dir, env=wide)
                      for args in (("inbox",), ("inbox", "--all"), ("show", "evil1"), ("show", "par1"),
                                   ("status",))]
    for proc in views:
        assert proc.returncode == 0, (proc.args, proc.stderr)
        assert unsafe(proc.stdout + proc.stderr) == [], proc.args
    shown = views[3].stdout
    assert "\\x1b]0;entity-title\\x07" in shown  # the entity, decoded, then made visible
    assert "eve\\x1b]0;pwned\\x07" in shown and "Caching \\x1b]0;pwned" in shown
    assert "\\u202egnp.exe" in shown and "\\x9b31m" in shown and "over\\rwrite" in shown
    assert "\\x1b[1A\\x1b[2KNothing needs a reply." in views[1].stdout


def test_json_output_is_the_exact_data_with_no_raw_control_character(tmp_path: Path, data_dir: Path) -> None:
    """--json and the bridge envelope: JSON escapes carry every character, and it decodes unchanged."""
    source = str(_hostile_export(tmp_path / "export.json"))
    assert run_main("cli", "scan", "--source", source, data_dir=data_dir, env=OFFLINE).returncode == 0
    for entry, args in (("cli", ("show", "evil1", "--json")), ("bridge", ("show", "evil1")),
                        ("cli", ("inbox", "--all", "--json")), ("bridge", ("inbox", "--all"))):
        proc = run_main(entry, *args, data_dir=data_dir, env=OFFLINE)
        assert proc.returncode == 0, proc.stderr
        assert unsafe_in_json(proc.stdout) == [], (entry, args)
    doc = json.loads(run_main("bridge", "show", "evil1", data_dir=data_dir, env=OFFLINE).stdout)["result"]
    assert doc["comment"]["author"] == f"eve{HOSTILE}" and doc["comment"]["article_title"] == f"Caching {HOSTILE}"


def test_mcp_text_content_resources_and_prompt_carry_no_raw_escape(tmp_path: Path, data_dir: Path) -> None:
    """What an agent client shows its user: each tool's text block, the resources, the prompt."""
    source = str(_hostile_export(tmp_path / "export.json"))
    assert run_main("cli", "scan", "--source", source, data_dir=data_dir, env=OFFLINE).returncode == 0

    async def scenario() -> None:
        async with memory_session(data_dir) as session:
            texts = []
            for name, arguments in (("show", {"id": "evil1"}), ("inbox", {"all": True}), ("status", {})):
                result = await session.call_tool(name, arguments)
                assert result.content and result.content[0].type == "text"
                texts.append(result.content[0].text)
                assert unsafe_in_json(result.content[0].text) == [], name
                assert json.loads(result.content[0].text) == result.structured_content
            for uri in ("watcher://comment/evil1", "watcher://inbox"):
                contents = (await session.read_resource(uri)).contents
                for part in contents:
                    assert unsafe_in_json(getattr(part, "text", "")) == [], uri
            prompt = await session.get_prompt("reply-session", {"id": f"evil1{HOSTILE}"})
            for message in prompt.messages:
                assert unsafe(getattr(message.content, "text", "")) == []
            assert json.loads(texts[0])["result"]["comment"]["author"] == f"eve{HOSTILE}"  # exact data

    anyio.run(scenario)
