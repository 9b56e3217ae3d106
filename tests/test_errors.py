"""The error hierarchy and its one mapping to exit codes (SPEC §9)."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import watcher
from watcher import errors
from watcher.errors import (
    CooldownActive,
    CorruptState,
    LockBusy,
    NewerSchema,
    SaveFailed,
    WatcherError,
    error_kind,
    exit_code_for,
    exit_code_legend,
)

# SPEC §9: 0 ok · 1 internal · 2 usage/config · 3 provider or dev.to stop · 4 lock busy · 5 state.
DOCUMENTED = {
    "WatcherError": 1,
    "UsageError": 2,
    "ConfigError": 2,
    "ProviderSetup": 2,
    "SubmitRefused": 2,
    "ProviderStop": 3,
    "RateLimited": 3,
    "QuotaExhausted": 3,
    "CooldownActive": 3,
    "ProviderUnavailable": 3,
    "SourceUnavailable": 3,
    "BudgetReached": 3,
    "LockBusy": 4,
    "StateError": 5,
    "CorruptState": 5,
    "NewerSchema": 5,
    "SaveFailed": 5,
    "UnsafePath": 5,
    "LogReplaced": 5,
    "SaveConflict": 5,
    "Interrupted": 130,
    "Cancelled": 130,
}


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_all_subclasses(sub)}
    return found


def _bare(cls: type[WatcherError]) -> WatcherError:
    return cls.__new__(cls)  # exit_code_for looks only at the type, not at constructor args


def test_every_error_class_in_errors_py_is_documented() -> None:
    """errors.py defines exactly the documented classes (a new one must be added to the table)."""
    here = {c.__name__ for c in {WatcherError, *_all_subclasses(WatcherError)} if c.__module__ == "watcher.errors"}
    assert here == set(DOCUMENTED)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_each_class_maps_to_its_documented_exit_code(name: str) -> None:
    """exit_code_for gives the SPEC §9 code for every class."""
    assert exit_code_for(_bare(getattr(errors, name))) == DOCUMENTED[name]


def test_every_subclass_anywhere_in_watcher_maps_like_its_errors_py_ancestor() -> None:
    """Subclasses defined in other modules inherit a documented code; none invents its own."""
    for info in pkgutil.walk_packages(watcher.__path__, "watcher."):
        if not info.name.endswith("__main__"):  # importing it would run the CLI
            importlib.import_module(info.name)
    for cls in _all_subclasses(WatcherError):
        ancestor = next(c for c in cls.__mro__ if c.__module__ == "watcher.errors")
        assert exit_code_for(_bare(cls)) == DOCUMENTED[ancestor.__name__], cls


def test_docstring_tree_names_every_class() -> None:
    """The module docstring draws the whole tree."""
    assert errors.__doc__ is not None
    for name in DOCUMENTED:
        assert name in errors.__doc__


def _drawn_parents() -> dict[str, str | None]:
    """Each class of the docstring tree with the class it is drawn under (None for the root)."""
    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    above: list[str] = []  # the chain of classes drawn above the current line, by depth
    for line in errors.__doc__.splitlines():
        drawn = re.match(r"^    ((?:[│ ]   |[├└]── )*)([A-Z]\w+) ", line)
        if drawn is None:
            continue
        depth = len(drawn.group(1)) // 4
        del above[depth:]
        parents[drawn.group(2)] = above[-1] if above else None
        above.append(drawn.group(2))
    return parents


def test_docstring_tree_draws_each_class_under_its_base() -> None:
    """The drawn tree is the class tree: each class hangs under the class it inherits from."""
    drawn = _drawn_parents()
    assert set(drawn) == set(DOCUMENTED)
    for name, parent in drawn.items():
        base = getattr(errors, name).__bases__[0]
        assert (base.__name__ if parent is not None else None) == parent, name


def test_a_dev_to_outage_is_not_a_provider_stop_and_config_is_not_usage() -> None:
    """Each branch holds only what its name says: catching one never catches another's errors."""
    assert not issubclass(errors.SourceUnavailable, errors.ProviderStop)
    assert not issubclass(errors.ConfigError, errors.UsageError)
    assert not issubclass(errors.ProviderSetup, (errors.ConfigError, errors.UsageError, errors.ProviderStop))


def test_kinds_are_unique_and_stable() -> None:
    """error.kind is a distinct machine-readable name per class."""
    kinds = [getattr(errors, name).kind for name in DOCUMENTED]
    assert len(kinds) == len(set(kinds))


@pytest.mark.parametrize("exc", [ValueError("x"), KeyError("k"), OSError(5, "io"), KeyboardInterrupt()])
def test_foreign_exceptions_are_internal_errors(exc: BaseException) -> None:
    """Anything not ours exits 1 with kind internal."""
    assert (exit_code_for(exc), error_kind(exc)) == (1, "internal")


def test_messages_carry_the_context_a_user_needs(tmp_path: Path) -> None:
    """Each error names the file, the wait, or the time to come back."""
    path = tmp_path / "locks" / "pipeline.lock"
    assert str(LockBusy(path, 5.0)) == f"pipeline lock busy: another watcher run holds {path} (waited 5.0 s)"
    assert str(LockBusy(tmp_path / "seen.lock", 15.0, what="a mark")).startswith("seen lock busy: a mark holds")
    cool = CooldownActive("2026-05-14T10:00:00Z", "rate_limited")
    assert "provider cooldown until 2026-05-14T10:00:00Z" in str(cool) and cool.until == "2026-05-14T10:00:00Z"
    corrupt = CorruptState(tmp_path / "seen.json", tmp_path / "quarantine" / "seen.json.x", "not valid JSON")
    assert all(s in str(corrupt) for s in ("seen.json", "quarantine", "not valid JSON"))
    assert "left in place" in str(CorruptState(tmp_path / "seen.json", None, "cannot be read"))
    assert "schema_version 7" in str(NewerSchema(tmp_path / "seen.json", 7, 1))
    failed = SaveFailed(tmp_path / "seen.json", OSError(28, "No space left on device"))
    assert "seen.json" in str(failed) and "No space left" in str(failed)


def test_exit_code_table_covers_every_exit_constant() -> None:
    """EXIT_CODES has exactly one entry per EXIT_* constant, each with a meaning."""
    constants = {v for name, v in vars(errors).items() if name.startswith("EXIT_") and isinstance(v, int)}
    assert set(errors.EXIT_CODES) == constants == {*range(6), 130, 143}
    assert all(meaning.strip() for meaning in errors.EXIT_CODES.values())


def test_every_error_class_exits_with_a_code_in_the_table() -> None:
    """No exception class (here or elsewhere in watcher) exits with a code the legend lacks."""
    for info in pkgutil.walk_packages(watcher.__path__, "watcher."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    for cls in {WatcherError, *_all_subclasses(WatcherError)}:
        assert cls.exit_code in errors.EXIT_CODES, cls


def test_exit_code_legend_lists_codes_in_order_with_the_separator() -> None:
    """The rendered legend is every code, ascending, joined by the separator given."""
    assert exit_code_legend().startswith("0 ran, item errors in the summary · 1 internal error · 2 ")
    lines = exit_code_legend("\n").splitlines()
    assert [int(line.split()[0]) for line in lines] == sorted(errors.EXIT_CODES)
