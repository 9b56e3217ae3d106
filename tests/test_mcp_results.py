"""SPEC §10: each tool's output schema types its ``result``, and what the tools really return fits it.

The schema and the output both come from the command's model (watcher/commands/results.py), but down two
paths: pydantic's JSON schema of the model, and its serializer (the batch summary's key order and
dry-run keys are a custom one). So every real structured result (successes, a batch stopped by the
provider, usage errors) is validated against the schema the server advertises, and against a
*closed* copy of it (every ``additionalProperties: true`` made false): the advertised schema stays
open so a client never rejects a result (watcher.commands.results._advertised says why), and the closed
copy is where output and schema disagreeing is caught. The envelopes pinned in tests/golden (grant
and demo among them, which are no tools) are checked against the closed copies too.

The sessions run against the real server built in this process, over the SDK's in-memory transport:
the schemas and results are the server's, whatever process serves them.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _fakes.provider import FakeProvider, running_fake
from _proc import write_export
from jsonschema.validators import validator_for
from mcp import ClientSession
from test_mcp_server import TOOLS, doc, run_memory_session

from watcher.commands.registry import RESULTS, envelope_schema

GOLDEN = Path(__file__).parent / "golden"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with running_fake() as provider:
        yield provider


def closed(schema: Any) -> Any:
    """``schema`` with every open object closed: no key outside its ``properties``."""
    schema = copy.deepcopy(schema)

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("additionalProperties") is True:
                node["additionalProperties"] = False
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


class Checked:
    """Calls tools and validates each structured result against its tool's advertised schema."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.schemas: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, list[dict[str, Any]]] = {}

    async def load(self) -> None:
        for tool in (await self.session.list_tools()).tools:
            assert tool.output_schema is not None, tool.name
            self.schemas[tool.name] = tool.output_schema

    async def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = doc(await self.session.call_tool(name, arguments))
        for schema in (self.schemas[name], closed(self.schemas[name])):
            validator = validator_for(schema)(schema)
            errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(envelope)]
            assert not errors, (name, arguments, errors[:5])
        self.seen.setdefault(name, []).append(envelope)
        return envelope


def _golden_envelopes() -> list[tuple[str, dict[str, Any]]]:
    """Every JSON envelope the golden transcripts pin, with the step that printed it (a resource
    is a bare result, not an envelope; the human tables are no JSON)."""
    found = []
    for path in sorted(GOLDEN.glob("*.txt")):
        for part in ("\n" + path.read_text()).split("\n=== ")[1:]:
            title, _, body = part.partition("\n")
            if body.startswith("{") and not title.startswith("resource "):
                found.append((f"{path.stem}: {title}", json.loads(body)))
    return found


def test_every_printed_envelope_fits_its_commands_closed_schema() -> None:
    """Each --json, bridge and MCP envelope in tests/golden validates against the closed schema
    generated for its command, and every command with a result model is among them."""
    seen: set[str] = set()
    for step, envelope in _golden_envelopes():
        command = envelope["command"]
        if command not in RESULTS:  # a usage error before any command was chosen
            assert envelope["result"] is None, step
            continue
        schema = closed(envelope_schema(command))
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
                  for e in validator_for(schema)(schema).iter_errors(envelope)]
        assert not errors, (step, errors[:5])
        if envelope["result"] is not None:
            seen.add(command)
    assert seen == set(RESULTS)


@pytest.mark.slow
def test_every_output_schema_types_its_result(data_dir: Path) -> None:
    """No tool's result is `{}`: each is an object schema with required keys, or null."""
    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, tool in tools.items():
            schema = tool.output_schema or {}
            assert set(schema["required"]) == {"ok", "command", "exit_code", "result", "error"}, name
            result = schema["properties"]["result"]
            typed = [a for a in result["anyOf"] if a != {"type": "null"}]
            ref = typed[0]["$ref"].rsplit("/", 1)[1]
            assert schema["$defs"][ref]["required"], name
            assert schema["$defs"][ref]["properties"], name

    run_memory_session(data_dir, scenario)


@pytest.mark.slow
def test_every_tool_result_fits_its_advertised_schema(data_dir: Path, tmp_path: Path) -> None:
    """scan (real and dry), recheck, status, inbox (both), show (both), mark, signals, eval, check and
    usage errors: each real envelope validates against its schema, open and closed."""
    export = write_export(tmp_path / "export.json", ["one", "two", "three"])

    async def scenario(session: ClientSession) -> None:
        checked = Checked(session)
        await checked.load()
        await checked.call("scan", {"dry_run": True, "source": str(export)})
        scan = await checked.call("scan", {"limit": 2, "source": str(export)})
        assert scan["result"]["items"][0]["verdict"]["summary"]
        await checked.call("recheck", {})
        await checked.call("recheck", {"dry_run": True, "ids": ["one"]})
        await checked.call("status", {})
        await checked.call("inbox", {})
        await checked.call("inbox", {"all": True})
        await checked.call("show", {"id": "one"})
        await checked.call("show", {"id": "one", "prompt": True})
        await checked.call("draft", {"id": "one"})
        await checked.call("mark", {"id": "one", "triage": "replied"})
        evaluated = await checked.call("eval", {})
        assert evaluated["result"]["judged"] == 1  # "one", marked replied just now
        await checked.call("mark", {"id": "one", "triage": "open", "more_ids": ["two"]})
        await checked.call("articles", {})
        await checked.call("signals", {})
        await checked.call("usage", {})
        await checked.call("inbox", {"priority": "high", "article": 1201})
        check = await checked.call("check", {})
        assert check["result"]["checks"]
        for name, arguments in [("scan", {"limit": 0}), ("show", {"id": "nosuch"}), ("mark", {"id": "A!"}),
                                ("recheck", {"ids": ["nosuch"]}), ("claim", {}),  # claim/submit: not agent mode
                                ("submit", {"id": "one", "n": 1, "verdict": {}}), ("eval", {"since": "soon"}),
                                ("draft", {"id": "nosuch"})]:
            bad = await checked.call(name, arguments)
            assert (bad["exit_code"], bad["result"]) == (2, None)
        assert set(checked.seen) == TOOLS

    run_memory_session(data_dir, scenario)


@pytest.mark.slow
@pytest.mark.parametrize(("answer", "exit_code", "stopped", "shown"), [
    ("429:600", 3, "rate_limited", "cooldown"),
    ("401", 2, "auth", "breaker"),
])
def test_a_stopped_batch_and_the_status_after_it_fit_their_schemas(
        data_dir: Path, tmp_path: Path, fake: FakeProvider, answer: str, exit_code: int, stopped: str,
        shown: str) -> None:
    """A 429 (cooldown) or a 401 (breaker) stops the scan: the summary it keeps, the status that
    shows the cooldown or the breaker, and the recheck refused by it all fit their schemas."""
    fake.script("one", answer)
    export = write_export(tmp_path / "export.json", ["one", "two"])

    async def scenario(session: ClientSession) -> None:
        checked = Checked(session)
        await checked.load()
        scan = await checked.call("scan", {"source": str(export)})
        assert (scan["exit_code"], scan["result"]["stopped"]) == (exit_code, stopped)
        assert [i["outcome"] for i in scan["result"]["items"]] == ["error", "not_started"]
        status = (await checked.call("status", {}))["result"]
        assert status[shown] is not None
        await checked.call("recheck", {})

    run_memory_session(data_dir, scenario, env=fake.env())
