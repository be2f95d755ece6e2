"""The shell against its core's peers: issue 9's targets, each printed beside its figure.

Every row is measured in the same run as the peer it is compared with (ratios, not absolute
times, since the machine is shared). Printed, never asserted.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench import measure, ours, peers
from bench.common import AGENT, ALTERNATIVES, BACKEND, KEY, TOOL, awork, make_sink, work
from breakerdeck.engine import results
from breakerdeck.engine.breaker import ADMIT_NORMAL, Admission
from breakerdeck.engine.bus import EventBus
from breakerdeck.engine.clock import SystemClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass

US = 1e6
LEASE = 30.0
DOWN = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="backend down")
THREADS = 8
THREAD_CALLS = 20_000


@dataclass
class Row:
    title: str
    ours: float
    peer_label: str
    peer: float | None
    target: str
    #: None for a row that is a reference, not a target.
    met: bool | None


def _engine(listener: bool, loop: asyncio.AbstractEventLoop) -> Engine:
    engine = Engine(ours.tool_policy(3600.0), clock=SystemClock())
    if listener:
        bus = EventBus(engine)

        async def subscribe() -> None:
            bus.subscribe(maxsize=10_000)

        loop.run_until_complete(subscribe())
    return engine


def _engine_guard(engine: Engine, fn: Callable[[], Any], key: str = KEY) -> Callable[[], Any]:
    """A call through the Engine as docs/engine.md shows: ticket, admit, call, complete."""
    new_call, admit, complete = engine.new_call, engine.admit, engine.complete

    def guarded() -> Any:
        call = new_call(key, AGENT, BACKEND, TOOL, LEASE)
        admission = admit(call, LEASE)
        if not admission.allowed:
            b = engine.breaker(key)
            reason = f"{key} failed {b.count} times in a row"
            return results.denied(TOOL, admission, reason, ALTERNATIVES)
        call.attempts = 1
        try:
            value = fn()
        except Exception:
            complete(call, DOWN, "error", "tool_error")
            raise
        complete(call, SUCCESS, "ok", "ok")
        return value

    return guarded


class _EmptyTicket:
    __slots__ = ("agent", "attempts", "deadline", "key", "number", "platform", "tool")

    def __init__(
        self, number: int, key: str, agent: str, platform: str, tool: str, deadline: float
    ) -> None:
        self.number, self.key, self.agent = number, key, agent
        self.platform, self.tool, self.deadline = platform, tool, deadline


class _EmptyEngine:
    """The documented call shape with nothing behind it: a numbered ticket, an admission that
    always lets in, a completion that does nothing. What no engine of this shape can beat."""

    def __init__(self) -> None:
        self._numbers = itertools.count(1)

    def new_call(
        self, key: str, agent: str, platform: str, tool: str, deadline: float
    ) -> _EmptyTicket:
        return _EmptyTicket(next(self._numbers), key, agent, platform, tool, deadline)

    def admit(self, call: _EmptyTicket, lease: float) -> Admission:
        return ADMIT_NORMAL

    def complete(self, call: _EmptyTicket, outcome: Outcome, fault: str, status: str) -> None:
        return None


def _engine_guard_async(
    engine: Engine, afn: Callable[[], Awaitable[Any]]
) -> Callable[[], Awaitable[Any]]:
    new_call, admit, complete = engine.new_call, engine.admit_async, engine.complete_async

    async def guarded() -> Any:
        call = new_call(KEY, AGENT, BACKEND, TOOL, LEASE)
        admission = await admit(call, LEASE)
        if not admission.allowed:
            return None
        call.attempts = 1
        value = await afn()
        await complete(call, SUCCESS, "ok", "ok")
        return value

    return guarded


def _trip(engine: Engine, key: str = KEY) -> None:
    for _ in range(3):
        call = engine.new_call(key, AGENT, BACKEND, TOOL, LEASE)
        engine.admit(call, LEASE)
        engine.complete(call, DOWN, "error", "tool_error")


def _threads_ratio(engine: Engine, outage: bool) -> float:
    """Calls per second on 8 threads (one key each) over one thread's, same engine setup."""
    keys = [f"thread-{n}@default" for n in range(THREADS)]
    if outage:
        for key in keys:
            _trip(engine, key)
    calls = [_engine_guard(engine, work, key) for key in keys]

    def run(fn: Callable[[], Any], n: int) -> None:
        for _ in range(n):
            fn()

    start = time.perf_counter()
    run(calls[0], THREAD_CALLS)
    one = THREAD_CALLS / (time.perf_counter() - start)
    workers = [threading.Thread(target=run, args=(c, THREAD_CALLS)) for c in calls]
    start = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    many = THREADS * THREAD_CALLS / (time.perf_counter() - start)
    return many / one


def _flood_growth(engine: Engine) -> float:
    """Bytes held after the third 50,000 refusals beyond what the second left (traced from the
    first, so events the bounded listener lets go are counted as freed)."""
    _trip(engine, "flood@default")
    refuse = _engine_guard(engine, work, "flood@default")
    tracemalloc.start()
    held = []
    for _ in range(3):
        for _ in range(50_000):
            refuse()
        gc.collect()
        held.append(tracemalloc.get_traced_memory()[0])
    tracemalloc.stop()
    return float(held[2] - held[1])


def _ratio_row(
    title: str, value: float, label: str, peer: float, limit: float, lower: bool = True
) -> Row:
    ratio = value / peer
    met = ratio <= limit if lower else ratio >= limit
    return Row(title, value, label, peer, f"{'≤' if lower else '≥'} {limit}x", met)


def run() -> list[Row]:
    loop = asyncio.new_event_loop()
    rows: list[Row] = []
    purgatory = peers.Purgatory(3600.0)
    p_sync = measure.overhead(purgatory.guard(work), work) * US
    p_async = measure.overhead_async(loop, purgatory.guard_async(awork), awork) * US
    p_label = peers.Purgatory.label

    floor = measure.overhead(_engine_guard(_EmptyEngine(), work), work) * US
    rows.append(Row("(reference) the call shape alone, sync", floor, p_label, p_sync, "", None))
    for listener in (False, True):
        engine = _engine(listener, loop)
        sync = measure.overhead(_engine_guard(engine, work), work) * US
        asyn = measure.overhead_async(loop, _engine_guard_async(engine, awork), awork) * US
        limit = 4.0 if listener else 0.9
        with_what = "with the EventBus listener" if listener else "no listener"
        rows.append(
            _ratio_row(f"Engine closed call, sync, {with_what}", sync, p_label, p_sync, limit)
        )
        rows.append(
            _ratio_row(f"Engine closed call, async, {with_what}", asyn, p_label, p_async, limit)
        )

    harness_engine = _engine(False, loop)
    harness = Harness(harness_engine)
    harness.register(Tool(name=TOOL, backend=BACKEND, attempts=1, function=awork))
    guard = harness.guard(TOOL)(work)
    rows.append(
        _ratio_row(
            "Harness.guard, closed",
            measure.overhead(guard, work) * US,
            p_label,
            p_sync,
            4.0,
        )
    )
    rows.append(
        _ratio_row(
            "Harness.call_tool, closed",
            measure.overhead_async(loop, partial(harness.call_tool, AGENT, TOOL), awork) * US,
            p_label,
            p_async,
            4.0,
        )
    )

    cb = peers.CircuitBreakerPkg(3600.0)
    cb_refusal = measure.per_call(cb.fast_fail_tool()) * US
    cb_label = peers.CircuitBreakerPkg.label
    refusing = _engine(False, loop)
    _trip(refusing)
    rows.append(
        _ratio_row(
            "refusal with its result, Engine (no listener, no state dir)",
            measure.per_call(_engine_guard(refusing, work)) * US,
            cb_label,
            cb_refusal,
            1.0,
        )
    )
    refused_harness = Harness(_engine(False, loop))
    failing = refused_harness.guard(TOOL)(_boom)
    for _ in range(3):
        failing()
    rows.append(
        _ratio_row(
            "refusal with its result, Harness.guard",
            measure.per_call(failing) * US,
            cb_label,
            cb_refusal,
            1.5,
        )
    )

    for outage in (False, True):
        ratio = _threads_ratio(_engine(True, loop), outage)
        title = f"{THREADS} threads ÷ 1, distinct keys, EventBus listener" + (
            ", during an outage" if outage else ""
        )
        rows.append(Row(title, ratio, "", None, "≥ 0.9", ratio >= 0.9))

    flooded = _engine(False, loop)
    flooded.subscribe(make_sink().append)  # a bounded hand-off: what it holds is capped
    growth = _flood_growth(flooded)
    rows.append(
        Row("memory kept by 50,000 more refusals (B)", growth, "", None, "flat", growth < 64_000)
    )
    loop.close()
    return rows


def _boom() -> Any:
    raise ConnectionError("backend down")


def render(rows: list[Row]) -> str:
    lines = [
        "the shell against the best peer (issue 9), µs overhead per call unless named",
        f"  {'path':62}  {'ours':>8}  {'peer':>8}  {'ratio':>7}  {'target':>7}  met",
    ]
    for row in rows:
        peer = f"{row.peer:8.3f}" if row.peer is not None else f"{'':8}"
        ratio = f"{row.ours / row.peer:6.2f}x" if row.peer else f"{'':7}"
        ours_text = f"{row.ours:8.3f}" if row.peer is not None else f"{row.ours:8.2f}"
        lines.append(
            f"  {row.title:62}  {ours_text}  {peer}  {ratio}  {row.target:>7}  "
            f"{'—' if row.met is None else 'yes' if row.met else 'NO'}"
        )
    labels = sorted({row.peer_label for row in rows if row.peer_label})
    lines.append(f"  peers: {', '.join(labels)}")
    return "\n".join(lines)
