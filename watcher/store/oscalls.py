"""The operating-system calls of the store's durable writes, guarded reads and log appends.

One object holds them so that a test fails or watches one of them through the store (STYLE rule
14) — a full disk at a temp file's fsync, a writer's rename landing mid-quarantine, a log that
appears between two looks — instead of rebinding a module attribute: ``FileStore(paths,
calls=…)``, or ``calls=`` to the functions of :mod:`watcher.store.durable`,
:mod:`watcher.store.guarded`, :mod:`watcher.store.signal_log` and :mod:`watcher.store.signals`.

Each method looks the real call up when it runs, so a process-wide rig that replaces ``os.fsync``
(the power-loss recorder of tests/reliability) still meets every call made through :data:`OS`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO


class OsCalls:
    """The real calls; a test overrides the one it fails or watches."""

    def open(self, path: Path, flags: int, mode: int = 0o777) -> int:
        return os.open(path, flags, mode)

    def fdopen(self, fd: int, mode: str) -> BinaryIO:
        return os.fdopen(fd, mode)  # type: ignore[return-value]  # a binary mode, always

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def sync_dir(self, directory: Path) -> None:
        """Make a rename in ``directory`` durable (a replaced file is not durable until its
        directory is)."""
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            self.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, src: str | Path, dst: str | Path) -> None:
        os.replace(src, dst)

    def rename(self, src: str | Path, dst: str | Path) -> None:
        os.rename(src, dst)


OS = OsCalls()
