"""Per-attempt deadlines for one event loop, all on one timer.

`asyncio.timeout` made a context manager, a timer handle and its cancellation on every attempt:
about 45% of what `Harness.call_tool` cost. Attempts almost never reach their deadline, so
here starting and stopping one is a dict insert and a dict pop; a single timer handle stands
at the earliest deadline that may still be pending and, when it fires, cancels every task
whose deadline has passed, then stands again at the next one.

A task cancelled here is told apart from one cancelled from outside as `asyncio.timeout`
tells them apart: `stop()` withdraws a fired deadline's cancellation (`Task.uncancel()`) and
says whether any other is left. Only ours alone is a timeout; an outside cancellation (alone or
on top of ours) propagates as `CancelledError`.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
import types
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

#: The running task of each loop, as Python 3.11's `asyncio.current_task` (written in Python)
#: reads it: read here directly, since that function and its `dict.get` were two calls of every
#: attempt. None where `current_task` is written in C (3.12 on) or keeps no such table: it is
#: called then.
_TASKS: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = (
    getattr(asyncio.tasks, "_current_tasks", None)
    if isinstance(asyncio.current_task, types.FunctionType)
    else None
)


class Deadlines:
    """Deadlines for the tasks of one loop; used from that loop's thread only."""

    __slots__ = ("_expired", "_next", "_pending", "_time", "_timer", "_timer_at", "loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        #: The loop these deadlines run on (read-only).
        self.loop = loop
        # The base loop's `time()` is `time.monotonic()` behind a Python method: read the
        # clock itself unless the loop keeps its own (uvloop, a test's).
        base = type(loop).time is asyncio.BaseEventLoop.time
        self._time = time.monotonic if base else loop.time
        self._pending: dict[int, tuple[float, asyncio.Task[object], int]] = {}
        #: A fired deadline's number: how many cancellations its task had pending at start.
        self._expired: dict[int, int] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._next = itertools.count().__next__

    def start(self, seconds: float) -> int:
        """Cancel the current task `seconds` from now unless `stop()` comes first."""
        when = self._time() + seconds
        loop, tasks = self.loop, _TASKS
        task = tasks[loop] if tasks is not None and loop in tasks else asyncio.current_task(loop)
        assert task is not None, "a deadline needs a running task"
        number = self._next()
        self._pending[number] = (when, task, task.cancelling())
        if when < self._timer_at:
            self._arm(when)
        return number

    def stop(self, number: int) -> bool:
        """Stop a deadline. True when it had fired and its cancellation is the task's only one
        pending (it is withdrawn, and the caller reads the `CancelledError` as a timeout);
        False when it had not fired, or the task was also cancelled from outside."""
        pending = self._pending
        if number in pending:  # not fired: the usual case, with no call (`dict.pop` was one)
            del pending[number]
            return False
        cancelling = self._expired.pop(number)
        task = asyncio.current_task(self.loop)
        assert task is not None
        return task.uncancel() <= cancelling

    async def run(self, seconds: float, awaitable: Awaitable[T]) -> T:
        """Await `awaitable` within `seconds`, or raise TimeoutError (as `asyncio.timeout`)."""
        number = self.start(seconds)
        try:
            result = await awaitable
        except asyncio.CancelledError:
            if self.stop(number):
                raise TimeoutError from None
            raise
        except BaseException:
            self.stop(number)
            raise
        self.stop(number)
        return result

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = when
        self._timer = self.loop.call_at(when, self._fire)

    def _fire(self) -> None:
        """Cancel every task past its deadline; stand again at the earliest one left (a
        deadline stopped since is skipped then, so stopping never touches the timer)."""
        self._timer = None
        self._timer_at = math.inf
        now = self.loop.time()
        pending = self._pending
        due = [number for number, (when, _, _) in pending.items() if when <= now]
        for number in due:
            _, task, cancelling = pending.pop(number)
            if task.cancel():  # a task that ended without stopping its deadline has no stop()
                self._expired[number] = cancelling
        if pending:
            self._arm(min(when for when, _, _ in pending.values()))
