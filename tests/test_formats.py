"""SPEC §4, §15.5: every state file says which format it is in, and a release never quarantines a
file because a newer release wrote it.

The first release's models forbid unknown fields and unknown values, so a file that holds anything
they do not know (``triage_by``, a ``baseline`` state, ``tail_start``…) would be quarantined by it,
dropping the user's marks; it refuses a ``schema_version`` above 1 untouched instead (exit 5). So
every file whose format grew since the first release is written as version 2, and this release reads
1 and 2. ``tests/golden/formats.json`` pins each file's shape (every field path and every value a
``Literal`` allows) and version: the first release's shapes are frozen there (read from its models at
the commit it names); this release's are what the models say now (``FORMATS_GOLDEN_WRITE=1``
rewrites them, after the version was decided). The real first release runs beside this one in
``tests/test_cross_version.py``.
"""

from __future__ import annotations

import json
import os
import types
import typing
from pathlib import Path

import pytest
from _fakes.records import entry, record
from _proc import run_main, write_export
from pydantic import BaseModel

from watcher.config import Paths
from watcher.errors import NewerSchema
from watcher.models import CronState, InboxRecord, ProviderState, SeenFile, SignalCursor, SignalState
from watcher.state.tokens import TokenTally
from watcher.store.files import FileStore

GOLDEN = Path(__file__).parent / "golden" / "formats.json"
WRITE = os.environ.get("FORMATS_GOLDEN_WRITE") == "1"
FILES: dict[str, type[BaseModel]] = {
    "inbox/<id>.json": InboxRecord,
    "seen.json": SeenFile,
    "provider.json": ProviderState,
    "signals/state.json": SignalState,
    "signals/cursor.json": SignalCursor,
    "cron.json": CronState,
    "tokens.json": TokenTally,
}


def shape(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field path of ``model`` (``attempts[].error.kind``), and each ``Literal``'s values as
    ``path=value``: what a reader that forbids the unknown must know to read any file of it."""
    found: set[str] = set()
    for name, field in model.model_fields.items():
        found |= _walk(field.annotation, prefix + name)
    return found


def _walk(annotation: object, path: str) -> set[str]:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return shape(annotation, path + ".")
    if origin is typing.Literal:
        return {f"{path}={value}" for value in args}
    if origin is list:
        return _walk(args[0], path + "[]")
    if origin is dict:
        return _walk(args[1], path + "{}")
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_walk(a, path) for a in args if a is not type(None)))
    return {path}


def version_of(model: type[BaseModel]) -> int:
    """The version this release writes the model's file in."""
    return int(getattr(model, "SCHEMA_VERSION", None) or model.model_fields["schema_version"].default)


def _golden() -> dict[str, typing.Any]:
    return typing.cast(dict[str, typing.Any], json.loads(GOLDEN.read_text(encoding="utf-8")))


def _now() -> dict[str, dict[str, object]]:
    return {name: {"schema_version": version_of(model), "shape": sorted(shape(model))} for name, model in FILES.items()}


def test_each_state_files_format_and_version_are_pinned() -> None:
    """What the models accept and the version they write are tests/golden/formats.json's: a model
    that changed must say whether an older release can still read it (its version) first."""
    golden = _golden()
    if WRITE:
        golden["this_release"] = _now()
        GOLDEN.write_text(json.dumps(golden, indent=1) + "\n", encoding="utf-8")
    assert _now() == golden["this_release"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_whose_format_grew_since_the_first_release_is_version_2(name: str) -> None:
    """Grown (the first release would quarantine what it cannot read) → 2; unchanged → still 1;
    nothing the first release knew is gone (this release reads version 1 files)."""
    known = _golden()["first_release"]["files"].get(name)
    now = shape(FILES[name])
    version = version_of(FILES[name])
    if known is None:  # a file the first release never opens (cron.json): its first format is 1
        assert version == 1, f"{name} is new since the first release: version 1"
        return
    first = set(known)
    assert first <= now, f"{name} lost {sorted(first - now)}: version 1 files would no longer be read"
    # seen.json is 3 since the state forgotten (SPEC §16.3): a version 2 reader refuses it too.
    assert (version == 1) == (now == first), f"{name}: grew by {sorted(now - first)}, version {version}"


def _versions_on_disk(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): json.loads(p.read_bytes())["schema_version"]
            for p in sorted(root.rglob("*.json"))}


def test_what_this_release_writes_says_its_version(paths: Paths) -> None:
    """inbox and provider.json are written as 3, seen.json and signals/state.json as 2; the cursor,
    whose format never changed, as 1 (the first release still reads it)."""
    store = FileStore(paths)
    store.save_record(record("abc1"))
    store.save_index(SeenFile(), SeenFile(comments={"abc1": entry()}))
    store.save_provider_state(ProviderState(reason="rate_limited"))
    store.append_signals([{"key": "verdict.ok", "run": "r1", "entrypoint": "cli"}])
    store.count_signals()
    assert _versions_on_disk(paths.root) == {"inbox/abc1.json": 3, "seen.json": 3, "provider.json": 3,
                                             "signals/state.json": 2, "signals/cursor.json": 1}


def _as_version_1(root: Path) -> dict[str, bytes]:
    """Rewrite every state file as the releases before this one wrote them: version 1, with the
    fields they added (triage_by, tail_start…) in it."""
    for path in root.rglob("*.json"):
        doc = json.loads(path.read_bytes())
        path.write_text(json.dumps({**doc, "schema_version": 1}, indent=1) + "\n", encoding="utf-8")
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_version_1_files_are_read_and_a_read_never_rewrites_them(data_dir: Path, tmp_path: Path) -> None:
    """status, inbox, show, signals and a dry run read version 1 files and change no byte; the
    first write of a file (a mark: seen.json) writes it as 2 and leaves the others as they were."""
    export = write_export(tmp_path / "export.json", ["a1", "a2"])
    env = {"WATCHER_PROVIDER": "offline"}
    assert run_main("cli", "scan", "--source", str(export), data_dir=data_dir, env=env).returncode == 0
    assert run_main("cli", "mark", "a1", "replied", data_dir=data_dir, env=env).returncode == 0
    assert run_main("cli", "signals", data_dir=data_dir, env=env).returncode == 0
    before = _as_version_1(data_dir)
    assert b'"triage_by"' in (data_dir / "seen.json").read_bytes()
    for args in (["status"], ["inbox", "--all"], ["show", "a1"], ["signals"],
                 ["scan", "--source", str(export), "--dry-run"]):
        done = run_main("cli", *args, data_dir=data_dir, env=env)
        assert done.returncode == 0, (args, done.stderr)
    after = {str(p): p.read_bytes() for p in sorted(data_dir.rglob("*")) if p.is_file()}
    assert {k: v for k, v in after.items() if "/locks/" not in k} == {k: v for k, v in before.items()
                                                                       if "/locks/" not in k}
    assert run_main("cli", "mark", "a2", "ignored", data_dir=data_dir, env=env).returncode == 0
    versions = _versions_on_disk(data_dir)
    assert versions.pop("seen.json") == version_of(SeenFile)
    assert set(versions.values()) == {1}


NEWER = {name: version_of(model) + 1 for name, model in FILES.items()}


def _load(paths: Paths, name: str) -> object:
    store = FileStore(paths)
    loaders = {"inbox/<id>.json": lambda: store.load_record("abc1"), "seen.json": store.load_index,
               "provider.json": store.load_provider_state, "signals/state.json": store.read_signal_state,
               "signals/cursor.json": lambda: _count(store), "cron.json": store.load_cron_state,
               "tokens.json": store.load_token_tally}
    return loaders[name]()


def _count(store: FileStore) -> object:
    store.append_signals([{"key": "verdict.ok", "run": "r1", "entrypoint": "cli"}])  # the cursor is read with a log
    return store.count_signals()


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_version_newer_than_this_release_knows_is_refused_untouched(paths: Paths, name: str) -> None:
    """NewerSchema (exit 5) saying a newer devto-watcher wrote it; the file keeps every byte and
    nothing goes to quarantine — so no mark is ever dropped by running an older release."""
    path = paths.root / name.replace("<id>", "abc1")
    path.parent.mkdir(parents=True, exist_ok=True)
    content = json.dumps({"schema_version": NEWER[name], "from_the_future": True}).encode()
    path.write_bytes(content)
    with pytest.raises(NewerSchema) as info:
        _load(paths, name)
    assert "written by a newer devto-watcher" in str(info.value), str(info.value)
    assert f"schema_version {NEWER[name]}" in str(info.value)
    assert path.read_bytes() == content
    assert not paths.quarantine.exists() or list(paths.quarantine.iterdir()) == []
