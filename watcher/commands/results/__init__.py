"""What every command returns (SPEC §9, §10): one pydantic model per result.

The pipeline and :mod:`watcher.commands.core` build these; :mod:`watcher.cli.render` reads them for
a person; :mod:`watcher.commands.envelope` dumps them for ``--json`` and the bridge, and generates
each MCP tool's output schema from them. Nested parts that are a file format (a verdict, an attempt,
a comment, a breaker) are the file format's own model from :mod:`watcher.models`.

Cheap to import (pydantic and the file formats; no rich, no httpx, no MCP SDK): every run loads it.
"""

from __future__ import annotations

from watcher.commands.results._base import (
    ItemOutcome,
    ResultT,
    RunKind,
    _advertised,
)

# Result: the base a command's own result model extends (closed, built on first use).
from watcher.commands.results._base import _Result as Result
from watcher.commands.results.batch import (
    BatchResult,
    BatchSignals,
    Claimed,
    ClaimResult,
    ItemResult,
    ItemVerdict,
    JsonSchemaDocument,
    Rejected,
    SubmitResult,
)
from watcher.commands.results.evaluation import (
    Confusion,
    Disagreement,
    EvalGroup,
    EvalResult,
    Figure,
    KindFigures,
    LabelledSetRun,
    SetFigures,
)
from watcher.commands.results.reading import (
    AgentClaims,
    ArticleRow,
    ArticlesResult,
    CheckResult,
    CheckRow,
    CommentRecord,
    Cooldown,
    CronNamed,
    CronProblemResult,
    CronResult,
    DemoResult,
    GrantResult,
    InboxEntry,
    InboxResult,
    MarkResult,
    ModelUsage,
    NotifyStatus,
    Parent,
    PublicSettings,
    SignalsResult,
    StatusPaths,
    StatusResult,
    StatusSignals,
    TokenBudget,
)

__all__ = [
    "AgentClaims",
    "ArticleRow",
    "ArticlesResult",
    "BatchResult",
    "BatchSignals",
    "CheckResult",
    "CheckRow",
    "ClaimResult",
    "Claimed",
    "CommentRecord",
    "Confusion",
    "Cooldown",
    "CronNamed",
    "CronProblemResult",
    "CronResult",
    "DemoResult",
    "Disagreement",
    "EvalGroup",
    "EvalResult",
    "Figure",
    "GrantResult",
    "InboxEntry",
    "InboxResult",
    "ItemOutcome",
    "ItemResult",
    "ItemVerdict",
    "JsonSchemaDocument",
    "KindFigures",
    "LabelledSetRun",
    "MarkResult",
    "ModelUsage",
    "NotifyStatus",
    "Parent",
    "PublicSettings",
    "Rejected",
    "Result",
    "ResultT",
    "RunKind",
    "SetFigures",
    "SignalsResult",
    "StatusPaths",
    "StatusResult",
    "StatusSignals",
    "SubmitResult",
    "TokenBudget",
    "_advertised",
]
