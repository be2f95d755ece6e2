"""`--speed N`: the engine's clock for a front door, `anchor + N × (now − anchor)`.

Every front door reads its deadlines, cooldowns and leases from this clock, so a demo (or a
test with real sockets) at `--speed 10` sees a 300 s cooldown pass in 30 real seconds and a
30 s deadline in 3. Timers on the event loop are real seconds: `real()` converts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

Scheduler = Callable[[float, Callable[[], Any]], None]


class SpeedClock:
    """Monotonic and wall readings sped up by `speed` from one anchor.

    `anchor` is a wall time shared by every process of a deployment (`--clock-anchor`); the
    monotonic reading runs from the moment this process started, at the same speed.
    """

    def __init__(self, speed: float = 1.0, anchor: float | None = None) -> None:
        if not speed > 0:
            raise ValueError(f"speed must be above 0, got {speed}")
        self.speed = speed
        self._anchor = time.time() if anchor is None else anchor
        self._mono_anchor = time.monotonic()

    def monotonic(self) -> float:
        return self._mono_anchor + self.speed * (time.monotonic() - self._mono_anchor)

    def wall(self) -> float:
        return self._anchor + self.speed * (time.time() - self._anchor)

    def real(self, seconds: float) -> float:
        """How many real seconds `seconds` on this clock take."""
        return seconds / self.speed

    def scheduler(self, loop: asyncio.AbstractEventLoop) -> Scheduler:
        """The engine's scheduler on `loop`: run a callback at a time on this clock, from any
        thread (the engine calls it holding a key's lock, so it only queues)."""

        def schedule(when: float, callback: Callable[[], Any]) -> None:
            delay = max(0.0, self.real(when - self.monotonic()))
            loop.call_soon_threadsafe(loop.call_later, delay, callback)

        return schedule
