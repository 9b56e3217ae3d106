"""What eval returns: how good the verdicts are (SPEC §15.6)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from watcher.commands.results._base import (
    _absent_if_none,
    _Result,
)
from watcher.models import (
    Category,
    TriageBy,
)

# ---- eval: how good the verdicts are (SPEC §15.6) ------------------------------------------------


Figure = Annotated[
    float | None, Field(description="0–1, three decimals; null when nothing to divide by.")
]


class Confusion(_Result):
    """The verdicts' ``needs_reply`` against what the author did, one count per pairing."""

    true_positive: int = Field(
        description="Said it needs a reply; the author replied (or marked it replied)."
    )
    false_positive: int = Field(description="Said it needs a reply; the author marked it ignored.")
    false_negative: int = Field(
        description="Said no reply needed; the author replied (or marked it replied)."
    )
    true_negative: int = Field(description="Said no reply needed; the author marked it ignored.")


class Disagreement(_Result):
    """A comment whose verdict the author's action contradicts: the ones to look at."""

    id: str
    said_needs_reply: bool
    author: Literal["replied", "ignored"] = Field(
        description="What the author did: replied (on dev.to or by "
        "`mark replied`) or marked it ignored."
    )
    by: TriageBy | None = Field(
        description="devto: the reply was seen on dev.to · person: `watcher mark`."
    )
    category: Category
    summary: str
    kind: str | None = _absent_if_none(
        "The labelled set's kind of comment (question, spam, …); --set only."
    )


class EvalGroup(_Result):
    """The figures of one provider, model and prompt version (the template's sha256, first 12)."""

    provider: str
    model: str
    prompt: str = Field(
        description="The prompt template's version: the first 12 hex digits of its sha256."
    )
    judged: int = Field(description="Comments with a verdict and a label from the author.")
    unlabelled: int = Field(
        description="Comments with a verdict the author has neither replied to nor marked "
        "(or, edited, only before that verdict): counted, not guessed."
    )
    agreement: Figure
    precision: Figure = Field(
        description="Of the comments it said need a reply, the share that did."
    )
    recall: Figure = Field(
        description="Of the comments that needed a reply, the share it said need one."
    )
    confusion: Confusion
    disagreements: list[Disagreement] = Field(
        description="Every judged comment where verdict and author differ."
    )


class KindFigures(_Result):
    judged: int
    agreed: int


class SetFigures(_Result):
    """Figures on (part of) the set: a fixed answer's, or the judge's on the held-out comments."""

    judged: int
    agreement: Figure
    precision: Figure
    recall: Figure


class LabelledSetRun(_Result):
    """``watcher eval --set``: the labelled set, judged in a data dir of its own."""

    path: str = Field(description="The set's directory (export.json and labels.json).")
    comments: int
    needs_reply: int = Field(description="Comments the set labels as needing a reply.")
    provider: str
    model: str
    calls: int = Field(
        description="Model calls made for this evaluation (the offline classifier's cost nothing)."
    )
    call_budget: int | None = Field(
        description="--provider-calls: the most calls this evaluation could make."
    )
    data_dir: str | None = Field(
        description="The evaluation's own data dir (--eval-dir), or null: a temporary "
        "one, removed afterwards."
    )
    always_yes: SetFigures = Field(
        description="Figures of a verdict that always says 'needs a reply'."
    )
    always_no: SetFigures = Field(
        description="Figures of a verdict that always says 'no reply needed'."
    )
    held_out: SetFigures | None = Field(
        description="The judge's figures on the comments written after the offline "
        "classifier was last tuned (labels.json held_out), else null."
    )
    by_kind: dict[str, KindFigures] = Field(
        description="Judged and agreed per kind of comment in the set."
    )


class EvalResult(_Result):
    # The docstring is the model's description in the eval tool's output schema: one line, as
    # clients have it (tests/test_mcp_results.py).
    """``watcher eval``: stored verdicts against what the author did (SPEC §15.6). Free: no call, no write."""  # noqa: E501

    since: str | None = Field(
        description="Only comments created on or after this time (--since), else null."
    )
    comments: int = Field(description="Comments considered (after --since).")
    judged: int
    unlabelled: int = Field(
        description="With a verdict, without a label from the author: not guessed."
    )
    without_verdict: int = Field(
        description="No verdict to judge (pending, failed, exhausted, baseline, answered)."
    )
    groups: list[EvalGroup] = Field(
        description="Per provider, model and prompt version; most judged first."
    )
    labelled_set: LabelledSetRun | None = _absent_if_none("--set only: the labelled set's run.")
