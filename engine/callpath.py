"""One call's path through a shell, written once for the harness and the gateway.

Both shells do the same thing around their own attempts: ask the breaker (after the opt-in
probe wait), make an attempt and more while the budget wants a retry (sleeping its wait and
asking the breaker again first), complete the call with the budget's last outcome, then
answer. The budget decides and holds the call's state (sans I/O); the shell only makes one
attempt (`CallPath._attempt`) and words a refusal (`CallPath._denied`). The loop is written
twice, as a thin async driver (`_run`) and a thin sync one (`_run_sync`, for `Harness.guard`
on a plain function), over the same budget. Refusals before the breaker are each shell's own
(their checks differ) and end in `CallPath._refused`, so they are written alike.

Nothing here is made per call: the budget is the only object a call adds.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from breakerdeck.engine.breaker import Admission
from breakerdeck.engine.deadline import Deadlines
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.outcomes import Outcome
from breakerdeck.engine.probewait import ProbeWaits

A = TypeVar("A")
A_contra = TypeVar("A_contra", contravariant=True)
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: What `Engine.complete` takes: outcome, fault, agent status, refresh, platform status.
Completion = tuple[Outcome, str, int | str, str | None, int | None]


class Budget(Protocol[A_contra, R_co]):
    """One admitted call's decisions (see `harness.RetryBudget`)."""

    call: Call

    def more(self) -> bool: ...
    def wait(self) -> float: ...
    def recheck(self) -> bool: ...
    def report(self, attempt: A_contra) -> None: ...
    def completion(self) -> Completion: ...
    def answer(self) -> R_co: ...


B = TypeVar("B", bound=Budget[Any, Any])


class OneAttempt:
    """The budget part of a call that is never retried (the gateway's: its refresh-and-resend
    happens inside its one attempt). `wait` and `recheck` are never asked, since `more` never
    says yes; they complete the `Budget` protocol."""

    __slots__ = ()

    def more(self) -> bool:
        return False

    def wait(self) -> float:
        return 0.0

    def recheck(self) -> bool:
        return True


class CallPath(ABC, Generic[B, A, R]):
    """A shell: `engine`, one attempt, the answer to a refusal."""

    engine: Engine
    _deadlines: Deadlines | None = None
    _waits: ProbeWaits | None = None

    def _loop_deadlines(self) -> Deadlines:
        """The attempts' deadlines on the running loop (kept: one timer serves them all)."""
        deadlines = self._deadlines
        loop = asyncio.get_running_loop()
        if deadlines is None or deadlines.loop is not loop:  # first use, or another loop
            deadlines = self._deadlines = Deadlines(loop)
        return deadlines

    async def _run(self, budget: B, lease: float, wait_seconds: float = 0.0) -> R:
        """Admit (after waiting up to `wait_seconds` for an outstanding probe), attempt (again
        while the budget wants a retry), complete, answer."""
        engine = self.engine
        call = budget.call
        if wait_seconds > 0:
            admission = await self._probe_waits().admit(call, lease, wait_seconds)
        else:
            admission = await engine.admit_async(call, lease)
        if not admission.allowed:
            return self._denied(budget, admission)
        budget.report(await self._attempt(budget))
        while budget.more():
            await asyncio.sleep(budget.wait())
            if not budget.recheck():
                break
            budget.report(await self._attempt(budget))
        await engine.complete_async(call, *budget.completion())
        if call.admitted_as == "probe" and self._waits is not None:
            self._waits.wake(call.key)
        answer: R = budget.answer()
        return answer

    def _run_sync(
        self, budget: B, lease: float, attempt: Callable[[], A], sleep: Callable[[float], None]
    ) -> R:
        """`_run` for a caller without an event loop: the same steps over the same budget,
        `attempt` making one attempt (and counting it). No probe wait: it needs a loop."""
        engine = self.engine
        call = budget.call
        admission = engine.admit(call, lease)
        if not admission.allowed:
            return self._denied(budget, admission)
        budget.report(attempt())
        while budget.more():
            sleep(budget.wait())
            if not budget.recheck():
                break
            budget.report(attempt())
        engine.complete(call, *budget.completion())
        answer: R = budget.answer()
        return answer

    def _probe_waits(self) -> ProbeWaits:
        waits = self._waits
        if waits is None:
            waits = self._waits = ProbeWaits(self.engine)
        return waits

    def _refused(self, call: Call, outcome: Outcome, status: int | str, answer: R) -> R:
        """A refusal before the breaker: its line (attempts 0, never counted), its answer."""
        self.engine.refuse(call, outcome, status)
        return answer

    @abstractmethod
    async def _attempt(self, budget: B) -> A:
        """One attempt, counted in `budget.call.attempts` by the shell (the gateway counts a
        resend after a refresh as a second one)."""

    @abstractmethod
    def _denied(self, budget: B, admission: Admission) -> R:
        """The answer when the breaker refuses."""
