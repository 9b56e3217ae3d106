"""State that others touched (SPEC §13.5): special files at state paths, names that lie
about their content, ids with a trailing newline, unparsable provider.json, read-only data dirs.

A state path is never followed and never opened blocking: a symlink, FIFO, socket or empty
directory is quarantined itself (its target untouched); a directory with files in it, or an
unreachable path, is exit 5 naming the path, left in place. Nothing is written outside the
data dir.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from _fakes.clock import later
from _fakes.records import comment, record
from _proc import envelope, run, run_main, write_export

from watcher.state import records
from watcher.config import Paths, Settings
from watcher.errors import EXIT_STATE, EXIT_USAGE, CorruptState, SaveFailed, UnsafePath, exit_code_for
from watcher.models import COMMENT_ID_RE, Comment, ProviderState, SeenFile, SignalCursor, SignalState
from watcher.pipeline import provider_state
from watcher.providers.classify import MAX_RETRY_AFTER_S, retry_after_seconds
from watcher.source import read_export
from watcher.store import durable, locks, signals
from watcher.store.files import FileStore
from watcher.util.timeutil import iso, parse_iso, utcnow

OFFLINE = {"WATCHER_PROVIDER": "offline"}


def _cli(*args: str, data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run("cli", *args, data_dir=data_dir, env=OFFLINE, timeout=timeout)


def _main(*args: str, data_dir: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """:func:`_cli` through ``watcher``'s ``main`` in this process, failing (not hanging) past ``timeout``."""
    answer: list[subprocess.CompletedProcess[str]] = []
    caught = _within(timeout, lambda: answer.append(run_main("cli", *args, data_dir=data_dir, env=OFFLINE)))
    if caught is not None:
        raise caught
    return answer[0]


# ---- the state files and how each is read ------------------------------------------------------

Loader = Callable[[Paths], object]


def _load_provider(paths: Paths) -> object:
    return FileStore(Settings(data_dir=paths.root).paths).load_provider_state()


STATE_FILES: dict[str, tuple[Callable[[Paths], Path], Loader, str, bytes]] = {
    # name -> (path, loader, quarantine label, healthy bytes)
    "inbox": (lambda p: p.inbox_file("abc1"), lambda p: FileStore(p).load_record("abc1"), "inbox-abc1.json",
              record("abc1").model_dump_json().encode()),
    "seen": (lambda p: p.seen, lambda p: FileStore(p).load_index(), "seen.json", SeenFile().model_dump_json().encode()),
    "provider": (lambda p: p.provider_state, _load_provider, "provider.json",
                 ProviderState().model_dump_json().encode()),
    "signals-state": (lambda p: p.signals_state, signals.read_state, "state.json",
                      SignalState().model_dump_json().encode()),
    "signals-cursor": (lambda p: p.signals_cursor,
                       lambda p: durable.read_model(p.signals_cursor, SignalCursor, quarantine_dir=p.quarantine),
                       "cursor.json", SignalCursor().model_dump_json().encode()),
}


def _bind_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))  # the socket file stays after close


def _plant_outside_link(path: Path, good: bytes, outside: Path) -> None:
    outside.write_bytes(good)
    os.symlink(outside, path)


SPECIALS: dict[str, Callable[[Path, bytes, Path], None]] = {
    "symlink-loop": lambda path, good, outside: os.symlink(path.name, path),
    "symlink-outside": _plant_outside_link,
    "dangling-symlink": lambda path, good, outside: os.symlink(outside, path),
    "fifo": lambda path, good, outside: os.mkfifo(path),
    "socket": lambda path, good, outside: _bind_socket(path),
    "empty-dir": lambda path, good, outside: path.mkdir(),
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file outside the data dir that a planted link may point at."""
    where = tmp_path / "outside"
    where.mkdir()
    return where / "target.json"


def _within(seconds: float, fn: Callable[[], object]) -> BaseException | None:
    """Run ``fn`` in a thread; fail (instead of hanging the suite) if it blocks — a FIFO did."""
    caught: list[BaseException] = []

    def body() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            caught.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the read blocked for {seconds} s"
    return caught[0] if caught else None


@pytest.mark.parametrize("target", sorted(STATE_FILES))
@pytest.mark.parametrize("special", sorted(SPECIALS))
def test_a_special_file_at_a_state_path_is_quarantined_itself_never_read_through(
    paths: Paths, outside: Path, target: str, special: str
) -> None:
    """Symlink (loop, outside, dangling), FIFO, socket, empty dir: CorruptState at once, the thing itself moved."""
    where, load, label, good = STATE_FILES[target]
    path = where(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    SPECIALS[special](path, good, outside)
    planted = os.lstat(path)
    outside_before = outside.read_bytes() if outside.exists() else None
    caught = _within(10, lambda: load(paths))
    assert isinstance(caught, CorruptState), caught
    assert exit_code_for(caught) == EXIT_STATE
    moved = caught.moved_to
    assert moved is not None and moved.parent == paths.quarantine and moved.name.startswith(label + ".")
    assert str(path) in str(caught) and "not a regular file" in str(caught)
    assert not os.path.lexists(path)
    kept = os.lstat(moved)
    assert (kept.st_ino, stat.S_IFMT(kept.st_mode)) == (planted.st_ino, stat.S_IFMT(planted.st_mode))
    assert (outside.read_bytes() if outside.exists() else None) == outside_before  # target untouched


@pytest.mark.parametrize("target", sorted(STATE_FILES))
def test_a_directory_with_files_at_a_state_path_is_exit_5_naming_it_and_left_in_place(
    paths: Paths, target: str
) -> None:
    """A directory holding files is never moved: UnsafePath (exit 5) says what and where it is."""
    path = STATE_FILES[target][0](paths)
    (path / "keep").mkdir(parents=True)
    (path / "keep" / "notes.txt").write_text("mine")
    with pytest.raises(UnsafePath) as info:
        STATE_FILES[target][1](paths)
    assert exit_code_for(info.value) == EXIT_STATE
    message = str(info.value)
    assert str(path) in message and "a directory holding 1 entry" in message and "left it in place" in message
    assert (path / "keep" / "notes.txt").read_text() == "mine"
    assert not paths.quarantine.exists()


def test_an_unreachable_path_is_exit_5_naming_it(paths: Paths) -> None:
    """inbox/ as a symbolic link loop: listing and reading it say so (exit 5), not ELOOP as exit 1;
    a loop in a directory above a state file that is not watcher's own says it is a loop."""
    os.symlink("inbox", paths.inbox)
    with pytest.raises(UnsafePath) as listing:
        FileStore(paths).record_ids()
    assert str(paths.inbox) in str(listing.value)
    with pytest.raises(UnsafePath) as reading:
        FileStore(paths).load_record("abc1")
    assert str(paths.inbox) in str(reading.value) and "symbolic link" in str(reading.value)
    with pytest.raises(UnsafePath) as looping:
        durable.read_model(paths.inbox_file("abc1"), SeenFile, quarantine_dir=paths.quarantine)
    assert str(paths.inbox_file("abc1")) in str(looping.value) and "loop" in str(looping.value)


def test_a_planted_link_at_quarantine_is_refused_so_nothing_moves_out_of_the_data_dir(
    paths: Paths, tmp_path: Path
) -> None:
    """quarantine/ as a symlink to elsewhere: the corrupt file stays, exit 5, nothing lands outside."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, paths.quarantine)
    paths.seen.write_bytes(b"{not json")
    with pytest.raises(UnsafePath) as info:
        FileStore(paths).load_index()
    assert str(paths.quarantine) in str(info.value)
    assert list(elsewhere.iterdir()) == [] and paths.seen.read_bytes() == b"{not json"


# ---- writes never go through a link ------------------------------------------------------------


@pytest.mark.parametrize("name", ["seen.json", "provider.json", "inbox/abc1.json", "signals/state.json"])
def test_a_durable_write_replaces_a_symlink_and_never_writes_its_target(
    data_dir: Path, outside: Path, name: str
) -> None:
    """os.replace swaps the name: the link becomes our file, the outside target keeps its bytes."""
    outside.write_bytes(b"precious")
    path = data_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(outside, path)
    durable.write_json(path, {"schema_version": 1})
    assert outside.read_bytes() == b"precious"
    assert not path.is_symlink() and json.loads(path.read_bytes()) == {"schema_version": 1}


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_commands_never_write_outside_the_data_dir_through_planted_links(data_dir: Path, tmp_path: Path) -> None:
    """seen.json and provider.json linked outside: scan, recheck and status leave the outside untouched."""
    export = write_export(tmp_path / "e.json", ["a1", "a2"])
    assert _main("scan", "--source", str(export), "--json", data_dir=data_dir).returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("seen.json", "provider.json"):
        (elsewhere / name).write_bytes((data_dir / name).read_bytes() if (data_dir / name).exists()
                                       else ProviderState().model_dump_json().encode())
        (data_dir / name).unlink(missing_ok=True)
        os.symlink(elsewhere / name, data_dir / name)
    before = _tree(elsewhere)
    codes = [_main(*args, "--json", data_dir=data_dir).returncode
             for args in (["scan", "--source", str(export)], ["recheck"], ["status"], ["scan", "--source", str(export)])]
    assert codes[0] == EXIT_STATE and codes[-1] == 0, codes  # the first that needed a link said so
    assert _tree(elsewhere) == before
    assert not (data_dir / "seen.json").is_symlink() and not (data_dir / "provider.json").is_symlink()


# ---- a FIFO or a loop in inbox/: every command answers ------------------------------------------


@pytest.mark.parametrize("special", ["fifo", "symlink-loop"])
def test_a_fifo_or_link_loop_in_inbox_never_hangs_or_crashes_a_command(
    data_dir: Path, tmp_path: Path, special: str
) -> None:
    """Every command answers within its timeout with 0 or 5 (never 1, never a hang); then all recover.

    The first command, the one that meets the special file, is a real process with a real
    timeout; the ones after it run ``watcher``'s ``main`` in this process (in a thread, so a hang
    fails the test instead of stalling the suite)."""
    export = write_export(tmp_path / "e.json", ["a1", "a2"])
    assert _main("scan", "--source", str(export), data_dir=data_dir).returncode == 0
    path = data_dir / "inbox" / "a1.json"
    path.unlink()
    SPECIALS[special](path, b"", tmp_path / "nowhere")
    seen_codes = []
    for args in (["status"], ["inbox", "--all"], ["show", "a1"], ["recheck"], ["scan", "--source", str(export)]):
        answer = _cli if not seen_codes else _main
        done = answer(*args, "--json", data_dir=data_dir, timeout=20)
        seen_codes.append(done.returncode)
        # show after the file went to quarantine: "no comment a1" (exit 2) is the right answer.
        allowed = (0, EXIT_STATE, EXIT_USAGE) if args[0] == "show" else (0, EXIT_STATE)
        assert done.returncode in allowed, (args, done.returncode, done.stderr[-800:])
        if done.returncode == EXIT_STATE:
            assert str(path) in envelope(done)["error"]["message"]
    assert seen_codes[0] == EXIT_STATE, seen_codes  # status itself meets it and says so
    assert not os.path.lexists(path)
    assert _main("status", data_dir=data_dir).returncode == 0


# ---- lock files --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["outside", "loop", "directory"])
def test_a_lock_file_that_is_a_link_or_directory_is_exit_5_naming_it(
    paths: Paths, outside: Path, kind: str
) -> None:
    """A symlinked (outside, loop) or directory lock file: UnsafePath, and no file created through it."""
    lock = paths.pipeline_lock_file
    lock.parent.mkdir(parents=True)
    if kind == "outside":
        os.symlink(outside, lock)
    elif kind == "loop":
        os.symlink(lock.name, lock)
    else:
        lock.mkdir()
    with pytest.raises(UnsafePath) as info, FileStore(paths).pipeline_lock(timeout=0):
        pass
    assert exit_code_for(info.value) == EXIT_STATE and str(lock) in str(info.value)
    assert "where a lock file belongs" in str(info.value)
    assert not outside.exists()


def test_scan_with_a_symlinked_lock_says_so_and_creates_nothing_outside(data_dir: Path, tmp_path: Path) -> None:
    """`watcher scan` meets locks/pipeline.lock -> outside: exit 5 naming it; the outside path stays absent."""
    export = write_export(tmp_path / "e.json", ["a1"])
    (data_dir / "locks").mkdir()
    target = tmp_path / "outside.lock"
    os.symlink(target, data_dir / "locks" / "pipeline.lock")
    done = _cli("scan", "--source", str(export), "--json", data_dir=data_dir)
    assert done.returncode == EXIT_STATE, done.stderr
    assert str(data_dir / "locks" / "pipeline.lock") in envelope(done)["error"]["message"]
    assert not os.path.lexists(target)


# ---- a read-only data dir ----------------------------------------------------------------------


# Tests run as root, where chmod 555 stops nothing. The interpreter's audit events are raised
# before ``os.open``/``open`` and ``os.mkdir`` act (Python's "Audit events table"), and a hook that
# raises aborts the call with its exception: a read-only ``root`` without rebinding ``os``. A hook
# cannot be removed, so one is added once and refuses only inside :func:`_refusing_writes_under`.
_REFUSED: list[tuple[str, int]] = []  # (root, errno) while a test refuses writes under it
_HOOKED: list[bool] = []  # one hook per process
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _refuse(event: str, args: tuple[object, ...]) -> None:
    if not _REFUSED or event not in ("open", "os.mkdir"):
        return
    path = args[0]
    if not isinstance(path, str | os.PathLike):
        return  # a descriptor or bytes: nothing the store opens by name
    if event == "open" and not (isinstance(args[2], int) and args[2] & _WRITE_FLAGS):
        return
    root, errno_ = _REFUSED[-1]
    if os.fspath(path).startswith(root):
        raise OSError(errno_, os.strerror(errno_), os.fspath(path))


@contextmanager
def _refusing_writes_under(root: Path, errno_: int) -> Iterator[None]:
    """``root`` as a read-only directory is to root: every create, write and mkdir under it fails
    with ``errno_`` (EACCES: permissions, EROFS: a read-only mount); reads work."""
    if not _HOOKED:
        sys.addaudithook(_refuse)
        _HOOKED.append(True)
    _REFUSED.append((str(root), errno_))
    try:
        yield
    finally:
        _REFUSED.pop()


def test_the_write_refusal_is_real(tmp_path: Path) -> None:
    """The refusal the tests below rely on: writes under the root fail inside the block only, reads never."""
    (tmp_path / "old").write_text("x")
    with _refusing_writes_under(tmp_path, 30):
        with pytest.raises(OSError, match="Read-only file system"):
            (tmp_path / "new").write_text("y")
        with pytest.raises(OSError, match="Read-only file system"):
            (tmp_path / "d").mkdir()
        assert (tmp_path / "old").read_text() == "x"
    (tmp_path / "new").write_text("y")


@pytest.mark.parametrize("errno_", [13, 30], ids=["EACCES", "EROFS"])
def test_an_unwritable_lock_file_is_cannot_write_exit_5(paths: Paths, errno_: int) -> None:
    """Lock acquire refused (permissions, read-only mount): SaveFailed "cannot write <lock>: <reason>"."""
    paths.pipeline_lock_file.parent.mkdir(parents=True)
    with (_refusing_writes_under(paths.root, errno_), pytest.raises(SaveFailed) as info,
          FileStore(paths).pipeline_lock(timeout=0)):
        pass
    assert exit_code_for(info.value) == EXIT_STATE
    assert str(info.value).startswith(f"cannot write {paths.pipeline_lock_file}: {os.strerror(errno_)}")


def test_an_uncreatable_locks_dir_names_the_directory(paths: Paths) -> None:
    """No locks/ yet and the data dir is read-only: the message names locks/, the thing that could not be made."""
    with _refusing_writes_under(paths.root, 13), pytest.raises(SaveFailed) as info, locks.seen_lock(paths):
        pass
    assert str(info.value).startswith(f"cannot write {paths.root / 'locks'}: Permission denied")


def test_a_durable_write_into_a_read_only_dir_is_cannot_write(paths: Paths) -> None:
    """The temp file cannot be created: SaveFailed naming the state file, exit 5."""
    with _refusing_writes_under(paths.root, 30), pytest.raises(SaveFailed) as info:
        durable.write_model(paths.seen, SeenFile())
    assert str(info.value).startswith(f"cannot write {paths.seen}: Read-only file system")


def _read_only_mount_works() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_mount_works(), reason="needs unshare -m (a private mount namespace)")
@pytest.mark.parametrize("command", [["scan"], ["recheck"], ["mark", "a1", "replied"], ["signals"]])
def test_a_read_only_mount_is_exit_5_cannot_write_never_internal_error(
    data_dir: Path, tmp_path: Path, command: list[str]
) -> None:
    """The data dir bind-mounted read-only (in a private mount namespace): exit 5 "cannot write …"."""
    export = write_export(tmp_path / "e.json", ["a1", "a2"])
    assert _main("scan", "--source", str(export), data_dir=data_dir).returncode == 0
    args = command + (["--source", str(export)] if command == ["scan"] else [])
    script = ('mount --bind "$D" "$D" && mount -o remount,bind,ro "$D" && exec "$@"')
    wrapped = ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
               *_watcher_argv("cli", *args, "--json")]
    done = subprocess.run(wrapped, env={**_env_of(data_dir), "D": str(data_dir)}, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == EXIT_STATE, (done.returncode, done.stdout[-500:], done.stderr[-800:])
    message = json.loads(done.stdout)["error"]["message"]
    assert message.startswith(f"cannot write {data_dir}") and "Read-only file system" in message
    assert "internal error" not in done.stdout + done.stderr


def _watcher_argv(entry: str, *args: str) -> list[str]:
    from _proc import command

    return command(entry, *args)


def _env_of(data_dir: Path) -> dict[str, str]:
    from _proc import env_for

    return env_for(data_dir, OFFLINE)


# ---- a file's content must be the comment its name says ----------------------------------------


def test_an_inbox_file_holding_another_comment_is_quarantined(paths: Paths) -> None:
    """inbox/abc1.json restored with abc2's record: corrupt, moved to quarantine byte-for-byte."""
    paths.inbox.mkdir(parents=True)
    content = record("abc2").model_dump_json().encode()
    paths.inbox_file("abc1").write_bytes(content)
    with pytest.raises(CorruptState) as info:
        FileStore(paths).load_record("abc1")
    assert "holds comment 'abc2', not 'abc1'" in str(info.value)
    assert info.value.moved_to is not None and info.value.moved_to.read_bytes() == content


def test_a_hard_link_under_another_name_is_quarantined_and_the_real_file_kept(paths: Paths) -> None:
    """inbox/abc9.json hard-linked to abc1.json: loading abc9 moves that name; abc1 loads as before."""
    FileStore(paths).save_record(record("abc1"))
    os.link(paths.inbox_file("abc1"), paths.inbox_file("abc9"))
    with pytest.raises(CorruptState):
        FileStore(paths).load_record("abc9")
    assert not paths.inbox_file("abc9").exists()
    assert FileStore(paths).load_record("abc1") == record("abc1")


# ---- ids are a full match ----------------------------------------------------------------------


@pytest.mark.parametrize("cid", ["ok1\n", "ok1\r\n", "\nok1", "ok1\x00"])
def test_an_id_with_a_trailing_newline_is_not_an_id(cid: str) -> None:
    """"$" matched before a final newline; ids now match in full everywhere."""
    assert not records.is_valid_id(cid)
    assert COMMENT_ID_RE.match(cid) is None
    with pytest.raises(ValueError, match="does not match"):
        Comment(**{**comment("ok1").model_dump(), "id": cid})


def test_an_export_id_with_a_trailing_newline_is_rejected(tmp_path: Path) -> None:
    """Forem export with id_code "ok1\\n": rejected with a reason, no comment and no "ok1\\n.json"."""
    export = write_export(tmp_path / "e.json", ["ok1\n", "ok2"])
    result = read_export(export, Settings(data_dir=tmp_path / "data"))
    assert [c.id for c in result.comments] == ["ok2"]
    assert len(result.rejected) == 1 and "does not match" in result.rejected[0].message


def test_scan_of_such_an_export_creates_no_odd_file(data_dir: Path, tmp_path: Path) -> None:
    """End to end: only ok2 gets an inbox file."""
    export = write_export(tmp_path / "e.json", ["ok1\n", "ok2"])
    _main("scan", "--source", str(export), data_dir=data_dir)
    assert sorted(os.listdir(data_dir / "inbox")) == ["ok2.json"]


@pytest.mark.parametrize("command", ["show", "grant"])
def test_the_cli_refuses_an_id_with_a_trailing_newline(data_dir: Path, command: str) -> None:
    """`watcher show 'ok1\\n'` is a usage error (exit 2), never a lookup of "ok1\\n.json"."""
    done = _cli(command, "ok1\n", "--json", data_dir=data_dir)
    assert done.returncode == EXIT_USAGE, done.stderr
    assert "is not a comment id" in envelope(done)["error"]["message"]


# ---- provider.json -----------------------------------------------------------------------------


def _breaker(**changes: str) -> dict[str, str]:
    return {"kind": "auth", "message": "no", "since": iso(), "provider": "openai", "model": "m",
            "base_url": "https://x", **changes}


UNPARSABLE = {
    "cooldown-tomorrow": {"schema_version": 1, "cooldown_until": "tomorrow", "reason": "rate_limited"},
    "cooldown-empty": {"schema_version": 1, "cooldown_until": ""},
    "breaker-since": {"schema_version": 1, "breaker": _breaker(since="last tuesday")},
    "breaker-half-open": {"schema_version": 1, "breaker": _breaker(half_open_at="soon")},
}


@pytest.mark.parametrize("case", sorted(UNPARSABLE))
def test_provider_json_with_a_time_that_does_not_parse_is_quarantined(paths: Paths, case: str) -> None:
    """CorruptState (exit 5) with the bytes in quarantine/, so the next run starts clean."""
    content = json.dumps(UNPARSABLE[case]).encode()
    paths.provider_state.write_bytes(content)
    with pytest.raises(CorruptState) as info:
        _load_provider(paths)
    assert info.value.moved_to is not None and info.value.moved_to.read_bytes() == content
    assert _load_provider(paths) == ProviderState()


@pytest.mark.parametrize("command", ["status", "scan"])
def test_status_and_scan_meet_a_bad_cooldown_once_then_work(data_dir: Path, tmp_path: Path, command: str) -> None:
    """"cooldown_until": "tomorrow": exit 5 naming provider.json (quarantined, SPEC §13.5), then the next
    run works: never an internal error, and not on every run."""
    export = write_export(tmp_path / "e.json", ["a1"])
    (data_dir / "provider.json").write_text(json.dumps(UNPARSABLE["cooldown-tomorrow"]))
    args = [command, "--json"] + (["--source", str(export)] if command == "scan" else [])
    first = _cli(*args, data_dir=data_dir)
    assert first.returncode == EXIT_STATE, first.stderr
    assert str(data_dir / "provider.json") in envelope(first)["error"]["message"]
    assert _main(*args, data_dir=data_dir).returncode == 0


@pytest.fixture
def settings(data_dir: Path) -> Settings:
    return Settings(data_dir=data_dir)


def test_a_cooldown_a_year_ahead_is_capped_at_7_days_and_ends(settings: Settings) -> None:
    """Written while the clock ran a year ahead: read as now + 7 days, written down, over after 7 days."""
    far = iso(utcnow() + timedelta(days=365))
    durable.write_model(settings.paths.provider_state, ProviderState(cooldown_until=far, reason="rate_limited"))
    cooldown = provider_state.read_cooldown(FileStore(settings.paths))
    assert cooldown is not None
    assert parse_iso(cooldown.until) <= utcnow() + timedelta(days=7)
    assert FileStore(settings.paths).load_provider_state().cooldown_until == cooldown.until  # the cap is on disk
    a_week_on = later(timedelta(days=7, minutes=1))()  # the caller's "now", as a batch hands it
    assert provider_state.read_cooldown(FileStore(settings.paths), now=a_week_on) is None


def test_a_cooldown_within_7_days_is_left_as_written(settings: Settings) -> None:
    """The cap changes nothing for an ordinary Retry-After."""
    until = provider_state.write_cooldown(FileStore(settings.paths), 3600, reason="rate_limited")
    cooldown = provider_state.read_cooldown(FileStore(settings.paths))
    assert cooldown is not None and cooldown.until == until
    assert FileStore(settings.paths).load_provider_state().cooldown_until == until


@pytest.mark.parametrize("seconds", [float("inf"), float("nan"), 10.0**12])
def test_an_endless_wait_is_written_as_7_days(settings: Settings, seconds: float) -> None:
    """write_cooldown never overflows a datetime and never waits more than 7 days."""
    until = parse_iso(provider_state.write_cooldown(FileStore(settings.paths), seconds, reason="rate_limited"))
    assert timedelta(days=7) - timedelta(minutes=1) <= until - utcnow() <= timedelta(days=7)


@pytest.mark.parametrize("header", ["9" * 400, "1e400", "1E999"])
def test_a_retry_after_too_big_for_a_float_means_7_days(header: str) -> None:
    """It overflows to infinity; that is the longest wait, not "no Retry-After"."""
    assert retry_after_seconds(header) == MAX_RETRY_AFTER_S
    assert retry_after_seconds(None, value_ms=header) == MAX_RETRY_AFTER_S
