"""Connections to platforms, bounded in total and per agent (DESIGN, "A shared service").

One aiohttp pool served every agent, so one agent holding 260 streams it never read took all
256 connections, and other agents' calls waited out their deadline for one and were counted
against their own breakers while the platform was healthy. A call now takes a slot before its
first request and gives it back when its answer has been relayed (a stream's end included): an
agent can hold at most its own bound, and a call that finds no slot within `wait` real seconds
because of these bounds gets the gateway's own answer (`gateway_busy`), never counted.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from dataclasses import dataclass

TOTAL = "max_connections"
PER_AGENT = "max_connections_per_agent"


class Busy(Exception):
    """No slot within the wait: `limit` names the bound that was full."""

    def __init__(self, limit: str) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass(slots=True)
class _Waiter:
    agent: str
    granted: asyncio.Future[None]


class Slots:
    def __init__(self, total: int, per_agent: int, agents: dict[str, int] | None = None) -> None:
        self.total = total
        self.per_agent = per_agent
        self._own = dict(agents or {})
        self.used = 0
        self.by_agent: Counter[str] = Counter()
        self._waiters: deque[_Waiter] = deque()

    def bound(self, agent: str) -> int:
        return self._own.get(agent, self.per_agent)

    def _fits(self, agent: str) -> bool:
        return self.used < self.total and self.by_agent[agent] < self.bound(agent)

    def _take(self, agent: str) -> None:
        self.used += 1
        self.by_agent[agent] += 1

    def try_take(self, agent: str) -> bool:
        """A slot now if this agent's call fits (no coroutine: most calls never wait). Calls
        already waiting cannot be jumped: a freed slot goes to them before anyone else can
        ask, so a waiter exists while the total has room only when its own agent is full,
        and that must not hold up another agent's call."""
        if self._fits(agent):
            self._take(agent)
            return True
        return False

    async def take(self, agent: str, wait: float) -> None:
        """A slot for one call of `agent`, or `Busy` after `wait` seconds without one. Calls
        that wait are served in arrival order as slots they fit in come free."""
        if self.try_take(agent):
            return
        waiter = _Waiter(agent, asyncio.get_running_loop().create_future())
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait):
                await waiter.granted
        except TimeoutError:
            if _granted(waiter):
                return  # granted just as the wait ran out: it is ours
            self._waiters.remove(waiter)
            raise Busy(self._full(agent)) from None
        except asyncio.CancelledError:
            if _granted(waiter):
                self.give_back(agent)  # granted as the call was cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def _full(self, agent: str) -> str:
        """The bound this agent's call met: its own first, since that is the one it can fix."""
        return PER_AGENT if self.by_agent[agent] >= self.bound(agent) else TOTAL

    def give_back(self, agent: str) -> None:
        self.used -= 1
        left = self.by_agent[agent] - 1
        if left:
            self.by_agent[agent] = left
        else:
            del self.by_agent[agent]
        self._grant()

    def _grant(self) -> None:
        """Hand free slots to the first waiters that fit (one whose own agent is at its bound
        does not hold up another agent's call behind it)."""
        for waiter in list(self._waiters):
            if self.used >= self.total:
                return
            if waiter.granted.done() or not self._fits(waiter.agent):
                continue  # cancelled, not yet gone from the queue; or its agent is full
            self._waiters.remove(waiter)
            self._take(waiter.agent)
            waiter.granted.set_result(None)


def _granted(waiter: _Waiter) -> bool:
    """Whether a slot was handed to the waiter (a wait cut short cancels its future instead)."""
    return waiter.granted.done() and not waiter.granted.cancelled()
