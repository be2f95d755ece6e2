"""Time sources the engine reads through, never the global clock.

Cooldowns run on a monotonic reading so a wall-clock jump cannot shorten or stretch them;
audit rows and displays use the wall reading. Tests move a `ManualClock` by hand.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def wall(self) -> float: ...


class SystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


@dataclass
class ManualClock:
    """A clock that moves only when a test says so."""

    now: float = 0.0
    epoch: float = 1_767_225_600.0  # 2026-01-01T00:00:00Z, so wall times read as real dates

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.epoch + self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"a clock cannot move backwards (asked for {seconds} s)")
        self.now += seconds


@dataclass
class LoopClock:
    """Reads the running event loop's time: simulated when the loop is a `VirtualTimeLoop`."""

    loop: asyncio.AbstractEventLoop
    epoch: float

    def monotonic(self) -> float:
        return self.loop.time()

    def wall(self) -> float:
        return self.epoch + self.loop.time()
