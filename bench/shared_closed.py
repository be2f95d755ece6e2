"""Part 1 of bench/shared.py: the closed path with a shared store against without one, sync
and async, the two loops paired in each repeat (bench/shared.py's docstring has the method)."""

from __future__ import annotations

import asyncio
import gc
import statistics
import time
import timeit
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bench import measure
from bench.common import make_sink
from bench.shared_setup import AGENT, CLOSED_REPEATS, LEASE, US, guard, store
from breakerdeck.engine.clock import SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.outcomes import SUCCESS
from breakerdeck.engine.policy import AgentPolicy


def _guard_async(engine: Engine) -> Callable[[], Awaitable[None]]:
    enter, admit, complete = engine.enter, engine.admit_async, engine.complete_async

    async def guarded() -> None:
        call = enter(AGENT, AGENT, "up", "GET", LEASE)
        if (await admit(call, LEASE)).allowed:
            await complete(call, SUCCESS, "ok", 200)

    return guarded


Loop = Callable[[int], float]  # seconds per call over that many calls


def _sync_loop(fn: Callable[[], Any]) -> Loop:
    timer = timeit.Timer(fn)
    return lambda number: timer.timeit(number) / number


def _async_loop(loop: asyncio.AbstractEventLoop, afn: Callable[[], Awaitable[None]]) -> Loop:
    async def calls(number: int) -> float:
        start = time.perf_counter()
        for _ in range(number):
            await afn()
        return (time.perf_counter() - start) / number

    return lambda number: loop.run_until_complete(calls(number))


@dataclass
class Closed:
    """Off and on, µs per call (medians), and the median of the repeats' on ÷ off."""

    title: str
    off_us: float
    on_us: float
    ratio: float


def _paired(title: str, off: Loop, on: Loop) -> Closed:
    """Both loops in every repeat, back to back and in turn first, so that load from other
    processes (and whichever runs first) hits them alike; the garbage collector off."""
    number = max(1000, int(measure.TARGET_SECONDS / off(1000)))
    offs, ons = [], []
    enabled = gc.isenabled()
    gc.disable()
    try:
        for n in range(CLOSED_REPEATS):
            if n % 2:
                ons.append(on(number))
                offs.append(off(number))
            else:
                offs.append(off(number))
                ons.append(on(number))
    finally:
        if enabled:
            gc.enable()
    ratio = statistics.median(b / a for a, b in zip(offs, ons, strict=True))
    return Closed(title, statistics.median(offs) * US, statistics.median(ons) * US, ratio)


def closed_path(url: str) -> list[Closed]:
    loop = asyncio.new_event_loop()
    rows = []
    for listener in (False, True):
        off = Engine(AgentPolicy(), clock=SystemClock())
        on = Engine(AgentPolicy(), clock=SystemClock(), shared=store(url), instance="closed")
        for engine in (off, on):
            if listener:
                engine.subscribe(make_sink().append)
            engine.restore()
        with_what = "one listener" if listener else "no listener"
        with off, on:
            rows.append(
                _paired(f"sync, {with_what}", _sync_loop(guard(off)), _sync_loop(guard(on)))
            )
            rows.append(
                _paired(
                    f"async, {with_what}",
                    _async_loop(loop, _guard_async(off)),
                    _async_loop(loop, _guard_async(on)),
                )
            )
    loop.close()
    return rows
