"""How good are the verdicts? Stored verdicts against what the author did (SPEC §15.6).

The author labels comments without meaning to: replying on dev.to (seen by ``scan``) or ``watcher
mark ID replied`` says a comment needed a reply; ``watcher mark ID ignored`` says it did not;
``open`` (or no mark) says nothing, and such a comment is counted, never guessed. Figures are per
provider, model and prompt version, since a new model or a changed template is a different judge.

Free and read-only: it reads the inbox files and the index, reconciles the index in memory (a
read view that repaired it would write), and calls no model. :func:`figures` is the pure part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from watcher.commands.results import Confusion, Disagreement, EvalGroup, EvalResult
from watcher.models import Attempt, Category, InboxRecord, SeenComment, TriageBy
from watcher.store import Store
from watcher.util.timeutil import parse_iso

PROMPT_DIGITS = 12


@dataclass(frozen=True)
class Sample:
    """One comment's latest verdict and the author's label for it (``needed`` None: no label)."""

    id: str
    provider: str
    model: str
    prompt: str
    said: bool
    needed: bool | None
    by: TriageBy | None
    category: Category
    summary: str


def label_of(entry: SeenComment | None) -> tuple[bool | None, TriageBy | None]:
    """What the author's action says: replied → needed a reply, ignored → did not, open → nothing.

    A reply seen on dev.to that the person reopened with ``mark open`` is ``open`` here: the
    latest of the author's actions wins (SPEC §15.2)."""
    if entry is None or entry.triage == "open":
        return None, None
    return entry.triage == "replied", entry.triage_by


def label_at(entry: SeenComment) -> str | None:
    """When the author's action behind the label was taken: the person's last mark, or the latest
    reply seen on dev.to (``None`` where an older index did not record it)."""
    if entry.triage_by == "person":
        return entry.triage_at
    return entry.last_reply_at or entry.replied_at


def sample_of(record: InboxRecord, entry: SeenComment | None) -> Sample | None:
    """The comment as eval judges it; ``None`` when it has no verdict to judge.

    An edited comment is judged by its latest verdict — the one in force, for the text the author
    last saw (``verdict``; the earlier ones are in ``edits``) — against a label given after it. With
    no verdict in force (the new text awaits its attempt, or has none left) it has none to judge: an
    older text's verdict says nothing about what the author answered since (SPEC §15.2, §15.6)."""
    verdict = record.verdict
    if verdict is None:
        return None
    judge = next((a for a in reversed(record.attempts) if a.outcome == "ok"), None)
    needed, by = label_of(entry)
    if (
        needed is not None
        and record.edits
        and entry is not None
        and _before(label_at(entry), judge)
    ):
        needed, by = (
            None,
            None,
        )  # labelled only before this verdict, for an earlier text: not guessed
    return Sample(
        id=record.comment.id,
        provider=judge.provider if judge else "unknown",
        model=judge.model if judge else "unknown",
        prompt=record.prompt.template_sha256[:PROMPT_DIGITS],
        said=verdict.needs_reply,
        needed=needed,
        by=by,
        category=verdict.category,
        summary=verdict.summary,
    )


def collect(store: Store, *, since: datetime | None = None) -> tuple[list[Sample], int, int]:
    """Every comment's sample, and how many were considered and had no verdict. Reads only."""
    base = store.load_index()
    index, _ = store.reconcile_index(base)  # in memory only: eval saves nothing (SPEC §15.6)
    samples: list[Sample] = []
    considered = without = 0
    for cid in store.record_ids():
        record = store.load_record(cid)
        entry = index.comments.get(cid)
        if (
            record is None
            or (entry is not None and entry.status == "forgotten")  # out of every view (§16.3)
            or (since is not None and _created(record) < since)
        ):
            continue
        considered += 1
        sample = sample_of(record, entry)
        if sample is None:
            without += 1
        else:
            samples.append(sample)
    return samples, considered, without


def _before(label: str | None, judge: Attempt | None) -> bool:
    if label is None or judge is None or judge.finished_at is None:
        return False  # no time to compare (an older index): the label stands
    try:
        return parse_iso(label) < parse_iso(judge.finished_at)
    except ValueError:
        return False


def _created(record: InboxRecord) -> datetime:
    try:
        return parse_iso(record.comment.created_at)
    except ValueError:
        return datetime.max.replace(tzinfo=UTC)  # unreadable: kept, as scan --since keeps it


def figures(
    samples: Iterable[Sample],
    *,
    considered: int,
    without_verdict: int,
    since: str | None = None,
    kinds: Mapping[str, str] | None = None,
) -> EvalResult:
    """The figures per provider, model and prompt version; ``kinds``: the labelled set's kind per
    id."""
    groups: dict[tuple[str, str, str], list[Sample]] = {}
    for sample in samples:
        groups.setdefault((sample.provider, sample.model, sample.prompt), []).append(sample)
    built = [_group(key, members, kinds or {}) for key, members in groups.items()]
    built.sort(key=lambda g: (-g.judged, -g.unlabelled, g.provider, g.model, g.prompt))
    return EvalResult(
        since=since,
        comments=considered,
        judged=sum(g.judged for g in built),
        unlabelled=sum(g.unlabelled for g in built),
        without_verdict=without_verdict,
        groups=built,
    )


def _group(key: tuple[str, str, str], members: list[Sample], kinds: Mapping[str, str]) -> EvalGroup:
    labelled = [s for s in members if s.needed is not None]
    tp = sum(1 for s in labelled if s.said and s.needed)
    fp = sum(1 for s in labelled if s.said and not s.needed)
    fn = sum(1 for s in labelled if not s.said and s.needed)
    tn = len(labelled) - tp - fp - fn
    disagreements = [
        Disagreement(
            id=s.id,
            said_needs_reply=s.said,
            author="replied" if s.needed else "ignored",
            by=s.by,
            category=s.category,
            summary=s.summary,
            kind=kinds.get(s.id),
        )
        for s in sorted(labelled, key=lambda s: s.id)
        if s.said != s.needed
    ]
    provider, model, prompt = key
    return EvalGroup(
        provider=provider,
        model=model,
        prompt=prompt,
        judged=len(labelled),
        unlabelled=len(members) - len(labelled),
        agreement=ratio(tp + tn, len(labelled)),
        precision=ratio(tp, tp + fp),
        recall=ratio(tp, tp + fn),
        confusion=Confusion(
            true_positive=tp, false_positive=fp, false_negative=fn, true_negative=tn
        ),
        disagreements=disagreements,
    )


def ratio(part: int, whole: int) -> float | None:
    """``part / whole`` to three decimals; ``None`` when ``whole`` is 0 (no figure, not a zero)."""
    return round(part / whole, 3) if whole else None


def evaluate(
    store: Store,
    *,
    since: datetime | None = None,
    since_text: str | None = None,
    kinds: Mapping[str, str] | None = None,
) -> EvalResult:
    samples, considered, without = collect(store, since=since)
    return figures(
        samples, considered=considered, without_verdict=without, since=since_text, kinds=kinds
    )


__all__ = ["Sample", "collect", "evaluate", "figures", "label_of", "ratio", "sample_of"]
