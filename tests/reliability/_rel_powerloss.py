"""Power loss (SPEC §15.5), the way ALICE (OSDI '14) and CrashMonkey (OSDI '18) test it: record the
file-system operations a real run makes on its data dir, then build every state a power cut at any
point could leave under a stated persistence model.

The persistence model (tests/README.md, "Power loss"):

- **Files.** After a crash, a file holds what its last ``fsync``/``fdatasync`` made durable, plus
  any prefix of the writes made to it since (a write itself may be kept in part).
- **Directories.** An entry created, renamed or removed (``open(O_CREAT)``, ``mkstemp``, ``mkdir``,
  ``rename``/``replace``, ``link``, ``unlink``, ``rmdir``) persists only once its directory was
  fsynced; before that, any prefix of that directory's entry operations may have persisted (one
  directory's operations reach the disk in order; a rename within one directory is one operation).
  A directory whose own entry did not persist takes everything under it with it.
- **Time.** Operations after the crash point never happened; what the outside world saw before it
  (a request that left for the provider, an item reported, a command's exit) did happen.

The bound: after each operation ``k``, the unsynced work falls into groups, one per directory
with pending entry operations and one per file with pending writes. Every combination of every
group's prefixes is a state (a file's pending writes cut after each whole write, and inside each
write after 1 byte, half of it and all but 1 byte: the byte cuts are the bound), up to
:data:`EVERY_CAP` combinations at one crash point; beyond that (no workload here comes near it:
the most is a few hundred) only none of it, all of it, and each group's prefixes alone with the
others all kept or all lost. A state that several crash points can leave is checked once,
against the promises of the latest of them (they only grow with time).

The recorder wraps the ``os`` calls the store makes (``open``, ``write``, ``close``, ``fsync``,
``fdatasync``, ``replace``, ``rename``, ``link``, ``unlink``, ``remove``, ``mkdir``, ``rmdir``)
while one test's workload runs in process. The temp file of a durable write is written through a
file object (``os.fdopen``), not ``os.write``, so its bytes are taken from the file when it is next
synced, closed or renamed — where they could first matter to a state.
"""

from __future__ import annotations

import itertools
import math
import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# One entry operation of a directory: ("link", name, inode) puts ``inode`` at ``name`` (create,
# mkdir, link, the arriving half of a rename across directories, replace over an existing name);
# ("unlink", name) removes a name; ("rename", old, new) moves a name within the directory.
EntryOp = tuple[Any, ...]
# One write to a file: (offset, bytes); offset -1 means "the file became exactly these bytes".
Write = tuple[int, bytes]
# A state as materialized: (path relative to the root, bytes, or None for a directory), sorted.
State = tuple[tuple[str, bytes | None], ...]

# Lock files hold no state (SPEC §4): a power cut that loses one loses nothing, and the kernel's
# flock on it is gone with the power anyway. Leaving them out keeps the states about the data.
_IGNORED = frozenset({"locks"})

# The exhaustive tier takes every combination of the groups' prefixes up to this many at one crash point.
EVERY_CAP = 20_000

# Where a pending file's write may be cut inside itself (besides whole writes).
_CUTS = (lambda n: 1, lambda n: n // 2, lambda n: n - 1)


@dataclass
class Event:
    """One trace entry: a file-system operation, or a moment the outside world saw something."""

    kind: str  # create mkdir write fsync fsync-dir rename unlink link | request item exit
    what: str  # the path under the root, or the label / command
    data: Any = None  # request: label; item: (id, outcome); exit: the run's Answer and its argv


@dataclass
class _Model:
    """The data dir as the disk holds it now (volatile) and as a power cut would keep it (durable)."""

    kind: dict[int, str] = field(default_factory=dict)  # inode -> "d" | "f"
    entries: dict[int, dict[str, int]] = field(default_factory=dict)
    durable_entries: dict[int, dict[str, int]] = field(default_factory=dict)
    pending_entries: dict[int, list[EntryOp]] = field(default_factory=dict)
    content: dict[int, bytes] = field(default_factory=dict)
    durable: dict[int, bytes] = field(default_factory=dict)
    pending_writes: dict[int, list[Write]] = field(default_factory=dict)
    next_id: int = 1

    def new(self, kind: str, content: bytes = b"", *, durable: bool = False) -> int:
        inode, self.next_id = self.next_id, self.next_id + 1
        self.kind[inode] = kind
        if kind == "d":
            self.entries[inode] = {}
            self.durable_entries[inode] = {}
            self.pending_entries[inode] = []
        else:
            self.content[inode] = content
            self.durable[inode] = content if durable else b""
            self.pending_writes[inode] = [] if durable or not content else [(-1, content)]
        return inode

    def entry_op(self, directory: int, op: EntryOp) -> None:
        _apply_entry(self.entries[directory], op)
        self.pending_entries[directory].append(op)

    def write(self, inode: int, offset: int, data: bytes) -> None:
        self.content[inode] = _apply_write(self.content[inode], (offset, data))
        self.pending_writes[inode].append((offset, data))

    def catch_up(self, inode: int, now: bytes) -> None:
        """The file holds ``now``: record what was written since we last knew (a file object's writes)."""
        was = self.content[inode]
        if now == was:
            return
        self.write(inode, len(was), now[len(was):]) if now.startswith(was) else self.write(inode, -1, now)

    def sync(self, inode: int) -> None:
        if self.kind[inode] == "d":
            self.durable_entries[inode] = dict(self.entries[inode])
            self.pending_entries[inode] = []
        else:
            self.durable[inode] = self.content[inode]
            self.pending_writes[inode] = []


def _apply_entry(names: dict[str, int], op: EntryOp) -> None:
    if op[0] == "link":
        names[op[1]] = op[2]
    elif op[0] == "unlink":
        names.pop(op[1], None)
    elif op[1] in names:  # rename
        names[op[2]] = names.pop(op[1])


def _apply_write(content: bytes, write: Write) -> bytes:
    offset, data = write
    if offset < 0:
        return data
    padded = content.ljust(offset, b"\0")
    return padded[:offset] + data + padded[offset + len(data):]


# ---- the recorder ----------------------------------------------------------------------------------

_REAL = {name: getattr(os, name) for name in ("open", "write", "close", "fsync", "fdatasync", "replace", "rename",
                                              "link", "unlink", "remove", "mkdir", "rmdir")}


# A planted bug (tests/reliability/test_rel_power_loss.py): given a sync about to be made (its kind,
# ``fsync`` or ``fsync-dir``, the path under the root, the operation before it), whether the store's
# code lacks it. The recorder then neither makes nor records it: what the code would do without it.
Unsynced = Callable[[str, str, "Event | None"], bool]


class Recorder:
    """The trace of one workload under ``root`` (a directory that exists), and its crash states.

    The state of ``root`` when recording starts is durable: it was there before the workload.
    """

    def __init__(self, root: Path, *, every: bool = True, unsynced: Unsynced | None = None) -> None:
        self.root = os.path.abspath(root)
        self.every = every
        self.unsynced = unsynced
        self.last_op: Event | None = None  # the latest file-system operation (notes left out)
        self.capped = 0  # crash points where ``every`` found more than EVERY_CAP combinations
        self.at: dict[int, list[State]] = {}  # every crash point's states (the trace index of its last entry)
        self.trace: list[Event] = []
        self.model = _Model()
        self._lock = threading.RLock()
        self._fds: dict[int, tuple[int, bool]] = {}  # fd -> (inode, opened for append)
        self._by_ino: dict[tuple[int, int], int] = {}  # (st_dev, st_ino) -> inode
        # Each distinct state, with the trace index of the latest crash point that can leave it.
        self.states: dict[State, int] = {}
        self.crash_points = 0
        self._pending: list[State] = []  # states of the last operation, valid until the next one
        self.root_id = self.model.new("d")
        st = os.stat(self.root)
        self._by_ino[(st.st_dev, st.st_ino)] = self.root_id  # its fsync makes the data dir's own entry durable
        self.model.sync(self.root_id)
        self._snapshot(self.root, self.root_id)
        self._generate()

    # ---- the initial state (durable) ----

    def _snapshot(self, path: str, directory: int) -> None:
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            st = os.lstat(full)
            if stat.S_ISDIR(st.st_mode):
                inode = self.model.new("d")
                self._snapshot(full, inode)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as fh:
                    inode = self.model.new("f", fh.read(), durable=True)
            else:
                continue
            self._by_ino[(st.st_dev, st.st_ino)] = inode
            self.model.entries[directory][name] = inode
            self.model.sync(inode)
        self.model.sync(directory)

    # ---- where a path is in the model ----

    def _where(self, path: Any) -> tuple[int, str] | None:
        """(directory inode, name) of ``path``, or ``None`` if it is not under the root or its
        directory is not known."""
        if not isinstance(path, str | os.PathLike):
            return None
        full = os.path.abspath(os.fspath(path))
        if isinstance(full, bytes) or not full.startswith(self.root + os.sep):
            return None
        *parents, name = full[len(self.root) + 1:].split(os.sep)
        if _IGNORED & {*parents, name}:
            return None
        directory = self.root_id
        for part in parents:
            inode = self.model.entries.get(directory, {}).get(part)
            if inode is None or self.model.kind[inode] != "d":
                return None
            directory = inode
        return directory, name

    def _rel(self, path: Any) -> str:
        return os.path.relpath(os.fspath(path), self.root)

    def _inode_of_fd(self, fd: int) -> int | None:
        st = os.fstat(fd)
        return self._by_ino.get((st.st_dev, st.st_ino))

    # ---- the trace ----

    def note(self, kind: str, what: str, data: Any = None) -> None:
        """A moment the outside world saw something (it cannot be undone by a crash)."""
        with self._lock:
            self.trace.append(Event(kind, what, data))

    def _op(self, kind: str, what: str, change: Callable[[], None]) -> None:
        with self._lock:
            self._settle()
            change()
            self.last_op = Event(kind, what)
            self.trace.append(self.last_op)
            self._generate()

    def _settle(self) -> None:
        """The last operation's states could be left by a crash at any moment up to now."""
        for state in self._pending:
            self.states[state] = len(self.trace) - 1
        self.at[len(self.trace) - 1] = self._pending
        self._pending = []

    def finish(self) -> None:
        with self._lock:
            self._settle()

    def _generate(self) -> None:
        self.crash_points += 1
        if self.every and combinations(self.model) > EVERY_CAP:
            self.capped += 1
        self._pending = list(dict.fromkeys(crash_states(self.model, self.root_id, every=self.every)))

    # ---- the wrapped calls ----

    def _catch_up_fd(self, fd: int) -> None:
        inode = self._inode_of_fd(fd)
        if inode is None or self.model.kind[inode] != "f":
            return
        size = os.fstat(fd).st_size
        now = _read_all(fd, size) if size else b""
        if now != self.model.content[inode]:
            self._op("write", f"{self._name(inode)} ({len(now)} bytes)", lambda: self.model.catch_up(inode, now))

    def _catch_up_path(self, path: Any) -> None:
        where = self._where(path)
        inode = self.model.entries[where[0]].get(where[1]) if where else None
        if inode is not None and self.model.kind[inode] == "f":
            fd = _REAL["open"](path, os.O_RDONLY | os.O_NOFOLLOW)
            try:
                self._catch_up_fd(fd)
            finally:
                _REAL["close"](fd)

    def open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        with self._lock:
            where = self._where(path) if dir_fd is None else None
            existed = os.path.lexists(path) if where else True
            fd = _REAL["open"](path, flags, mode, dir_fd=dir_fd)
            self._fds.pop(fd, None)  # a number a file object closed behind our back (os.fdopen)
            if where is None:
                return fd
            st = os.fstat(fd)
            key = (st.st_dev, st.st_ino)
            if not existed:
                def create() -> None:
                    inode = self.model.new("f")
                    self._by_ino[key] = inode
                    self.model.entry_op(where[0], ("link", where[1], inode))
                self._op("create", self._rel(path), create)
            inode = self._by_ino.get(key)
            if inode is not None:
                self._fds[fd] = (inode, bool(flags & os.O_APPEND))
                if flags & os.O_TRUNC and self.model.kind[inode] == "f" and self.model.content[inode]:
                    self._op("write", self._rel(path), lambda: self.model.write(inode, -1, b""))
            return fd

    def write(self, fd: int, data: Any) -> int:
        with self._lock:
            known = self._fds.get(fd)
            if known is None:
                return int(_REAL["write"](fd, data))
            inode, appending = known
            offset = self.model.content.get(inode, b"").__len__() if appending else os.lseek(fd, 0, os.SEEK_CUR)
            n = int(_REAL["write"](fd, data))
            chunk = bytes(memoryview(data)[:n])
            self._op("write", f"{self._name(inode)}@{offset}+{n}", lambda: self.model.write(inode, offset, chunk))
            return n

    def close(self, fd: int) -> None:
        with self._lock:
            if fd in self._fds:
                self._catch_up_fd(fd)
                self._fds.pop(fd, None)
            _REAL["close"](fd)

    def fsync(self, fd: int, real: Callable[[int], None]) -> None:
        with self._lock:
            inode = self._inode_of_fd(fd)
            if inode is None:
                real(fd)
                return
            self._catch_up_fd(fd)
            kind = "fsync-dir" if self.model.kind[inode] == "d" else "fsync"
            if self.unsynced is not None and self.unsynced(kind, self._name(inode), self.last_op):
                return  # a planted bug: the store's code has no such sync
            real(fd)
            self._op(kind, self._name(inode), lambda: self.model.sync(inode))

    def rename(self, src: Any, dst: Any, real: Callable[..., None]) -> None:
        with self._lock:
            a, b = self._where(src), self._where(dst)
            if a is not None:
                self._catch_up_path(src)
            real(src, dst)
            if a is None or b is None:
                return
            inode = self.model.entries[a[0]].get(a[1])
            if inode is None:
                return

            def move() -> None:
                if a[0] == b[0]:
                    self.model.entry_op(a[0], ("rename", a[1], b[1]))
                else:
                    self.model.entry_op(a[0], ("unlink", a[1]))
                    self.model.entry_op(b[0], ("link", b[1], inode))
            self._op("rename", f"{self._rel(src)} -> {self._rel(dst)}", move)

    def link(self, src: Any, dst: Any, **kwargs: Any) -> None:
        with self._lock:
            a, b = self._where(src), self._where(dst)
            _REAL["link"](src, dst, **kwargs)
            inode = self.model.entries[a[0]].get(a[1]) if a else None
            if b is not None and inode is not None:
                self._op("link", f"{self._rel(src)} -> {self._rel(dst)}",
                         lambda: self.model.entry_op(b[0], ("link", b[1], inode)))

    def unlink(self, path: Any, real: Callable[..., None], **kwargs: Any) -> None:
        with self._lock:
            where = self._where(path)
            real(path, **kwargs)
            if where is not None and where[1] in self.model.entries[where[0]]:
                self._op("unlink", self._rel(path), lambda: self.model.entry_op(where[0], ("unlink", where[1])))

    def mkdir(self, path: Any, mode: int = 0o777, **kwargs: Any) -> None:
        with self._lock:
            where = self._where(path)
            _REAL["mkdir"](path, mode, **kwargs)
            if where is None:
                return
            st = os.lstat(path)

            def make() -> None:
                inode = self.model.new("d")
                self._by_ino[(st.st_dev, st.st_ino)] = inode
                self.model.entry_op(where[0], ("link", where[1], inode))
            self._op("mkdir", self._rel(path), make)

    def _name(self, inode: int) -> str:
        """A path of ``inode`` now (for the trace's descriptions)."""
        def walk(directory: int, prefix: str) -> str | None:
            for name, child in self.model.entries[directory].items():
                if child == inode:
                    return prefix + name
                if self.model.kind[child] == "d" and (found := walk(child, f"{prefix}{name}/")):
                    return found
            return None
        return walk(self.root_id, "") or f"<inode {inode}>"


def _read_all(fd: int, size: int) -> bytes:
    try:
        return os.pread(fd, size, 0)
    except OSError:  # opened write-only: read the same file through a descriptor of our own
        mine = _REAL["open"](f"/proc/self/fd/{fd}", os.O_RDONLY)
        try:
            return os.pread(mine, size, 0)
        finally:
            _REAL["close"](mine)


@contextmanager
def recording(root: Path, monkeypatch: pytest.MonkeyPatch, *, every: bool = True,
              unsynced: Unsynced | None = None) -> Iterator[Recorder]:
    """Record every file-system operation under ``root`` while the block runs (this thread and the
    batch's call threads alike); ``every``: see :func:`crash_states`; ``unsynced``: a planted bug,
    the syncs the store's code would lack."""
    rec = Recorder(root, every=every, unsynced=unsynced)
    fsync, fdatasync = os.fsync, os.fdatasync
    with monkeypatch.context() as patch:
        patch.setattr(os, "open", rec.open)
        patch.setattr(os, "write", rec.write)
        patch.setattr(os, "close", rec.close)
        patch.setattr(os, "fsync", lambda fd: rec.fsync(fd, fsync))
        patch.setattr(os, "fdatasync", lambda fd: rec.fsync(fd, fdatasync))
        patch.setattr(os, "replace", lambda s, d, **kw: rec.rename(s, d, lambda a, b: _REAL["replace"](a, b, **kw)))
        patch.setattr(os, "rename", lambda s, d, **kw: rec.rename(s, d, lambda a, b: _REAL["rename"](a, b, **kw)))
        patch.setattr(os, "link", rec.link)
        patch.setattr(os, "unlink", lambda p, **kw: rec.unlink(p, _REAL["unlink"], **kw))
        patch.setattr(os, "remove", lambda p, **kw: rec.unlink(p, _REAL["remove"], **kw))
        patch.setattr(os, "rmdir", lambda p, **kw: rec.unlink(p, _REAL["rmdir"], **kw))
        patch.setattr(os, "mkdir", rec.mkdir)
        yield rec
    rec.finish()


# ---- the crash states --------------------------------------------------------------------------------


def crash_states(model: _Model, root: int, *, every: bool = True) -> Iterator[State]:
    """Every state the model's pending work allows a crash now to leave, within the bound above;
    ``every``: each combination of every group's prefixes instead (the long lane's exhaustive tier,
    up to :data:`EVERY_CAP` combinations at one crash point, the bound beyond)."""
    groups, cuts = _groups(model)
    if every and combinations(model) <= EVERY_CAP:
        for choice in itertools.product(*(range(n) for _, _, n in groups)):
            yield _build(model, root, {inode: c for (_, inode, _), c in zip(groups, choice, strict=True)}, cuts)
        return
    last = {inode: n - 1 for _, inode, n in groups}
    yield _build(model, root, {}, cuts)
    yield _build(model, root, last, cuts)
    for _, inode, n in groups:
        for choice in range(n):
            yield _build(model, root, {inode: choice}, cuts)
            yield _build(model, root, {**last, inode: choice}, cuts)


def combinations(model: _Model) -> int:
    """How many states the pending work allows in all (the product of every group's prefixes)."""
    return math.prod(n for _, _, n in _groups(model)[0])


def _groups(model: _Model) -> tuple[list[tuple[str, int, int]], dict[int, list[tuple[int, int]]]]:
    groups: list[tuple[str, int, int]] = []  # (kind, inode, number of choices: prefixes 0..n-1, n = all)
    cuts: dict[int, list[tuple[int, int]]] = {}  # file -> its prefixes: (whole writes, bytes of the next)
    for directory, ops in model.pending_entries.items():
        if ops:
            groups.append(("d", directory, len(ops) + 1))
    for inode, writes in model.pending_writes.items():
        if writes:
            options = [(0, 0)]
            for j, (_, data) in enumerate(writes):
                options += [(j, c) for c in sorted({cut(len(data)) for cut in _CUTS}) if 0 < c < len(data)]
                options.append((j + 1, 0))
            cuts[inode] = options
            groups.append(("f", inode, len(options)))
    return groups, cuts


def _build(model: _Model, root: int, kept: dict[int, int], cuts: dict[int, list[tuple[int, int]]]) -> State:
    """The state with ``kept[group]`` choices of each group's pending work kept (absent: none)."""
    out: list[tuple[str, bytes | None]] = []

    def names(directory: int) -> dict[str, int]:
        entries = dict(model.durable_entries[directory])
        for op in model.pending_entries[directory][: kept.get(directory, 0)]:
            _apply_entry(entries, op)
        return entries

    def content(inode: int) -> bytes:
        data = model.durable[inode]
        if inode not in kept:
            return data
        whole, part = cuts[inode][kept[inode]]
        writes = model.pending_writes[inode]
        for write in writes[:whole]:
            data = _apply_write(data, write)
        if part:
            offset, chunk = writes[whole]
            data = _apply_write(data, (offset, chunk[:part])) if offset >= 0 else chunk[:part]
        return data

    def walk(directory: int, prefix: str) -> None:
        for name, inode in sorted(names(directory).items()):
            if model.kind[inode] == "d":
                out.append((prefix + name, None))
                walk(inode, f"{prefix}{name}/")
            else:
                out.append((prefix + name, content(inode)))

    walk(root, "")
    return tuple(out)


def materialize(state: State, dest: Path) -> None:
    """Write ``state`` as a directory tree at ``dest`` (which must not exist)."""
    dest.mkdir(parents=True)
    for rel, data in state:
        path = dest / rel
        if data is None:
            path.mkdir()
        else:
            path.write_bytes(data)
