"""Waits on premises: the one way a test waits for something that happens in real time.

The suite shares its cores with other work, so nothing a test waits for has a known duration: a
test polls the condition that shows what it waits for (a call reached the upstream, a message
crossed Redis, a file appeared) and goes on the moment it holds. The bound only stops a hang
from holding the run: it is generous, and passing it fails the test naming what never came.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

#: Long enough that a loaded machine never reaches it; only a hang does.
BOUND_SECONDS = 60.0
#: Often enough that a test goes on at once, seldom enough to leave the cores to the product.
EVERY_SECONDS = 0.02


def wait_until(
    condition: Callable[[], bool], what: str = "the condition", seconds: float = BOUND_SECONDS
) -> None:
    """Blocks until `condition()` holds; fails naming `what` once `seconds` pass without it."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        time.sleep(EVERY_SECONDS)


async def eventually(
    condition: Callable[[], Awaitable[bool] | bool], what: str, seconds: float = BOUND_SECONDS
) -> None:
    """`wait_until` for a coroutine: the condition may be awaitable, and the loop keeps running
    between looks, so the product under test, on the same loop, can make it true."""
    deadline = time.monotonic() + seconds
    while not await _value(condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds:g} s: {what}")
        await asyncio.sleep(EVERY_SECONDS)


def signal_taken(pid: int, signum: int) -> bool:
    """The signal sent to process `pid` is no longer pending (Linux's ShdPnd): one of its
    threads took it and its C handler ran, so its Python handler runs before the main thread
    goes on. What a test waits for after a signal, where the process says nothing."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("ShdPnd:"):
            return not int(line.split()[1], 16) & (1 << (signum - 1))
    raise AssertionError(f"no ShdPnd line for process {pid}")


async def _value(result: Awaitable[bool] | bool) -> bool:
    return await result if inspect.isawaitable(result) else result
