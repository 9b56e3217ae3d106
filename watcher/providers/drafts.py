"""A reply draft's prompt and its one call (SPEC §16.5).

    render_draft(comment, parent_text=, examples=) -> Prompt   prompts/draft.md, filled
    call_draft(provider, prompt) -> TextResult                  one free-text call, never raises
    offline_draft(record) -> str                                the offline provider's template

The comment and its parent are fenced as in the verdict prompt, by the same code
(:func:`watcher.providers.prompts.fence_token`, the same marker lines), and so is each of the
author's earlier replies: every fence token occurs in none of the prompt's outside texts, so no
comment, parent or example can close its own block and go on as instructions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from watcher.models import AttemptError, Comment, InboxRecord, Prompt
from watcher.providers import prompts
from watcher.providers.base import Provider, TextResult

TEMPLATE_NAME = "draft"
_PARTS = ("examples", "example")
# A short reply is well under 200 tokens; the rest is room for a reasoning model's thinking. Half
# the verdict's ceiling (watcher/providers/_http.py): a draft is one of 3 per comment, on request.
DRAFT_MAX_TOKENS = 1024
MAX_EXAMPLES = 5


@runtime_checkable
class Drafter(Protocol):
    """A provider that can answer in free text (the HTTP providers)."""

    def complete_text(self, prompt: Prompt, *, max_tokens: int) -> TextResult: ...


def render_draft(
    comment: Comment, *, parent_text: str | None = None, examples: Sequence[str] = ()
) -> Prompt:
    """The draft prompt for ``comment``: its parent's text (``None``: not a reply) and at most
    :data:`MAX_EXAMPLES` of the author's earlier replies, each fenced."""
    template = prompts.load_template(TEMPLATE_NAME, *_PARTS)
    title = prompts._one_line(comment.article_title, prompts._TITLE_MAX)
    author = prompts._one_line(comment.author, prompts._AUTHOR_MAX)
    examples = list(examples)[:MAX_EXAMPLES]
    # Every outside text: a fence token found in any of them could be faked by it (prompts.render).
    outside = (comment.text, title, author, *examples) + (
        (parent_text,) if parent_text is not None else ()
    )
    parent = ""
    if parent_text is not None:
        parent = prompts._fill(
            template.parent,
            parent_text=parent_text,
            parent_fence=prompts.fence_token(parent_text, *outside),
        )
        parent = parent.strip("\n") + "\n\n"
    shown = ""
    if examples:
        blocks = [
            prompts._fill(
                template.parts["example"],
                example_text=text,
                example_fence=prompts.fence_token(text, *outside),
            )
            for text in examples
        ]
        shown = "\n".join([template.parts["examples"], *blocks]) + "\n\n"
    user = prompts._fill(
        template.user,
        article_title=title,
        comment_author=author,
        examples=shown,
        parent=parent,
        comment_text=comment.text,
        comment_fence=prompts.fence_token(comment.text, *outside),
    )
    return Prompt(
        template=TEMPLATE_NAME, template_sha256=template.sha256, system=template.system, user=user
    )


def call_draft(provider: Provider, prompt: Prompt) -> TextResult:
    """The provider's one free-text call. It never raises: anything unexpected becomes the draft's
    error, as an attempt's does (:func:`watcher.pipeline.calls._complete`)."""
    if not isinstance(provider, Drafter):
        message = f"provider {provider.name} cannot write a free-text draft"
        return TextResult(error=AttemptError(kind="bad_request", message=message))
    try:
        return provider.complete_text(prompt, max_tokens=DRAFT_MAX_TOKENS)
    except Exception as exc:  # noqa: BLE001 - the call's boundary: anything becomes the draft's error
        return TextResult(
            error=AttemptError(
                kind="network",
                message=f"the call failed inside watcher: {type(exc).__name__}: {exc}",
            )
        )


def offline_draft(record: InboxRecord) -> str:
    """The offline provider's draft: a template around the verdict's ``reply_hint`` (no model
    wrote it; the result says so), with ``[…]`` where the author writes the reply itself."""
    hint = " ".join(record.verdict.reply_hint.split()) if record.verdict is not None else ""
    body = f"[… {hint} …]" if hint else "[… your answer …]"
    return f"Hi @{record.comment.author}, thanks for your comment!\n\n{body}"
