"""The peer breakers, each used through its own public API as its README shows it.

Where a peer has no call to open it, it is opened the way production opens it: by failures.
A refusal is caught and turned into the same structured result and denial record as ours,
with the time left taken from the peer's own API where it has one.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from importlib.metadata import version
from typing import Any, TypeVar

import aiobreaker
import circuitbreaker
import pybreaker
from purgatory import AsyncCircuitBreakerFactory, SyncCircuitBreakerFactory
from purgatory.domain.model import OpenedState

from bench.common import (
    ALTERNATIVES,
    KEY,
    TOOL,
    Boom,
    denial_event,
    halt_body,
    make_sink,
    open_reason,
    work,
)
from breakerdeck.engine import results

T = TypeVar("T")
THRESHOLD = 3
LAST = "Boom: backend down"
_names = itertools.count(1)


def _fast_fails(
    guarded: Callable[[], Any], error: type[BaseException], left: Callable[[Any], float]
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """A tool `circuit_open` result and an agent 403 body around a peer's refusal."""
    sink = make_sink()

    def tool() -> Any:
        try:
            return guarded()
        except error as refusal:
            retry_after = left(refusal)
            sink.append(denial_event(KEY, retry_after))
            return results.circuit_open(
                TOOL, open_reason(KEY, THRESHOLD, LAST), retry_after, ALTERNATIVES
            )

    def agent() -> Any:
        try:
            return guarded()
        except error as refusal:
            retry_after = left(refusal)
            sink.append(denial_event(KEY, retry_after))
            return halt_body(retry_after)

    return tool, agent


class PyBreaker:
    """pybreaker: decorator for sync; `calling()` context manager around an await (no asyncio
    decorator: its async path is Tornado's)."""

    label = f"pybreaker {version('pybreaker')}"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.cb = pybreaker.CircuitBreaker(fail_max=THRESHOLD, reset_timeout=cooldown)

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        return self.cb(fn)

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        cb = self.cb

        async def guarded() -> Any:
            with cb.calling():
                return await afn()

        return guarded

    def trip(self) -> None:
        self.cb.open()

    def _fast_fails(self) -> tuple[Callable[[], Any], Callable[[], Any]]:
        self.trip()
        cb = self.cb
        # No public "time left": the configured reset_timeout is the best the API offers.
        return _fast_fails(cb(work), pybreaker.CircuitBreakerError, lambda _: cb.reset_timeout)

    def fast_fail_tool(self) -> Callable[[], Any]:
        return self._fast_fails()[0]

    def fast_fail_agent(self) -> Callable[[], Any]:
        return self._fast_fails()[1]

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        return lambda key: pybreaker.CircuitBreaker(fail_max=THRESHOLD, reset_timeout=30, name=key)


class CircuitBreakerPkg:
    """circuitbreaker: one CircuitBreaker used as the decorator of the function/coroutine."""

    label = f"circuitbreaker {version('circuitbreaker')}"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.cb = circuitbreaker.CircuitBreaker(
            failure_threshold=THRESHOLD, recovery_timeout=cooldown, name=f"bench-{next(_names)}"
        )

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        return self.cb(fn)

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        return self.cb(afn)

    def trip(self) -> None:
        # No public open(): fail through it, as production would.
        for _ in range(THRESHOLD):
            try:
                with self.cb:
                    raise Boom("backend down")
            except Boom:
                pass

    def _fast_fails(self) -> tuple[Callable[[], Any], Callable[[], Any]]:
        self.trip()
        cb = self.cb
        return _fast_fails(
            cb(work), circuitbreaker.CircuitBreakerError, lambda _: cb.open_remaining
        )

    def fast_fail_tool(self) -> Callable[[], Any]:
        return self._fast_fails()[0]

    def fast_fail_agent(self) -> Callable[[], Any]:
        return self._fast_fails()[1]

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        return lambda key: circuitbreaker.CircuitBreaker(
            failure_threshold=THRESHOLD, recovery_timeout=30, name=key
        )


class AioBreaker:
    """aiobreaker: the breaker as decorator, for the function and for the coroutine."""

    label = f"aiobreaker {version('aiobreaker')}"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.cb = aiobreaker.CircuitBreaker(
            fail_max=THRESHOLD, timeout_duration=timedelta(seconds=cooldown)
        )

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        return self.cb(fn)

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        return self.cb(afn)

    def trip(self) -> None:
        self.cb.open()

    def _fast_fails(self) -> tuple[Callable[[], Any], Callable[[], Any]]:
        self.trip()
        return _fast_fails(
            self.cb(work),
            aiobreaker.CircuitBreakerError,
            lambda e: e.time_remaining.total_seconds(),
        )

    def fast_fail_tool(self) -> Callable[[], Any]:
        return self._fast_fails()[0]

    def fast_fail_agent(self) -> Callable[[], Any]:
        return self._fast_fails()[1]

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        return lambda key: aiobreaker.CircuitBreaker(
            fail_max=THRESHOLD, timeout_duration=timedelta(seconds=30), name=key
        )


def _run(coro: Coroutine[Any, Any, T]) -> T:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


class Purgatory:
    """purgatory: a breaker fetched once from the factory, used as a (async) context manager,
    its fastest form (its decorator fetches the breaker from the repository on every call)."""

    label = f"purgatory {version('purgatory')}"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.name = f"bench-{next(_names)}"
        self.factory = SyncCircuitBreakerFactory(default_threshold=THRESHOLD, default_ttl=cooldown)
        self.brk = self.factory.get_breaker(self.name)
        self.afactory = AsyncCircuitBreakerFactory(
            default_threshold=THRESHOLD, default_ttl=cooldown
        )
        self.abrk = _run(self.afactory.get_breaker(self.name))

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        brk = self.brk

        def guarded() -> Any:
            with brk:
                return fn()

        return guarded

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        brk = self.abrk

        async def guarded() -> Any:
            async with brk:
                return await afn()

        return guarded

    def trip(self) -> None:
        # No public open(): fail through it (both the sync and the async factory's breaker).
        for _ in range(THRESHOLD):
            try:
                with self.brk:
                    raise Boom("backend down")
            except Boom:
                pass

        async def fail() -> None:
            for _ in range(THRESHOLD):
                try:
                    async with self.abrk:
                        raise Boom("backend down")
                except Boom:
                    pass

        _run(fail())

    def _fast_fails(self) -> tuple[Callable[[], Any], Callable[[], Any]]:
        self.trip()
        ttl = self.brk.context.ttl
        return _fast_fails(self.guard(work), OpenedState, lambda e: e.opened_at + ttl - time.time())

    def fast_fail_tool(self) -> Callable[[], Any]:
        return self._fast_fails()[0]

    def fast_fail_agent(self) -> Callable[[], Any]:
        return self._fast_fails()[1]

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        factory = SyncCircuitBreakerFactory(default_threshold=THRESHOLD, default_ttl=30)

        def make(key: str) -> Any:
            return factory.get_breaker(key).context

        make.keep = factory  # type: ignore[attr-defined]
        return make


SUBJECTS = (PyBreaker, CircuitBreakerPkg, AioBreaker, Purgatory)
