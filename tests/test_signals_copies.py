"""SPEC §8 and §13.5: the counter knows its log by content, so a copied data dir keeps counting,
and counter trouble warns in `scan`/`recheck`/`status` while only `watcher signals` exits 5."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from _proc import Answer, run_main, write_export

from watcher.config import Paths
from watcher.errors import LogReplaced, StateError
from watcher.models import SignalState
from watcher.store import durable, signals
from watcher.store.locks import signals_lock


def _line(key: str, width: int = 40) -> bytes:
    """One valid signal line of exactly ``width`` bytes, newline included."""
    pad = width - len(json.dumps({"key": key, "pad": ""}, separators=(",", ":"))) - 1
    return (json.dumps({"key": key, "pad": "x" * pad}, separators=(",", ":")) + "\n").encode()


def _write_raw(paths: Paths, data: bytes) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.observations, "ab") as fh:
        fh.write(data)


def _copytree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest)


def _cp_a(src: Path, dest: Path) -> None:
    subprocess.run(["cp", "-a", str(src), str(dest)], check=True)


def _cp_r(src: Path, dest: Path) -> None:
    subprocess.run(["cp", "-r", str(src), str(dest)], check=True)


COPIES: dict[str, Callable[[Path, Path], None]] = {"copytree": _copytree, "cp -a": _cp_a, "cp -r": _cp_r}


def _log_keys(paths: Paths) -> Counter[str]:
    return Counter(json.loads(line)["key"] for line in paths.observations.read_bytes().splitlines())


# ------------------------------------------------------------------------- identity by content


@pytest.mark.parametrize("copy", list(COPIES))
def test_a_copied_data_dir_goes_on_counting_exactly(paths: Paths, tmp_path: Path, copy: str) -> None:
    """copytree / cp -a / cp -r give the log a new inode; counts continue with no loss or double."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    dest = Paths(tmp_path / "data2")
    COPIES[copy](paths.root, dest.root)
    assert dest.observations.stat().st_ino != paths.observations.stat().st_ino
    _write_raw(dest, _line("J") * 2)
    result = signals.run_counter(dest)
    assert (result.counts, result.new_lines, result.lines_read) == ({"K": 3, "J": 2}, 2, 2)
    assert signals.run_counter(dest).new_lines == 0
    assert signals.run_counter(paths).counts == {"K": 3}  # the original is untouched by the copy


def test_the_state_records_the_hash_of_the_line_ending_at_the_watermark(paths: Paths) -> None:
    """state.json's log holds tail_start and the sha256 of the bytes from there to applied."""
    _write_raw(paths, _line("A") + _line("B", 60))
    signals.run_counter(paths)
    log = json.loads(paths.signals_state.read_text())["log"]
    data = paths.observations.read_bytes()
    assert (log["tail_start"], log["tail_sha256"]) == (40, hashlib.sha256(data[40:100]).hexdigest())
    assert log["head_sha256"] == hashlib.sha256(data[:40]).hexdigest()


def test_a_log_whose_last_counted_line_changed_is_replaced(paths: Paths) -> None:
    """Same first line, at least as long, but another line ends at applied → LogReplaced."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    paths.observations.write_bytes(_line("K") + _line("Z") * 3)
    with pytest.raises(LogReplaced, match="last line counted") as caught:
        signals.run_counter(paths)
    assert "watcher signals --reset" in str(caught.value)
    assert signals.read_state(paths).counts == {"K": 3}  # type: ignore[union-attr]


def test_a_copy_of_another_log_with_the_same_first_line_is_replaced(paths: Paths, tmp_path: Path) -> None:
    """A log that shares only its first line (both began the same way) is not the counted one."""
    _write_raw(paths, _line("K") + _line("A") * 2)
    signals.run_counter(paths)
    other = tmp_path / "other.jsonl"
    other.write_bytes(_line("K") + _line("B") * 4)
    shutil.copy2(other, paths.observations)
    with pytest.raises(LogReplaced):
        signals.run_counter(paths)


def test_the_tail_of_a_line_longer_than_the_cap_is_its_last_bytes(paths: Paths) -> None:
    """An over-long last line is recognised by its last HEAD_CAP bytes; a change there is caught."""
    _write_raw(paths, _line("K") + _line("long", 3 * signals.HEAD_CAP))
    signals.run_counter(paths)
    log = signals.read_state(paths).log  # type: ignore[union-attr]
    assert log is not None and log.tail_start == 40 + 2 * signals.HEAD_CAP
    data = bytearray(paths.observations.read_bytes())
    paths.observations.unlink()
    paths.observations.write_bytes(bytes(data))  # a copy: new inode, same bytes
    assert signals.run_counter(paths).new_lines == 0
    data[-10] = ord("y")
    paths.observations.write_bytes(bytes(data))
    with pytest.raises(LogReplaced):
        signals.run_counter(paths)


def _old_state(paths: Paths) -> SignalState:
    """Strip the tail from the saved state, as a watcher from before tails would have saved it."""
    state = signals.read_state(paths)
    assert state is not None and state.log is not None
    old = state.model_copy(update={"log": state.log.model_copy(update={"tail_start": None, "tail_sha256": None})})
    durable.write_model(paths.signals_state, old)
    raw = json.loads(paths.signals_state.read_text())
    raw["log"].pop("tail_start"), raw["log"].pop("tail_sha256")
    paths.signals_state.write_text(json.dumps(raw))
    return old


def test_a_state_saved_before_tail_hashes_is_accepted_and_filled_on_the_next_save(
        paths: Paths, tmp_path: Path) -> None:
    """An old state.json (no tail fields) still counts, on a copy too, and gains its tail."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    _old_state(paths)
    dest = Paths(tmp_path / "data2")
    shutil.copytree(paths.root, dest.root)
    _write_raw(dest, _line("J"))
    assert signals.run_counter(dest).counts == {"K": 3, "J": 1}
    log = json.loads(dest.signals_state.read_text())["log"]
    assert log["tail_start"] == 120 and log["tail_sha256"] == hashlib.sha256(_line("J")).hexdigest()


def test_an_old_state_with_no_tail_is_filled_even_when_nothing_is_new(paths: Paths) -> None:
    """With no new lines the filled tail is still saved once, then the state stays put."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    _old_state(paths)
    assert signals.run_counter(paths).new_lines == 0
    log = signals.read_state(paths).log  # type: ignore[union-attr]
    assert log is not None and (log.tail_start, log.tail_sha256) == (80, hashlib.sha256(_line("K")).hexdigest())


def test_an_old_state_whose_watermark_is_not_a_line_end_is_replaced(paths: Paths) -> None:
    """Without a tail hash, a log where no line ends at applied is still another log."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    _old_state(paths)
    paths.observations.write_bytes(_line("K") + _line("K", 50) * 2)
    with pytest.raises(LogReplaced, match="no line ends at byte 120"):
        signals.run_counter(paths)


# ---------------------------------------------------------------------------------- log_trouble


def test_log_trouble_is_none_for_a_healthy_a_copied_or_an_uncounted_log(paths: Paths, tmp_path: Path) -> None:
    """No counts, counts of this log, or counts of a copy of it: nothing to warn about."""
    assert signals.log_trouble(paths) is None
    _write_raw(paths, _line("K") * 2)
    assert signals.log_trouble(paths) is None
    signals.run_counter(paths)
    _write_raw(paths, _line("K"))  # not counted yet: no trouble either
    assert signals.log_trouble(paths) is None
    dest = Paths(tmp_path / "data2")
    _cp_a(paths.root, dest.root)
    assert signals.log_trouble(dest) is None


@pytest.mark.parametrize("damage", ["truncate", "rewrite", "remove"])
def test_log_trouble_names_the_damage_and_the_reset_without_counting(paths: Paths, damage: str) -> None:
    """Truncated, rewritten or removed: a message naming --reset; no file is written."""
    _write_raw(paths, _line("K") * 3)
    signals.run_counter(paths)
    if damage == "truncate":
        os.truncate(paths.observations, 80)
    elif damage == "rewrite":
        paths.observations.write_bytes(_line("Z") * 3)
    else:
        paths.observations.unlink()
    before = {p: p.stat().st_mtime_ns for p in paths.root.rglob("*")}
    trouble = signals.log_trouble(paths)
    assert trouble is not None and "watcher signals --reset" in trouble
    assert {"truncate": "truncated", "rewrite": "replaced", "remove": "removed"}[damage] in trouble
    assert {p: p.stat().st_mtime_ns for p in paths.root.rglob("*")} == before


def test_log_trouble_takes_no_lock(paths: Paths) -> None:
    """status must answer while a counter or appender holds the signals lock."""
    _write_raw(paths, _line("K") * 2)
    signals.run_counter(paths)
    os.truncate(paths.observations, 40)
    answers: list[str | None] = []
    with signals_lock(paths):
        worker = threading.Thread(target=lambda: answers.append(signals.log_trouble(paths)))
        worker.start()
        worker.join(10)
    assert len(answers) == 1 and answers[0] is not None and "truncated" in answers[0]


def test_a_fifo_or_symlink_at_the_log_is_a_state_error_never_a_hang(paths: Paths, tmp_path: Path) -> None:
    """The log is opened without following links and without blocking; both name the path."""
    _write_raw(paths, _line("K"))
    signals.run_counter(paths)
    paths.observations.unlink()
    os.mkfifo(paths.observations)
    with pytest.raises(StateError, match="not a regular file"):
        signals.run_counter(paths)
    assert "not a regular file" in (signals.log_trouble(paths) or "")
    paths.observations.unlink()
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(_line("K"))
    paths.observations.symlink_to(outside)
    with pytest.raises(StateError, match=str(paths.observations)):
        signals.run_counter(paths)


# ------------------------------------------------------------------------ through the CLI


def invoke(*args: str, data_dir: Path | None = None) -> Answer:
    """Run ``watcher`` as typed, in this process, with the offline heuristic chosen explicitly;
    ``data_dir`` is given as ``--data-dir`` (else WATCHER_DATA_DIR, the test's)."""
    where = ["--data-dir", str(data_dir)] if data_dir else []
    return run_main("cli", *where, *args, data_dir=Path(os.environ["WATCHER_DATA_DIR"]),
                    env={"WATCHER_PROVIDER": "offline"})


def _scanned(data_dir: Path, tmp_path: Path, labels: list[str]) -> Path:
    export = write_export(tmp_path / "export.json", labels)
    result = invoke("scan", "--source", str(export), "--json", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    return export


@pytest.mark.parametrize("copy", ["copytree", "cp -a"])
def test_scan_and_recheck_in_a_copied_data_dir_exit_0_and_count_on(
        data_dir: Path, tmp_path: Path, copy: str) -> None:
    """A cron line on a copied data dir (SPEC §13.5): `scan && recheck` both exit 0 and count only their own lines."""
    _scanned(data_dir, tmp_path, ["aa1", "bb2"])
    dest = tmp_path / "data2"
    COPIES[copy](data_dir, dest)
    paths = Paths(dest)
    before = sum(_log_keys(paths).values())
    export = write_export(tmp_path / "more.json", ["aa1", "bb2", "cc3"])
    scan = invoke("scan", "--source", str(export), "--json", data_dir=dest)
    assert scan.returncode == 0, scan.stderr
    doc = json.loads(scan.stdout)["result"]
    assert doc["calls"] == 1 and "warning" not in doc["signals"]
    assert doc["signals"]["new_lines"] == sum(_log_keys(paths).values()) - before
    recheck = invoke("recheck", "--json", data_dir=dest)
    assert recheck.returncode == 0, recheck.stderr
    counted = invoke("signals", "--json", data_dir=dest)
    assert counted.returncode == 0
    assert Counter(json.loads(counted.stdout)["result"]["counts"]) == _log_keys(paths)


@pytest.mark.parametrize("damage", ["truncate", "rewrite"])
def test_a_damaged_log_fails_only_watcher_signals(data_dir: Path, tmp_path: Path, damage: str) -> None:
    """scan and recheck warn (stderr and result) and exit 0; `watcher signals` exits 5."""
    _scanned(data_dir, tmp_path, ["aa1", "bb2", "cc3"])
    log = Paths(data_dir).observations
    if damage == "truncate":
        os.truncate(log, log.stat().st_size // 2)
    else:
        log.write_bytes(b'{"key":"someone.else"}\n' * 20)
    export = write_export(tmp_path / "more.json", ["aa1", "bb2", "cc3", "dd4"])
    scan = invoke("scan", "--source", str(export), "--json")
    assert scan.returncode == 0, scan.stderr
    doc = json.loads(scan.stdout)
    assert doc["ok"] is True and doc["result"]["calls"] == 1
    assert "watcher signals --reset" in doc["result"]["signals"]["warning"]
    assert "warning: observation signals not counted" in scan.stderr
    recheck = invoke("recheck")
    assert recheck.returncode == 0 and "watcher signals --reset" in recheck.stderr
    counted = invoke("signals", "--json")
    assert counted.returncode == 5
    assert "watcher signals --reset" in json.loads(counted.stdout)["error"]["message"]


def test_signals_reset_recounts_a_damaged_log_and_the_warning_goes(data_dir: Path, tmp_path: Path) -> None:
    """--reset counts the log as it is now, once; the next scan counts on without a warning."""
    export = _scanned(data_dir, tmp_path, ["aa1", "bb2"])
    paths = Paths(data_dir)
    os.truncate(paths.observations, 0)
    _write_raw(paths, _line("K") * 2)
    reset = invoke("signals", "--reset", "--json")
    assert reset.returncode == 0
    assert json.loads(reset.stdout)["result"]["counts"] == {"K": 2}
    assert signals.log_trouble(paths) is None
    scan = invoke("scan", "--source", str(export), "--json")
    assert scan.returncode == 0 and "warning" not in json.loads(scan.stdout)["result"]["signals"]
    assert Counter(signals.read_state(paths).counts) == _log_keys(paths)  # type: ignore[union-attr]


def test_status_warns_about_a_replaced_log(data_dir: Path, tmp_path: Path) -> None:
    """status exits 0 and says the log was replaced/truncated and to run `watcher signals --reset`."""
    _scanned(data_dir, tmp_path, ["aa1"])
    os.truncate(Paths(data_dir).observations, 10)
    status = invoke("status", "--json")
    assert status.returncode == 0
    assert "watcher signals --reset" in json.loads(status.stdout)["result"]["signals"]["warning"]
    human = invoke("status")
    assert human.returncode == 0 and "watcher signals --reset" in human.stdout
