"""An asyncio loop whose clock is simulated: instant (as fast as it can) or sped up.

Timers, `asyncio.sleep` and `asyncio.timeout` all read `loop.time()`, so replacing that clock
and the selector's wait runs the real harness, httpx and fixtures in simulated seconds: a 30 s
timeout costs nothing in instant mode and 30/speed seconds when sped up.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _SimulatedWaitSelector(selectors.DefaultSelector):
    """Waits in simulated time; still wakes for `call_soon_threadsafe` and real sockets."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        super().__init__()
        self._loop = loop

    def select(self, timeout: float | None = None) -> list[Any]:
        speed = self._loop.speed
        if speed is not None:
            return super().select(None if timeout is None else timeout / speed)
        ready = super().select(0)
        if ready or timeout is None:
            return ready or super().select(None)
        self._loop.jump(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, speed: float | None = None, start: float = 0.0) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.speed = speed
        self._virtual = start
        self._real_start = time.monotonic()
        super().__init__(_SimulatedWaitSelector(self))

    def time(self) -> float:
        if self.speed is None:
            return self._virtual
        return self._virtual + (time.monotonic() - self._real_start) * self.speed

    def jump(self, seconds: float) -> None:
        self._virtual += seconds


def run_virtual(main: Coroutine[Any, Any, T], speed: float | None = None) -> T:
    """`asyncio.run` on a simulated clock."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(speed)) as runner:
        return runner.run(main)
