"""`watcher migrate` beyond the comments (SPEC §16.3): provider.json, cron.json and the signal log
merged so that nothing is lost, nothing is said twice and nothing is counted twice."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from _fakes import records as rec
from _proc import run_main

from watcher.commands.forget import sample_articles
from watcher.config import Paths
from watcher.models import Breaker, CronProblem, CronState, ProviderState, TransientFailure
from watcher.store.files import FileStore
from watcher.util.timeutil import iso, utcnow

NOW = utcnow()


def _at(hours: float) -> str:
    return iso(NOW + timedelta(hours=hours))


def _migrate(src: Path, data_dir: Path) -> dict[str, Any]:
    done = run_main("cli", "migrate", str(src), "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.envelope["result"]  # type: ignore[index,no-any-return]


def _store(root: Path, *ids: str) -> FileStore:
    root.mkdir(exist_ok=True)
    store = FileStore(Paths(root))
    for cid in ids:
        store.save_record(rec.record(cid))
    return store


def _breaker(since: str) -> Breaker:
    return Breaker(
        kind="unreachable",
        message="connection refused",
        since=since,
        provider="openai",
        model="fake-model",
        base_url="http://fake.invalid/v1",
    )


def test_the_stricter_provider_state_of_the_two_is_kept(tmp_path: Path, data_dir: Path) -> None:
    """The later cooldown, the open breaker, the longer run of 429s, the later transient failure
    and every comment spent in the outage survive; a rerun writes nothing more."""
    src = _store(tmp_path / "old", "a1")
    src.save_provider_state(
        ProviderState(
            cooldown_until=_at(5),
            reason="rate limited (429)",
            retry_after_s=5 * 3600,
            rate_limited_in_a_row=3,
            breaker=_breaker(_at(-1)),
            spent=["a1"],
            transient=TransientFailure(kind="timeout", at=_at(-0.5)),
        )
    )
    dst = _store(data_dir, "d1")
    dst.save_provider_state(
        ProviderState(
            cooldown_until=_at(1),
            reason="rate limited",
            rate_limited_in_a_row=1,
            spent=["d1"],
            transient=TransientFailure(kind="network", at=_at(-2)),
        )
    )
    _migrate(tmp_path / "old", data_dir)
    merged = FileStore(Paths(data_dir)).load_provider_state()
    assert merged.cooldown_until == _at(5) and merged.rate_limited_in_a_row == 3
    assert merged.breaker == _breaker(_at(-1)) and merged.spent == ["d1", "a1"]
    assert merged.transient == TransientFailure(kind="timeout", at=_at(-0.5))
    before = (data_dir / "provider.json").read_bytes()
    _migrate(tmp_path / "old", data_dir)
    assert (data_dir / "provider.json").read_bytes() == before


def test_the_data_dirs_later_cooldown_and_own_breaker_are_not_replaced(
    tmp_path: Path, data_dir: Path
) -> None:
    """A source whose cooldown ends sooner and whose breaker is older changes neither."""
    _store(tmp_path / "old", "a1").save_provider_state(
        ProviderState(cooldown_until=_at(1), reason="old", breaker=_breaker(_at(-48)))
    )
    mine = ProviderState(cooldown_until=_at(3), reason="new", breaker=_breaker(_at(-1)))
    _store(data_dir, "d1").save_provider_state(mine)
    _migrate(tmp_path / "old", data_dir)
    assert FileStore(Paths(data_dir)).load_provider_state() == mine


def test_what_the_sources_cron_said_is_not_said_again(tmp_path: Path, data_dir: Path) -> None:
    """Comments either cron named stay named (not the sample's), and a problem keeps the latest
    time it was said (SPEC §15.3: once, then at most daily)."""
    sample = "4cdz"  # a sample comment's id in the first release
    src = _store(tmp_path / "old", "x1")
    src.save_record(rec.record(sample, article_id=min(sample_articles())))
    said = CronProblem(line="provider unavailable", since=_at(-5), said_at=_at(-1))
    src.save_cron_state(
        CronState(
            problems={"provider_unavailable": said}, named=["x1", sample], named_failing=["x2"]
        )
    )
    older = CronProblem(line="provider unavailable", since=_at(-5), said_at=_at(-4))
    _store(data_dir, "d1").save_cron_state(
        CronState(problems={"provider_unavailable": older}, named=["d1"])
    )
    _migrate(tmp_path / "old", data_dir)
    merged = FileStore(Paths(data_dir)).load_cron_state()
    assert merged.named == ["d1", "x1"] and merged.named_failing == ["x2"]
    assert merged.problems == {"provider_unavailable": said}


def _log(root: Path, *lines: dict[str, Any] | str) -> None:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    with (root / "observations.jsonl").open("a") as log:
        log.write(text)


def _counts(data_dir: Path) -> dict[str, int]:
    done = run_main("cli", "signals", "--json", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.envelope["result"]["counts"]  # type: ignore[index,no-any-return]


def test_the_sources_signals_are_counted_once_beside_the_data_dirs(
    tmp_path: Path, data_dir: Path
) -> None:
    """The source's valid lines are added to the data dir's counts; a rerun adds nothing, and
    lines the source logged after the first migration are added by the next one."""
    old = tmp_path / "old"
    _store(old, "a1").save_record(rec.record("3bkf", article_id=min(sample_articles())))
    _log(old, {"key": "verdict.ok", "comment": "a1"}, "not json", {"key": "item.deferred"})
    _log(old, {"key": "verdict.ok", "comment": "3bkf"})  # a comment of the sample, left out
    _store(data_dir, "d1")
    _log(data_dir, {"key": "verdict.ok", "comment": "d1"})
    assert _counts(data_dir) == {"verdict.ok": 1}
    _migrate(old, data_dir)
    assert _counts(data_dir) == {"verdict.ok": 2, "item.deferred": 1}
    _migrate(old, data_dir)
    assert _counts(data_dir) == {"verdict.ok": 2, "item.deferred": 1}
    _log(old, {"key": "verdict.error.malformed_json", "comment": "a1"})
    _migrate(old, data_dir)
    assert _counts(data_dir) == {
        "verdict.ok": 2,
        "item.deferred": 1,
        "verdict.error.malformed_json": 1,
    }
