"""An asyncio loop whose clock is simulated: instant (as fast as it can) or sped up.

Timers, `asyncio.sleep` and `asyncio.timeout` all read `loop.time()`, so replacing that clock
and the selector's wait runs the real harness, httpx and fixtures in simulated seconds: a 30 s
timeout costs nothing in instant mode and 30/speed seconds when sped up.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine
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
        if ready or timeout == 0:
            return ready
        if timeout is None or self._loop.working:
            # A thread working for the loop (a commit being awaited) takes real time, in which
            # simulated time stands still: wait for it to call back instead of jumping ahead.
            return super().select(None)
        self._loop.jump(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, speed: float | None = None, start: float = 0.0) -> None:
        if speed is not None and speed <= 0:
            raise ValueError(f"speed must be positive, got {speed}")
        self.speed = speed
        self._virtual = start
        self._real_start = time.monotonic()
        #: Jobs handed to an executor and not yet back (`asyncio.to_thread` among them).
        self.working = 0
        super().__init__(_SimulatedWaitSelector(self))

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Callable[..., T], *args: Any
    ) -> asyncio.Future[T]:
        self.working += 1
        future = super().run_in_executor(executor, func, *args)
        future.add_done_callback(self._back)
        return future

    def _back(self, _: object) -> None:
        self.working -= 1

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
