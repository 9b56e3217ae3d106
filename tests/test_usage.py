"""SPEC §16.4: ``watcher usage`` totals what the provider reported, per provider and model, per
day and month, from the attempts' recorded usage; dollars where WATCHER_PRICES prices the model.

The fake provider reports 100 input and 20 output tokens for every answer it gives (a malformed
one too) and none with a 500.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _fakes.provider import running_fake
from _proc import run_main, write_export

from watcher.commands.usage import parse_prices


def _usage(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    answer = run_main("cli", "usage", *args, "--json", data_dir=data_dir, env=env)
    assert answer.returncode == 0, answer.stderr
    result: dict[str, Any] = json.loads(answer.stdout)["result"]
    return result


def _seeded(tmp_path: Path, data_dir: Path) -> None:
    """Four calls to the fake model (two verdicts, a malformed answer, a 500) and two offline."""
    with running_fake() as fake:
        fake.script("bad", "malformed")
        fake.script("err", "500")
        source = write_export(tmp_path / "a.json", ["ok1", "ok2", "bad", "err"])
        scan = run_main("cli", "scan", "--source", str(source), data_dir=data_dir, env=fake.env())
        assert scan.returncode == 0, scan.stderr
    offline = write_export(tmp_path / "b.json", ["off1", "off2"], article_id=99)
    scan = run_main("cli", "scan", "--source", str(offline), data_dir=data_dir,
                    env={"WATCHER_PROVIDER": "offline"})
    assert scan.returncode == 0, scan.stderr


def test_usage_totals_what_the_provider_reported_per_model(tmp_path: Path, data_dir: Path) -> None:
    """fake-model: 4 calls, 300 in and 60 out, one without usage; offline: 2 calls, no tokens."""
    _seeded(tmp_path, data_dir)
    result = _usage(data_dir)
    models = {(m["provider"], m["model"]): m for m in result["models"]}
    fake = models[("openai", "fake-model")]
    assert (fake["calls"], fake["input_tokens"], fake["output_tokens"], fake["without_usage"]) == (
        4, 300, 60, 1)
    offline = models[("offline", "heuristic-v2")]
    assert (offline["calls"], offline["input_tokens"], offline["without_usage"]) == (2, 0, 2)
    assert [d["models"] for d in result["days"]] == [result["models"]]  # all on one day


def test_prices_give_dollars_for_the_priced_model_only(tmp_path: Path, data_dir: Path) -> None:
    """fake-model=1/2 per million: 300 in and 60 out cost $0.00042; offline stays unpriced."""
    _seeded(tmp_path, data_dir)
    result = _usage(data_dir, env={"WATCHER_PRICES": "fake-model=1/2"})
    dollars = {m["model"]: m["dollars"] for m in result["models"]}
    assert dollars == {"fake-model": 0.00042, "heuristic-v2": None}
    assert result["dollars"] == 0.00042


def test_another_month_has_no_calls_and_a_bad_month_is_refused(data_dir: Path) -> None:
    """--month 2000-01 lists nothing; --month 2026-13 is exit 2."""
    assert _usage(data_dir, "--month", "2000-01")["models"] == []
    bad = run_main("cli", "usage", "--month", "2026-13", data_dir=data_dir)
    assert bad.returncode == 2 and "YYYY-MM" in bad.stderr


def test_a_malformed_price_is_a_configuration_error_naming_it() -> None:
    """WATCHER_PRICES entries are model=IN/OUT; anything else names the entry."""
    assert parse_prices("a=0.15/0.60, b-c=1/2") == {"a": (0.15, 0.6), "b-c": (1.0, 2.0)}
    for bad in ("a=1", "=1/2", "a=x/2", "a=-1/2"):
        try:
            parse_prices(bad)
        except Exception as exc:  # noqa: BLE001 - the kind is checked below
            assert type(exc).__name__ == "ConfigError" and bad.split()[0] in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")


def test_status_gives_this_months_line(tmp_path: Path, data_dir: Path) -> None:
    """status --json holds the month's per-model totals usage gives; its view a line per model."""
    _seeded(tmp_path, data_dir)
    status = run_main("cli", "status", "--json", data_dir=data_dir)
    assert json.loads(status.stdout)["result"]["this_month"] == _usage(data_dir)["models"]
    shown = run_main("cli", "status", data_dir=data_dir).stdout
    assert "month:     openai fake-model: 4 call(s), 300 in, 60 out" in shown


def _drafted(data_dir: Path, *ids: str, env: dict[str, str]) -> None:
    for cid in ids:
        answer = run_main("cli", "draft", cid, data_dir=data_dir, env=env)
        assert answer.returncode == 0, answer.stderr


def test_drafts_are_calls_of_their_model_counted_apart(tmp_path: Path, data_dir: Path) -> None:
    """Two fake-model drafts (100 in, 20 out each) and one offline draft join the seeded calls:
    fake-model 6 calls, 500 in, 100 out, 2 of them drafts; the view says so within 80 columns."""
    _seeded(tmp_path, data_dir)
    with running_fake() as fake:
        _drafted(data_dir, "ok1", "ok2", env=fake.env())
    _drafted(data_dir, "off1", env={"WATCHER_PROVIDER": "offline"})
    models = {(m["provider"], m["model"]): m for m in _usage(data_dir)["models"]}
    fake_model, offline = models[("openai", "fake-model")], models[("offline", "heuristic-v2")]
    assert (fake_model["calls"], fake_model["input_tokens"], fake_model["output_tokens"]) == (6, 500, 100)
    assert (fake_model["drafts"], fake_model["without_usage"]) == (2, 1)
    assert (offline["calls"], offline["drafts"], offline["without_usage"]) == (3, 1, 3)
    shown = run_main("cli", "usage", data_dir=data_dir, env={"COLUMNS": "80"}).stdout
    assert "6 call(s) (2 draft(s), 1 without usage recorded)" in " ".join(shown.split())
    assert max(len(line) for line in shown.splitlines()) <= 80


def test_a_draft_of_a_comment_without_attempts_is_counted(tmp_path: Path, data_dir: Path) -> None:
    """A comment recorded without a verdict call (provider agent) and then drafted: usage counts
    the draft's call and tokens."""
    source = write_export(tmp_path / "a.json", ["q1"])
    scan = run_main("cli", "scan", "--source", str(source), data_dir=data_dir,
                    env={"WATCHER_PROVIDER": "agent"})
    assert scan.returncode == 0, scan.stderr
    with running_fake() as fake:
        _drafted(data_dir, "q1", env=fake.env())
    (model,) = _usage(data_dir)["models"]
    assert (model["calls"], model["drafts"], model["input_tokens"], model["output_tokens"]) == (
        1, 1, 100, 20)


def test_the_offline_classifiers_calls_are_said_to_spend_no_tokens(
    tmp_path: Path, data_dir: Path
) -> None:
    """The offline classifier is no model: its line says it spends no tokens, not that its
    calls' usage went unrecorded (what a call whose tokens are unknown is said to be)."""
    _seeded(tmp_path, data_dir)
    shown = run_main("cli", "usage", data_dir=data_dir)
    lines = [line for line in shown.stdout.splitlines() if line.strip().startswith("offline")]
    assert lines and all("no tokens (offline)" in line for line in lines), shown.stdout
    assert not any("without usage recorded" in line for line in lines)
