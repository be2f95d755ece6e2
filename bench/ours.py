"""breakerdeck's engine, used the three ways an adopter would use it.

(a) the pure core `Breaker`: the adopter reads the clock, admits, calls, records;
(b) the `Engine`: call tickets, `call.completed` / `call.denied` lines to its listeners;
(c) the harness (`Harness.guard`, `Harness.call_tool`) and, for the agent body, `Gateway.call`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import httpx

from bench.common import (
    AGENT,
    ALTERNATIVES,
    BACKEND,
    KEY,
    TOOL,
    Boom,
    denial_event,
    make_sink,
    open_reason,
    work,
)
from breakerdeck.engine import results
from breakerdeck.engine.clock import SystemClock
from breakerdeck.engine.core.breaker import Breaker
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.gateway import Gateway
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy

LEASE = 30.0
PLATFORM = "crm"


def _failed(error: BaseException) -> Outcome:
    return Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail=str(error))


AUTH_FAILED = Outcome(OutcomeClass.AUTH_FAILURE, counted=True, detail="refresh failed")


def tool_policy(cooldown: float) -> ToolPolicy:
    return ToolPolicy(ladder_seconds=(cooldown,) * 4)


def agent_policy(cooldown: float) -> AgentPolicy:
    return AgentPolicy(cooldown_seconds=cooldown)


class Core:
    """(a) The sans-I/O core. Under threads the adopter holds a lock around admit and record."""

    label = "ours (a) core Breaker"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.breaker = Breaker(KEY, tool_policy(cooldown))
        self.ids = itertools.count(1)
        self.sink = make_sink()
        self.lock = threading.Lock() if threaded else None
        self.cooldown = cooldown

    def _deny_tool(self, admission: Any) -> dict[str, Any]:
        b = self.breaker
        self.sink.append(denial_event(KEY, admission.retry_after))
        reason = open_reason(KEY, b.count, b.last_failure_detail)
        return results.denied(TOOL, admission, reason, ALTERNATIVES)

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        if self.lock is not None:
            return self._guard_locked(fn)
        b, ids, sink, mono, deny = (
            self.breaker,
            self.ids,
            self.sink,
            time.monotonic,
            self._deny_tool,
        )

        def guarded() -> Any:
            call_id = next(ids)
            admission, transitions = b.admit(call_id, mono(), LEASE)
            if transitions:
                sink.extend(transitions)
            if not admission.allowed:
                return deny(admission)
            try:
                value = fn()
            except Exception as error:
                transitions = b.record(call_id, _failed(error), mono())
                if transitions:
                    sink.extend(transitions)
                raise
            transitions = b.record(call_id, SUCCESS, mono())
            if transitions:
                sink.extend(transitions)
            return value

        return guarded

    def _guard_locked(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        b, ids, sink, mono, deny = (
            self.breaker,
            self.ids,
            self.sink,
            time.monotonic,
            self._deny_tool,
        )
        lock = self.lock
        assert lock is not None

        def guarded() -> Any:
            call_id = next(ids)
            with lock:
                admission, transitions = b.admit(call_id, mono(), LEASE)
                sink.extend(transitions)
                if not admission.allowed:
                    return deny(admission)
            try:
                value = fn()
            except Exception as error:
                with lock:
                    sink.extend(b.record(call_id, _failed(error), mono()))
                raise
            with lock:
                sink.extend(b.record(call_id, SUCCESS, mono()))
            return value

        return guarded

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        b, ids, sink, mono, deny = (
            self.breaker,
            self.ids,
            self.sink,
            time.monotonic,
            self._deny_tool,
        )

        async def guarded() -> Any:
            call_id = next(ids)
            admission, transitions = b.admit(call_id, mono(), LEASE)
            if transitions:
                sink.extend(transitions)
            if not admission.allowed:
                return deny(admission)
            try:
                value = await afn()
            except Exception as error:
                transitions = b.record(call_id, _failed(error), mono())
                if transitions:
                    sink.extend(transitions)
                raise
            transitions = b.record(call_id, SUCCESS, mono())
            if transitions:
                sink.extend(transitions)
            return value

        return guarded

    def trip(self) -> None:
        now = time.monotonic()
        for _ in range(self.breaker.policy.threshold(OutcomeClass.UPSTREAM_FAILURE)):
            self.breaker.record(next(self.ids), _failed(Boom("backend down")), now)

    def fast_fail_tool(self) -> Callable[[], Any]:
        self.trip()
        return self.guard(work)

    def fast_fail_agent(self) -> Callable[[], Any]:
        b = Breaker(AGENT, agent_policy(self.cooldown))
        ids, sink, mono = self.ids, self.sink, time.monotonic
        now = mono()
        for _ in range(3):
            b.record(next(ids), AUTH_FAILED, now)

        def guarded() -> Any:
            call_id = next(ids)
            admission, transitions = b.admit(call_id, mono(), LEASE)
            if transitions:
                sink.extend(transitions)
            if not admission.allowed:
                sink.append(denial_event(AGENT, admission.retry_after))
                return results.agent_halted(admission).body
            return work()

        return guarded

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        policy = ToolPolicy()
        return lambda key: Breaker(key, policy)


class EngineSubject:
    """(b) The engine: tickets, lines to a listener (a bounded hand-off), no state_dir."""

    label = "ours (b) Engine"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        self.cooldown = cooldown
        self.sink = make_sink()
        self.engine = Engine(tool_policy(cooldown), clock=SystemClock())
        self.engine.subscribe(self.sink.append)

    def _ticket(self) -> Any:
        return self.engine.new_call(
            key=KEY, agent=AGENT, platform=BACKEND, tool=TOOL, deadline_seconds=LEASE
        )

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        engine = self.engine

        def guarded() -> Any:
            call = engine.new_call(
                key=KEY, agent=AGENT, platform=BACKEND, tool=TOOL, deadline_seconds=LEASE
            )
            admission = engine.admit(call, LEASE)
            if not admission.allowed:
                b = engine.breaker(KEY)
                reason = open_reason(KEY, b.count, b.last_failure_detail)
                return results.denied(TOOL, admission, reason, ALTERNATIVES)
            call.attempts = 1
            try:
                value = fn()
            except Exception as error:
                engine.complete(call, _failed(error), fault="error", agent_status="tool_error")
                raise
            engine.complete(call, SUCCESS, fault="ok", agent_status="ok")
            return value

        return guarded

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        engine = self.engine

        async def guarded() -> Any:
            call = engine.new_call(
                key=KEY, agent=AGENT, platform=BACKEND, tool=TOOL, deadline_seconds=LEASE
            )
            admission = engine.admit(call, LEASE)
            if not admission.allowed:
                b = engine.breaker(KEY)
                reason = open_reason(KEY, b.count, b.last_failure_detail)
                return results.denied(TOOL, admission, reason, ALTERNATIVES)
            call.attempts = 1
            try:
                value = await afn()
            except Exception as error:
                engine.complete(call, _failed(error), fault="error", agent_status="tool_error")
                raise
            engine.complete(call, SUCCESS, fault="ok", agent_status="ok")
            return value

        return guarded

    def trip(self) -> None:
        for _ in range(3):
            call = self._ticket()
            self.engine.admit(call, LEASE)
            self.engine.complete(
                call, _failed(Boom("backend down")), fault="error", agent_status="tool_error"
            )

    def fast_fail_tool(self) -> Callable[[], Any]:
        self.trip()
        return self.guard(work)

    def _agent_engine(self) -> Engine:
        engine = Engine(agent_policy(self.cooldown), clock=SystemClock())
        engine.subscribe(self.sink.append)
        for _ in range(3):
            call = engine.new_call(
                key=AGENT, agent=AGENT, platform=PLATFORM, tool=PLATFORM, deadline_seconds=30.0
            )
            engine.admit(call, 90.0)
            engine.complete(call, AUTH_FAILED, fault="http_401", agent_status=401)
        return engine

    def fast_fail_agent(self) -> Callable[[], Any]:
        engine = self._agent_engine()

        def guarded() -> Any:
            call = engine.new_call(
                key=AGENT, agent=AGENT, platform=PLATFORM, tool=PLATFORM, deadline_seconds=30.0
            )
            admission = engine.admit(call, 90.0)
            if not admission.allowed:
                return results.agent_halted(admission).body
            return work()

        return guarded

    @staticmethod
    def memory_factory() -> Callable[[str], Any]:
        engine = Engine(ToolPolicy(), clock=SystemClock())

        def make(key: str) -> None:
            engine.new_call(key=key, agent=AGENT, platform=BACKEND, tool=TOOL, deadline_seconds=30)

        make.keep = engine  # type: ignore[attr-defined]
        return make


class HarnessSubject(EngineSubject):
    """(c) The harness: `Harness.guard` (sync), `Harness.call_tool` (async), `Gateway.call`."""

    label = "ours (c) Harness/Gateway"

    def __init__(self, cooldown: float, threaded: bool = False) -> None:
        super().__init__(cooldown, threaded)
        self.harness = Harness(self.engine)
        self.harness.register(Tool(name=TOOL, backend=BACKEND, attempts=1, function=_noop))
        self._tools = itertools.count(1)

    def guard(self, fn: Callable[[], Any]) -> Callable[[], Any]:
        return self.harness.guard(TOOL)(fn)

    def guard_async(self, afn: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[Any]]:
        name = f"{TOOL}-{next(self._tools)}"
        self.harness.register(Tool(name=name, backend=BACKEND, attempts=1, function=afn))
        return partial(self.harness.call_tool, AGENT, name)

    def trip(self) -> None:
        failing = self.harness.guard(TOOL)(_boom)
        for _ in range(3):
            failing()

    fast_fail_agent_is_async = True

    def fast_fail_agent(self) -> Callable[[], Any]:
        # Refused before the vault or the client is used: neither is ever called.
        client = httpx.AsyncClient(base_url=f"https://{PLATFORM}.example")
        gateway = Gateway(self._agent_engine(), {PLATFORM: client}, vault=None)  # type: ignore[arg-type]
        return partial(gateway.call, AGENT, PLATFORM)

    memory_factory = None  # type: ignore[assignment]


async def _noop(arg: Any = None) -> Any:
    return arg


def _boom(arg: Any = None) -> Any:
    raise Boom("backend down")


SUBJECTS = (Core, EngineSubject, HarnessSubject)


class Durability:
    """The Engine with and without a state dir under the loads a state dir makes costly:
    counted failures (a counter to persist, an audit row each), trips (committed before the
    call returns, then a reset, also committed) and a refusal flood (an audit row each)."""

    FAILURES = 20_000
    TRIPS = 200
    DENIALS = 100_000

    def __init__(self, state_dir: str | None) -> None:
        self.engine = Engine(ToolPolicy(), clock=SystemClock(), state_dir=state_dir)
        self.engine.subscribe(make_sink().append)
        self._keys = itertools.count()

    def _call(self, key: str, outcome: Outcome) -> bool:
        call = self.engine.new_call(
            key=key, agent=AGENT, platform=BACKEND, tool=TOOL, deadline_seconds=LEASE
        )
        if not self.engine.admit(call, LEASE).allowed:
            return False
        call.attempts = 1
        self.engine.complete(call, outcome, fault="error", agent_status="tool_error")
        return True

    def counted_failure(self) -> float:
        """Seconds per counted failure that does not trip (failure, success, failure, ...)."""
        failure = _failed(Boom("backend down"))
        start = time.perf_counter()
        for i in range(self.FAILURES):
            self._call(KEY, failure if i % 2 else SUCCESS)
        return (time.perf_counter() - start) / self.FAILURES

    def trip_and_reset(self) -> float:
        """Seconds per trip (three counted failures) and the operator's reset after it."""
        failure = _failed(Boom("backend down"))
        start = time.perf_counter()
        for _ in range(self.TRIPS):
            key = f"trips-{next(self._keys) % 20}@default"
            for _ in range(3):
                self._call(key, failure)
            self.engine.reset(key, actor="bench", reason="again")
        return (time.perf_counter() - start) / self.TRIPS

    def denial(self) -> float:
        """Seconds per refusal on an open breaker (a `call.denied` line each)."""
        failure = _failed(Boom("backend down"))
        for _ in range(3):
            self._call("flood@default", failure)
        start = time.perf_counter()
        for _ in range(self.DENIALS):
            self._call("flood@default", failure)
        return (time.perf_counter() - start) / self.DENIALS

    def close(self) -> list[str]:
        problems = self.engine.problems
        self.engine.close()
        return problems
