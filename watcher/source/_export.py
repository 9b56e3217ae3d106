"""``--source FILE``: the same comments from a Forem-format export, and the bundled demo sample.

Export shape (SPEC §5): ``{"username": "<author>"?, "articles": [{"id", "title", "url",
"comments_count", "last_comment_at"?, "comments": [<the nested list /comments?a_id returns>]}]}``.
The optional ``username`` names the articles' author: their own comments are skipped, and their
direct replies are reported in ``author_replies`` as on dev.to. Comment permalinks point at the
host of each article's ``url`` (an export may come from any Forem).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from watcher.config import Settings
from watcher.errors import UsageError
from watcher.source._parse import Collector, parse_article
from watcher.source._types import FetchResult, Rejection


def read_export(path: Path, settings: Settings) -> FetchResult:
    """Every article and comment of an export; all its articles count as fetched.

    Raises :class:`UsageError` when the file as a whole is unusable (missing, unreadable, not
    JSON, wrong top-level shape); a bad article or comment inside it is a rejection instead.
    """
    data = _load(path)
    username = data.get("username")
    if username is not None and not isinstance(username, str):
        raise UsageError(
            f"{path}: top-level username must be a string, got {type(username).__name__}"
        )
    collector = Collector(include_own=settings.include_own_comments)
    for i, raw in enumerate(data["articles"]):
        parsed = parse_article(raw, where=f"article #{i + 1}")
        if isinstance(parsed, Rejection):
            collector.rejected.append(parsed)
            continue
        article, article_author = parsed
        if any(known.id == article.id for known in collector.articles):
            where = f"article {article.id}"
            collector.rejected.append(
                Rejection(
                    f"{where} appears twice in {path.name}; the later copy was skipped", where
                )
            )
            continue
        collector.articles.append(article)
        if "comments" not in raw:
            where = f"article {article.id}"
            collector.rejected.append(
                Rejection(f"{where}: missing field comments; its comments were skipped", where)
            )
            continue
        author = username or article_author or settings.devto_username
        if collector.add_thread(raw["comments"], article=article, author=author):
            collector.fetched.add(article.id)
    return collector.result()


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"source file {path} does not exist: give the path of a Forem-format export"
        ) from None
    except OSError as exc:
        raise UsageError(f"cannot read source file {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except (
        ValueError,
        RecursionError,
    ) as exc:  # UnicodeDecodeError is a ValueError; "[[[[…" recurses
        raise UsageError(f"source file {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("articles"), list):
        raise UsageError(
            f"source file {path} is not a Forem-format export: expected an object with an "
            '"articles" list ({"articles": [{"id", "title", "url", "comments_count", '
            '"comments": [...]}]})'
        )
    return data


def bundled_sample() -> Path:
    """The demo export shipped with watcher: in the wheel, else in the source tree.

    Raises :class:`UsageError` if neither is there (a broken install).
    """
    candidates = []
    try:
        bundled = resources.files("watcher") / "_bundled" / "sample" / "export.json"
        candidates.append(Path(str(bundled)))
    except (ModuleNotFoundError, TypeError):  # a zipped or unusual install: fall back to the tree
        pass
    candidates.append(Path(__file__).resolve().parents[2] / "data" / "sample" / "export.json")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(c) for c in candidates)
    raise UsageError(
        f"the bundled sample export is missing (looked in {looked}); reinstall devto-watcher"
    )
