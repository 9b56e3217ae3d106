"""Anthropic Messages API (SPEC §6): ``POST {base}/v1/messages``, ``anthropic-version: 2023-06-01``.

Why the verdict schema travels as a forced tool (``tools`` + ``tool_choice: {"type": "tool"}``)
rather than as text in the system prompt: on the stable API version, forced tool use is the
documented way to make Claude answer with a JSON object shaped by a given JSON schema, with no
beta header and on every current model, and it leaves no prose around the object to strip. The
tool's ``input`` is serialised back to JSON text and goes through the same parser and schema
validation as every other provider (the API does not enforce ``enum`` or required fields
strictly, so validation stays ours). A compatible server that ignores tools and answers in text
still works: the text is parsed instead.
"""

from __future__ import annotations

import json
from typing import Any

from watcher.models import Prompt
from watcher.providers._http import MAX_OUTPUT_TOKENS, Answer, HttpProvider
from watcher.providers.parse import verdict_json_schema

# Still accepted (checked 2026-12-01 against Anthropic's versioning page): 2026-10-21 is the newest
# and "recommended", not required, and no end of 2023-06-01 is announced. Its breaking changes
# (temperature/top_p/top_k removed, document and citation blocks refused in some places) touch
# nothing this request sends; CHANGELOG.md (0.2.0) says why the header stays until a date is set.
ANTHROPIC_VERSION = "2023-06-01"
TOOL_NAME = "record_verdict"
# Stop reasons that mean the answer was cut short rather than finished.
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})


# The constant part of every request, built once (see openai.py): shared, never edited.
_TOOLS: list[dict[str, Any]] = [
    {
        "name": TOOL_NAME,
        "description": (
            "Record the verdict for the comment: the JSON object described in the instructions."
        ),
        "input_schema": verdict_json_schema(),
    }
]
_TOOL_CHOICE: dict[str, Any] = {"type": "tool", "name": TOOL_NAME}


class AnthropicProvider(HttpProvider):
    name = "anthropic"
    path = "/v1/messages"
    usage_keys = ("input_tokens", "output_tokens")

    def auth_headers(self, secret: str) -> dict[str, str]:
        return {"x-api-key": secret, "anthropic-version": ANTHROPIC_VERSION}

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "model": self.model,
            "max_tokens": MAX_OUTPUT_TOKENS,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
            "tools": _TOOLS,
            "tool_choice": _TOOL_CHOICE,
        }

    def text_request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        """Free text (a reply draft, SPEC §16.5): no tool, its own output cap."""
        return {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        }

    def extract(self, data: dict[str, Any]) -> Answer:
        content = data.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        stop = data.get("stop_reason")
        text = _tool_input(blocks)
        if text is None:
            texts = [
                b["text"]
                for b in blocks
                if b.get("type") == "text" and isinstance(b.get("text"), str)
            ]
            text = "".join(texts) if texts else None
        if stop in _TRUNCATED:
            return Answer(text, stop="length", note=f"stop_reason {stop}")
        if stop == "refusal":
            return Answer(None, stop="refusal", note="stop_reason refusal")
        return Answer(text, note="the response has no record_verdict tool call and no text")


def _tool_input(blocks: list[dict[str, Any]]) -> str | None:
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == TOOL_NAME:
            # Re-serialised so the one parser decides (an input that is not an object is
            # malformed_json there, exactly as for text answers).
            return json.dumps(block.get("input"), ensure_ascii=False)
    return None
