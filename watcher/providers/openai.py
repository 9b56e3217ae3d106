"""OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, llama.cpp (SPEC §6).

``POST {base}/chat/completions`` with ``response_format: json_schema`` (strict). Servers that
ignore structured output still get the field list in the system prompt, and whatever they
answer goes through the same parser and schema validation.
"""

from __future__ import annotations

from typing import Any

from watcher.models import Prompt
from watcher.providers._http import MAX_OUTPUT_TOKENS, Answer, HttpProvider
from watcher.providers.parse import verdict_json_schema

# The constant part of every request, built once and shared: request bodies are only
# serialised, never edited.
_RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "verdict", "strict": True, "schema": verdict_json_schema()},
}


class OpenAIProvider(HttpProvider):
    name = "openai"
    path = "/chat/completions"
    usage_keys = ("prompt_tokens", "completion_tokens")

    def auth_headers(self, secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    def request_body(self, prompt: Prompt) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "response_format": _RESPONSE_FORMAT,
            # max_completion_tokens, not the deprecated max_tokens: newer OpenAI models reject the
            # latter, and compatible servers that do not know it simply ignore it.
            "max_completion_tokens": MAX_OUTPUT_TOKENS,
        }

    def text_request_body(self, prompt: Prompt, max_tokens: int) -> dict[str, Any]:
        """Free text (a reply draft, SPEC §16.5): no response format, its own output cap."""
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "max_completion_tokens": max_tokens,
        }

    def extract(self, data: dict[str, Any]) -> Answer:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return Answer(None, note="the response has no choices")
        choice = choices[0]
        message: dict[str, Any] = (
            choice["message"] if isinstance(choice.get("message"), dict) else {}
        )
        finish = choice.get("finish_reason")
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal.strip():
            return Answer(None, stop="refusal", note=f"refusal: {refusal}")
        if finish == "length":
            return Answer(
                _content_text(message.get("content")), stop="length", note="finish_reason length"
            )
        if finish == "content_filter":
            return Answer(None, stop="content_filter", note="finish_reason content_filter")
        text = _content_text(message.get("content"))
        return Answer(text, note="the response has no choices[0].message.content")


def _content_text(content: object) -> str | None:
    if isinstance(content, str):
        return content
    # Some compatible servers send content as a list of {"type": "text", "text": …} parts.
    if isinstance(content, list):
        texts = [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
        return "".join(texts) if texts else None
    return None
