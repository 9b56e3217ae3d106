"""The reliability rig's closing line: what it counted, and every violation it found.

Kept apart from the rig so the root conftest can print it — and, under pytest-xdist, add up what
each worker counted (a worker hands its tally over in ``workeroutput``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

COUNTS = ("crash_points", "failed_writes", "soak_ops", "bad_inputs", "power_loss_states")


@dataclass
class Tally:
    crash_points: int = 0
    failed_writes: int = 0
    soak_ops: int = 0
    bad_inputs: int = 0
    power_loss_states: int = 0
    violations: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, what: str, n: int = 1, violations: list[str] | None = None) -> None:
        with self._lock:
            setattr(self, what, getattr(self, what) + n)
            self.violations += violations or []

    def to_dict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in COUNTS}, "violations": list(self.violations)}

    def merge(self, other: dict[str, Any]) -> None:
        for name in COUNTS:
            self.add(name, int(other.get(name, 0)))
        self.add("soak_ops", 0, list(other.get("violations", [])))

    def line(self) -> str:
        return (f"reliability: {self.crash_points:,} crash points, {self.failed_writes:,} failed-write cases, "
                f"{self.soak_ops:,} soak operations, {self.bad_inputs:,} bad-input cases, "
                f"{self.power_loss_states:,} power-loss states, "
                f"{len(self.violations)} violations")

    def touched(self) -> bool:
        return any(getattr(self, name) for name in COUNTS)


TALLY = Tally()
