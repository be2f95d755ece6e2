"""The opt-in probe wait (DESIGN, "Both policies"), shared by the harness, the gateway and the
MCP proxy: calls that arrive while a key's probe is out wait, up to their bound, for its
outcome, *before* they ask the engine, so a waiter's refusal and its `call.denied` are decided
when its wait ends, and the engine still admits exactly one probe at a time."""

from __future__ import annotations

import asyncio
import contextlib

from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.engine import Call, Engine


class ProbeWaits:
    """One event per key with waiters, set when the probe's outcome (or a reset) is known."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._done: dict[str, asyncio.Event] = {}

    def probe_out(self, key: str) -> bool:
        return self.engine.probe_out(key)

    async def wait(self, key: str, real_seconds: float) -> None:
        """Until no probe is out or the bound is spent: after an uncounted probe the first
        waiter to run becomes the next probe, and the others wait on it in turn."""
        loop = asyncio.get_running_loop()
        until = loop.time() + real_seconds
        while self.probe_out(key):
            left = until - loop.time()
            if left <= 0:
                return
            done = self._done.setdefault(key, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await done.wait()

    async def admit(self, call: Call, lease: float, wait_seconds: float) -> Admission:
        """The engine's admission, after waiting (at most `wait_seconds` on the running loop's
        clock) for the outstanding probe's outcome."""
        if wait_seconds > 0 and self.probe_out(call.key):
            await self.wait(call.key, wait_seconds)
        return await self.engine.admit_async(call, lease)

    def wake(self, key: str) -> None:
        """The probe's outcome is known (or the breaker was reset): waiters ask again."""
        done = self._done.pop(key, None)
        if done is not None:
            done.set()
