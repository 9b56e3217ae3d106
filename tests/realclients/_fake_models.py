"""A scripted fake model on 127.0.0.1 that speaks both clients' wire formats.

- Codex, with a custom ``[model_providers.X]`` and ``wire_api = "responses"``: ``POST
  /v1/responses``, answered as the OpenAI Responses API streams it (``response.created``,
  ``response.output_item.done``, ``response.completed`` as server-sent events). Codex offers a
  server's MCP tools as one ``{"type": "namespace", "name": "mcp__<server>", "description":
  <the server's instructions>, "tools": [...]}`` entry, and a call names the namespace.
- Claude Code, with ``ANTHROPIC_BASE_URL``: ``POST /v1/messages``, answered as the Anthropic
  Messages API streams it (``message_start`` … ``message_stop``). Its MCP tools are plain tools
  named ``mcp__<server>__<tool>``.

The script is a list of tool calls, one per model turn, then a final text. Which step a request
is at is read from the request itself: the number of results for this fake's own calls (their
ids start with ``wcall``) that the conversation already holds. So a client's retries and side
requests (a title, a summary: requests without the watcher tools) never advance the script.
Every request and every tool result the client sent back is recorded for the tests to read.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _fakes.provider import serving

CALL_PREFIX = "wcall"
WATCHER_TOOLS = frozenset(
    {
        "scan",
        "recheck",
        "status",
        "inbox",
        "show",
        "articles",
        "mark",
        "signals",
        "check",
        "claim",
        "submit",
        "eval",
        "usage",
    }
)


@dataclass(frozen=True)
class Result:
    """A tool result as the client handed it back to the model."""

    step: int
    tool: str  # the name the model called (the client's spelling)
    text: str  # what the model reads, as the client rendered it
    is_error: bool | None
    raw: Any  # the client's whole item (Codex ``function_call_output``, Claude ``tool_result``)
    at: float  # time.monotonic() when the request carrying it arrived

    def envelope(self) -> dict[str, Any]:
        """The watcher envelope inside the text (Codex puts ``Wall time: …`` / ``Output:`` before it)."""
        text = (
            self.text.split("\nOutput:\n", 1)[1]
            if self.text.startswith("Wall time: ")
            else self.text
        )
        doc = json.loads(text)
        if isinstance(doc, dict) and "exit_code" in doc:
            return doc
        raise AssertionError(f"no envelope in the {self.tool} result: {self.text[:300]}")


Args = dict[str, Any] | Callable[[list[Result]], dict[str, Any]]


@dataclass
class Call:
    """One model turn: call a tool. ``tool`` is a watcher tool name, a client tool name, or
    ``server.tool``; ``pause_s`` delays this turn's answer (the session stays alive meanwhile)."""

    tool: str
    args: Args = field(default_factory=dict)
    pause_s: float = 0.0


@dataclass
class Final:
    text: str = "done"
    pause_s: float = 0.0


@dataclass
class Turn:
    """One request the client made, as this fake saw it."""

    wire: str  # "responses" or "messages"
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    main: bool  # carried the watcher tools (a main-loop turn)
    step: int | None = None  # the script step it was answered with


class FakeModel:
    """Answers each request from :attr:`script`; records :attr:`turns` and :attr:`results`."""

    def __init__(self, server_name: str = "watcher") -> None:
        self.server_name = server_name
        self.script: list[Call | Final] = [Final()]
        self.turns: list[Turn] = []
        self.results: dict[int, Result] = {}
        self.errors: list[
            str
        ] = []  # a script step that raised: answered as a final text, kept here
        self._lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None

    # ---- test-facing ------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def main_turns(self) -> list[Turn]:
        return [t for t in self.turns if t.main]

    def first_turn(self) -> Turn:
        turns = [t for t in self.turns if t.wire == "responses" or _is_agent_loop(t.body)]
        assert turns, f"the client made no model request (requests: {len(self.turns)})"
        return turns[0]

    def result(self, step: int) -> Result:
        assert step in self.results, (
            f"the client never sent back the result of step {step} "
            f"({self.script[step]}); got {sorted(self.results)}; errors: {self.errors}"
        )
        return self.results[step]

    # ---- what a request holds ---------------------------------------------------------------

    def watcher_tools(self, turn: Turn) -> dict[str, dict[str, Any]]:
        """The watcher tools offered in ``turn``, by watcher name, as the client wrote them."""
        if turn.wire == "responses":
            for tool in turn.body.get("tools", []):
                if (
                    tool.get("type") == "namespace"
                    and tool.get("name") == f"mcp__{_codex_ns(self.server_name)}"
                ):
                    return {t["name"]: t for t in tool.get("tools", [])}
            return {}
        prefix = f"mcp__{self.server_name}__"
        return {
            t["name"][len(prefix) :]: t
            for t in turn.body.get("tools", [])
            if t.get("name", "").startswith(prefix)
        }

    def namespace(self, turn: Turn) -> dict[str, Any] | None:
        """Codex: the namespace entry of the watcher server (its description is the instructions)."""
        for tool in turn.body.get("tools", []):
            if (
                tool.get("type") == "namespace"
                and tool.get("name") == f"mcp__{_codex_ns(self.server_name)}"
            ):
                return dict(tool)
        return None

    def request_text(self, turn: Turn) -> str:
        """Every piece of text the request carries (system, messages, tool descriptions)."""
        return json.dumps(turn.body, ensure_ascii=False)

    # ---- the server side --------------------------------------------------------------------

    def handle(
        self, path: str, headers: dict[str, str], body: dict[str, Any]
    ) -> tuple[int, str, bytes]:
        wire = "responses" if path.rstrip("/").endswith("/responses") else "messages"
        if wire == "messages" and "count_tokens" in path:
            return 200, "application/json", json.dumps({"input_tokens": 100}).encode()
        now = time.monotonic()
        turn = Turn(wire, body, headers, now, main=False)
        with self._lock:
            self.turns.append(turn)
            # Claude Code's main loop is a main turn even before the watcher tools are in it: the
            # newest release defers them behind a ToolSearch call the script makes.
            turn.main = bool(self.watcher_tools(turn)) or (
                wire == "messages" and _is_agent_loop(body)
            )
            results = self._collect(turn, now)
            step = len(results) if turn.main or results else None
            turn.step = step
        if step is None:
            return 200, "text/event-stream", _stream(wire, [("text", "ok")], body)
        action = self.script[step] if step < len(self.script) else Final()
        if action.pause_s:
            time.sleep(action.pause_s)
        if isinstance(action, Final):
            return 200, "text/event-stream", _stream(wire, [("text", action.text)], body)
        try:
            args = (
                action.args([results[k] for k in sorted(results)])
                if callable(action.args)
                else action.args
            )
        except (
            AssertionError,
            LookupError,
            TypeError,
            ValueError,
        ) as exc:  # the script's own check: end, say why
            self.errors.append(f"step {step}: {type(exc).__name__}: {exc}")
            return (
                200,
                "text/event-stream",
                _stream(wire, [("text", f"fake model error: {exc}")], body),
            )
        name = self._client_name(turn, action.tool)
        return (
            200,
            "text/event-stream",
            _stream(wire, [("call", (f"{CALL_PREFIX}{step}", name, args))], body),
        )

    def _client_name(self, turn: Turn, tool: str) -> tuple[str | None, str]:
        """(namespace, name) the client expects for ``tool``."""
        server, _, name = tool.rpartition(".") if "." in tool else (self.server_name, "", tool)
        if name not in WATCHER_TOOLS and "." not in tool:
            return None, name  # a client's own tool (read_mcp_resource, WaitForMcpServers, …)
        if turn.wire == "responses":
            return f"mcp__{_codex_ns(server)}", name
        return None, f"mcp__{server}__{name}"

    def _collect(self, turn: Turn, now: float) -> dict[int, Result]:
        """The results of this fake's calls that ``turn`` carries, by step; new ones are recorded."""
        found: dict[int, Result] = {}
        for item, call_id, name, text, is_error in _tool_results(turn):
            match = re.fullmatch(rf"{CALL_PREFIX}(\d+)", call_id)
            if not match:
                continue
            step = int(match.group(1))
            found[step] = self.results.get(step) or Result(step, name, text, is_error, item, now)
            self.results.setdefault(step, found[step])
        return found


def _codex_ns(server: str) -> str:
    # Codex's tool namespaces must match ^[a-zA-Z0-9_-]+$ on the wire, and it turns '-' into '_'.
    return server.replace("-", "_")


def _is_agent_loop(body: dict[str, Any]) -> bool:
    """Claude Code's main loop: the request that offers its own tools (Bash, Read, …)."""
    return any(t.get("name") in ("Bash", "Read") for t in body.get("tools", []))


def _tool_results(turn: Turn) -> Iterator[tuple[Any, str, str, str, bool | None]]:
    """(item, call id, tool name, text, is_error) of every tool result in the request."""
    if turn.wire == "responses":
        names = {
            i.get("call_id"): i.get("name")
            for i in turn.body.get("input", [])
            if i.get("type") == "function_call"
        }
        for item in turn.body.get("input", []):
            if item.get("type") == "function_call_output":
                output = item.get("output")
                text = output if isinstance(output, str) else _joined(output)
                yield (
                    item,
                    str(item.get("call_id")),
                    str(names.get(item.get("call_id"))),
                    text,
                    None,
                )
        return
    names = {}
    for message in turn.body.get("messages", []):
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                names[block.get("id")] = block.get("name")
            if block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else _joined(inner)
                yield (
                    block,
                    str(block.get("tool_use_id")),
                    str(names.get(block.get("tool_use_id"))),
                    text,
                    bool(block.get("is_error", False)),
                )


def _joined(parts: Any) -> str:
    if not isinstance(parts, list):
        return json.dumps(parts)
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


# ---- the two wire formats -----------------------------------------------------------------------


def _stream(wire: str, outputs: list[tuple[str, Any]], request: dict[str, Any]) -> bytes:
    return (
        _responses(outputs)
        if wire == "responses"
        else _messages(outputs, str(request.get("model", "fake")))
    )


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {kind}\ndata: {json.dumps(doc)}\n\n" for kind, doc in events).encode()


def _responses(outputs: list[tuple[str, Any]]) -> bytes:
    rid = f"resp_{time.monotonic_ns()}"
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {"id": rid}})
    ]
    for kind, value in outputs:
        if kind == "text":
            item: dict[str, Any] = {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{rid}",
                "content": [{"type": "output_text", "text": value}],
            }
        else:
            call_id, (namespace, name), args = value
            item = {
                "type": "function_call",
                "call_id": call_id,
                "name": name,
                "arguments": json.dumps(args),
            }
            if namespace:
                item["namespace"] = namespace
        events.append(
            ("response.output_item.done", {"type": "response.output_item.done", "item": item})
        )
    usage = {
        "input_tokens": 100,
        "input_tokens_details": None,
        "output_tokens": 10,
        "output_tokens_details": None,
        "total_tokens": 110,
    }
    events.append(
        (
            "response.completed",
            {"type": "response.completed", "response": {"id": rid, "usage": usage}},
        )
    )
    return _sse(events)


def _messages(outputs: list[tuple[str, Any]], model: str) -> bytes:
    mid = f"msg_{time.monotonic_ns()}"
    start = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 0},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    stop = "end_turn"
    for index, (kind, value) in enumerate(outputs):
        if kind == "text":
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {"type": "text", "text": ""},
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": value},
                    },
                ),
            ]
        else:
            call_id, (_, name), args = value
            stop = "tool_use"
            events += [
                (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": index,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"{call_id}",
                            "name": name,
                            "input": {},
                        },
                    },
                ),
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(args)},
                    },
                ),
            ]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events += [
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return _sse(events)


# ---- HTTP -----------------------------------------------------------------------------------------


def _handler(fake: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # the name is http.server API
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else {}
            except ValueError:
                body = {}
            status, kind, payload = fake.handle(
                self.path, {k.lower(): v for k, v in self.headers.items()}, body
            )
            self._answer(status, kind, payload)

        def do_GET(self) -> None:  # the name is http.server API
            # Model lists: an empty list, so neither client learns anything it would act on.
            self._answer(
                200, "application/json", json.dumps({"object": "list", "data": []}).encode()
            )

        def _answer(self, status: int, kind: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def running_model(server_name: str = "watcher") -> Iterator[FakeModel]:
    fake = FakeModel(server_name)
    with serving(_handler(fake)) as server:
        fake.server = server
        yield fake
