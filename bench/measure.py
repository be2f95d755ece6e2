"""Timing, concurrency and memory measurements. Printed, never asserted."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import sys
import threading
import time
import timeit
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

from bench.common import CALLERS, Reached, slow_async, slow_sync

REPEAT = 9
TARGET_SECONDS = 0.03  # per repeat
#: `beside`'s rounds: shorter and more of them than REPEAT's, so a burst of load from another
#: process spoils a few rounds' ratios rather than a whole figure.
ROUNDS = 25
ROUND_SECONDS = 0.01
HALF_OPEN_COOLDOWN = 0.2


def _number(per_call: float, seconds: float = TARGET_SECONDS) -> int:
    return max(1000, int(seconds / max(per_call, 1e-8)))


def per_call(fn: Callable[[], Any]) -> float:
    """Median seconds per call over REPEAT timeit loops (garbage collector off, as timeit)."""
    timer = timeit.Timer(fn)
    number = _number(timer.timeit(1000) / 1000)
    return statistics.median(timer.repeat(REPEAT, number)) / number


def overhead(fn: Callable[[], Any], bare: Callable[[], Any]) -> float:
    """Median over REPEAT of (guarded loop - bare loop) per call, the two loops run back to
    back in each repeat so that load from other processes hits both alike."""
    guarded_timer, bare_timer = timeit.Timer(fn), timeit.Timer(bare)
    number = _number(guarded_timer.timeit(1000) / 1000)
    diffs = [
        (guarded_timer.timeit(number) - bare_timer.timeit(number)) / number for _ in range(REPEAT)
    ]
    return statistics.median(diffs)


async def _loop(afn: Callable[[], Awaitable[Any]], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        await afn()
    return time.perf_counter() - start


def _async_times(
    loop: asyncio.AbstractEventLoop,
    afns: list[Callable[[], Awaitable[Any]]],
    repeat: int = REPEAT,
    seconds: float = TARGET_SECONDS,
) -> list[list[float]]:
    number = _number(loop.run_until_complete(_loop(afns[0], 1000)) / 1000, seconds)
    enabled = gc.isenabled()
    gc.disable()
    try:
        rounds = [
            [loop.run_until_complete(_loop(afn, number)) / number for afn in afns]
            for _ in range(repeat)
        ]
    finally:
        if enabled:
            gc.enable()
    return rounds


def per_call_async(loop: asyncio.AbstractEventLoop, afn: Callable[[], Awaitable[Any]]) -> float:
    """Median seconds per awaited call, awaited in a loop inside one task."""
    return statistics.median(r[0] for r in _async_times(loop, [afn]))


def overhead_async(
    loop: asyncio.AbstractEventLoop,
    afn: Callable[[], Awaitable[Any]],
    bare: Callable[[], Awaitable[Any]],
) -> float:
    return statistics.median(g - b for g, b in _async_times(loop, [afn, bare]))


def beside(
    ours: Callable[[], Any],
    peer: Callable[[], Any],
    bare: Callable[[], Any],
    *,
    gc_on: bool = False,
) -> tuple[float, float, float]:
    """Our overhead, the peer's, and the median of their ratio per round: each of ROUNDS
    rounds runs bare, ours and the peer back to back, so load from other processes (this
    machine is shared) hits all three alike and a ratio is read within one round.

    `gc_on`: with the garbage collector running, as in users' processes (timeit turns it off):
    a call that leaves objects behind (a line a listener keeps) pays for their collection."""
    setup = "import gc; gc.enable()" if gc_on else "pass"
    timers = [timeit.Timer(fn, setup) for fn in (bare, ours, peer)]
    number = _number(timers[1].timeit(1000) / 1000, ROUND_SECONDS)
    rounds = [[t.timeit(number) / number for t in timers] for _ in range(ROUNDS)]
    return _beside(rounds)


def beside_async(
    loop: asyncio.AbstractEventLoop,
    ours: Callable[[], Awaitable[Any]],
    peer: Callable[[], Awaitable[Any]],
    bare: Callable[[], Awaitable[Any]],
) -> tuple[float, float, float]:
    """`beside` for coroutines, each awaited in a loop inside one task."""
    times = _async_times(loop, [ours, peer, bare], ROUNDS, ROUND_SECONDS)
    return _beside([[b, o, p] for o, p, b in times])


def _beside(rounds: list[list[float]]) -> tuple[float, float, float]:
    ours = [o - b for b, o, _ in rounds]
    peer = [p - b for b, _, p in rounds]
    ratios = [o / p for o, p in zip(ours, peer, strict=True) if p > 0]
    return statistics.median(ours), statistics.median(peer), statistics.median(ratios)


def _threads(target: Callable[[], Any], barrier: threading.Barrier) -> list[threading.Thread]:
    def caller() -> None:
        barrier.wait()
        with contextlib.suppress(Exception):
            target()

    threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    return threads


async def _gather(afn: Callable[[], Awaitable[Any]]) -> None:
    async def caller() -> None:
        with contextlib.suppress(Exception):
            await afn()

    await asyncio.gather(*(caller() for _ in range(CALLERS)))


def half_open_threads(make: Callable[..., Any]) -> int:
    """CALLERS threads released together into a half-open breaker guarding a still-dead 50 ms
    function: how many got into the function."""
    subject = make(HALF_OPEN_COOLDOWN, threaded=True)
    reached = Reached()
    guarded = subject.guard(reached.dead_sync)
    subject.trip()
    time.sleep(HALF_OPEN_COOLDOWN * 1.5)
    for thread in _threads(guarded, threading.Barrier(CALLERS)):
        thread.join()
    return reached.count


def half_open_tasks(loop: asyncio.AbstractEventLoop, make: Callable[..., Any]) -> int:
    subject = make(HALF_OPEN_COOLDOWN)
    reached = Reached()
    guarded = subject.guard_async(reached.dead_async)
    subject.trip()
    time.sleep(HALF_OPEN_COOLDOWN * 1.5)
    loop.run_until_complete(_gather(guarded))
    return reached.count


def closed_threads(make: Callable[..., Any]) -> float:
    """Wall seconds for CALLERS threads released together through a closed breaker into a
    healthy 50 ms function (from the release to the last join)."""
    subject = make(3600.0, threaded=True)
    guarded = subject.guard(slow_sync)
    barrier = threading.Barrier(CALLERS + 1)
    threads = _threads(guarded, barrier)
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def closed_tasks(loop: asyncio.AbstractEventLoop, make: Callable[..., Any]) -> float:
    subject = make(3600.0)
    guarded = subject.guard_async(slow_async)
    start = time.perf_counter()
    loop.run_until_complete(_gather(guarded))
    return time.perf_counter() - start


def bytes_per_breaker(factory: Callable[[str], Any], count: int = 10_000) -> float:
    """Traced allocation growth per breaker, its key string included, over `count` breakers."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [factory(f"backend-{i:05d}.example.com@cred-{i:05d}") for i in range(count)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return (after - before - sys.getsizeof(kept)) / count
