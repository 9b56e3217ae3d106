"""Render the verdict prompt for one comment (SPEC §4.1).

The rendered :class:`~watcher.models.Prompt` is cached in the comment's inbox file and reused by
every later attempt, so rendering happens once and must be a pure function of the comment and
the template bytes. Comment and parent text are untrusted: each is fenced between marker lines
whose token occurs in no outside text of the prompt (comment, parent, title, author), so no
comment can close its own block, nor a parent carry the reply's markers, and continue as
"instructions" (see :func:`fence_token`).
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from watcher.models import Comment, Prompt

TEMPLATE_NAME = "verdict"
# Title and author are shown on one line each; capping them keeps a hostile title from
# flooding the prompt (the comment text itself is not cut: it is what we classify).
_TITLE_MAX = 300
_AUTHOR_MAX = 100
_PART_RE = re.compile(r"^<!-- part: (\w+) -->\n", re.MULTILINE)
_PLACEHOLDER_RE = re.compile(r"\{\{(\w+)\}\}")
# One fenced block of the rendered user text: label, token, content. Used by the offline
# provider, which only ever sees the cached prompt (see :func:`fenced_blocks`).
_BLOCK_RE = re.compile(
    r"^<<<(COMMENT|PARENT) ([0-9a-f]{16})\n(.*?)\n\1 \2>>>$", re.MULTILINE | re.DOTALL
)


@dataclass(frozen=True)
class Template:
    """The parsed template file: its parts and the sha256 of its exact bytes (``parts``: every
    part by name, those a template has beyond the verdict's three too)."""

    sha256: str
    system: str
    user: str
    parent: str
    parts: Mapping[str, str] = field(default_factory=dict)


def render(comment: Comment, *, parent_text: str | None = None) -> Prompt:
    """The exact system and user text for ``comment``; ``parent_text`` for replies.

    Raises :class:`FileNotFoundError` if the template cannot be found and :class:`ValueError`
    if it is malformed (a packaging bug, not a user error).
    """
    template = load_template()
    title = _one_line(comment.article_title, _TITLE_MAX)
    author = _one_line(comment.author, _AUTHOR_MAX)
    # Every outside text the prompt holds: a fence found in any of them could be faked by it. A
    # parent's author knows the reply's text (and so its first candidate token): checked against
    # the reply alone, the reply's fence could stand in the parent, markers and all.
    outside = (comment.text, title, author) + ((parent_text,) if parent_text is not None else ())
    parent = ""
    if parent_text is not None:
        parent = _fill(
            template.parent,
            parent_text=parent_text,
            parent_fence=fence_token(parent_text, *outside),
        )
        parent = parent.strip("\n") + "\n\n"
    user = _fill(
        template.user,
        article_title=title,
        comment_author=author,
        parent=parent,
        comment_text=comment.text,
        comment_fence=fence_token(comment.text, *outside),
    )
    return Prompt(
        template=TEMPLATE_NAME, template_sha256=template.sha256, system=template.system, user=user
    )


def fence_token(text: str, *others: str) -> str:
    """A 16-hex token derived from ``text`` (so rendering is pure) that occurs neither in ``text``
    nor in any of ``others`` (the prompt's other outside texts).

    The closing marker contains the token, so text without the token cannot close its block.
    Finding a text containing its own sha256 prefix is a preimage search, but *another* text may
    hold it on purpose (the first candidate is computable from the reply's text); each candidate
    found is skipped, and the loop ends since the texts hold finitely many. Derived from ``text``
    alone, the first candidate is the one the earlier rule chose, so a prompt whose texts do not
    hold it renders exactly as before.
    """
    counter = 0
    while True:
        token = hashlib.sha256(f"{counter}:{text}".encode("utf-8", "surrogatepass")).hexdigest()[
            :16
        ]
        if token not in text and not any(token in other for other in others):
            return token
        counter += 1


def fenced_blocks(user: str) -> dict[str, str]:
    """The fenced blocks of a rendered user prompt: ``{"COMMENT": text, "PARENT": text}``.

    Scans left to right: the first marker line is always a real one (the lines before it are
    template text and one-line fields), and a real block ends at its own closing line, which
    the text inside cannot contain; so fake blocks *inside* a comment are swallowed whole.
    """
    blocks: dict[str, str] = {}
    for match in _BLOCK_RE.finditer(user):
        blocks.setdefault(match.group(1), match.group(3))
    return blocks


@functools.cache
def load_template(name: str = TEMPLATE_NAME, *more_parts: str) -> Template:
    """The parsed template ``prompts/<name>.md``, read once per process (never at import time);
    ``more_parts``: the parts it must have besides system, user and parent."""
    data = _template_bytes(name)
    return _parse(data, sha256=hashlib.sha256(data).hexdigest(), name=name, more=more_parts)


def _template_bytes(name: str = TEMPLATE_NAME) -> bytes:
    # The wheel ships prompts/ as watcher/_bundled/prompts (pyproject force-include); a source
    # checkout or an editable install has it at the repository root instead.
    bundled = resources.files("watcher").joinpath("_bundled", "prompts", f"{name}.md")
    if bundled.is_file():
        return bundled.read_bytes()
    repo = Path(__file__).resolve().parents[2] / "prompts" / f"{name}.md"
    try:
        return repo.read_bytes()
    except FileNotFoundError:
        raise FileNotFoundError(
            f"prompt template {name}.md not found in the installed package or at {repo}; "
            "reinstall devto-watcher"
        ) from None


def _parse(
    data: bytes, *, sha256: str, name: str = TEMPLATE_NAME, more: tuple[str, ...] = ()
) -> Template:
    text = data.decode("utf-8").replace("\r\n", "\n")
    pieces = _PART_RE.split(text)
    # split() gives [preamble, name1, body1, name2, body2, ...]; the preamble is a note.
    parts = {part: body.strip("\n") for part, body in zip(pieces[1::2], pieces[2::2], strict=True)}
    missing = {"system", "user", "parent", *more} - set(parts)
    if missing:
        raise ValueError(f"prompt template {name}.md lacks part(s): {', '.join(sorted(missing))}")
    return Template(
        sha256=sha256,
        system=parts["system"],
        user=parts["user"],
        parent=parts["parent"],
        parts=parts,
    )


def _fill(text: str, **values: str) -> str:
    # One pass: a value that itself contains "{{comment_text}}" is inserted verbatim.
    def replace(match: re.Match[str]) -> str:
        try:
            return values[match.group(1)]
        except KeyError:
            raise ValueError(
                f"prompt template {TEMPLATE_NAME}.md: unknown placeholder {match.group(0)}"
            ) from None

    return _PLACEHOLDER_RE.sub(replace, text)


def _one_line(value: str, limit: int) -> str:
    # A newline in a title could start a line that looks like a fence marker; collapse it.
    flat = " ".join(value.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
