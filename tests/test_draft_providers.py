"""The draft's one free-text call (SPEC §16.5) in each HTTP provider's wire format: no verdict
schema, a modest output cap, the answer's text as it is, classified and redacted like a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from _draft_data import a_prompt
from pydantic import SecretStr

from watcher.config import Settings
from watcher.providers import make_provider
from watcher.providers.drafts import DRAFT_MAX_TOKENS, call_draft

KEY = "sk-draft-test-0123456789abcdef"
ANSWERS = {
    "openai": lambda text, stop: {"choices": [{"message": {"role": "assistant", "content": text},
                                               "finish_reason": stop}],
                                  "usage": {"prompt_tokens": 50, "completion_tokens": 9}},
    "anthropic": lambda text, stop: {"content": [{"type": "text", "text": text}],
                                     "stop_reason": {"stop": "end_turn", "length": "max_tokens"}[stop],
                                     "usage": {"input_tokens": 50, "output_tokens": 9}},
}


def _draft(tmp_path: Path, provider: str, text: str, stop: str = "stop") -> tuple[Any, dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=ANSWERS[provider](text, stop))

    settings = Settings(data_dir=tmp_path, provider=provider, model="m", api_key=SecretStr(KEY), timeout=5.0,
                        base_url={"openai": "https://openai.invalid/v1", "anthropic": "https://anthropic.invalid"}[provider])
    made = make_provider(settings, transport=httpx.MockTransport(answer))
    try:
        return call_draft(made, a_prompt()), sent[0]
    finally:
        made.close()


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_draft_request_carries_no_verdict_schema_and_a_modest_cap(tmp_path: Path, provider: str) -> None:
    """The request asks for free text: no response format, no tool, at most 1024 tokens out; the
    answer's text comes back with its usage."""
    result, body = _draft(tmp_path, provider, "  Thanks! It works since […].\n")
    assert not {"response_format", "tools", "tool_choice"} & set(body)
    assert body.get("max_completion_tokens", body.get("max_tokens")) == DRAFT_MAX_TOKENS <= 1024
    assert result.text == "Thanks! It works since […]."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (50, 9)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_key_in_the_draft_is_redacted(tmp_path: Path, provider: str) -> None:
    """A model that repeats the key in its draft: the text comes back without it."""
    result, _body = _draft(tmp_path, provider, f"Use the key {KEY} here.")
    assert KEY not in result.text and "[redacted]" in result.text


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_draft_cut_at_the_cap_is_truncated_not_kept(tmp_path: Path, provider: str) -> None:
    """A draft the output cap cut off is the error truncated, as a verdict's would be."""
    result, _body = _draft(tmp_path, provider, "Thanks, and", stop="length")
    assert result.text is None and result.error.kind == "truncated"
