"""One call's path through a shell, written once for the harness, the gateway and the MCP proxy.

Every shell does the same thing around its own attempts: ask the breaker (after the opt-in
probe wait), make an attempt and more while the budget wants a retry (sleeping its wait and
asking the breaker again first), complete the call with the budget's last outcome, then
answer. The budget decides and holds the call's state (sans I/O); the shell only makes one
attempt (`CallPath._attempt`) and words a refusal (`CallPath._denied`). The loop is written
twice, as a thin async driver (`_run`) and a thin sync one (`_run_sync`, for `Harness.guard`
on a plain function), over the same budget, each one frame (with telemetry on, the call's
span runs it again with the attempt wrapped in its own). Refusals before the breaker are each
shell's own (their checks differ) and end in `CallPath._refused`, so they are written alike.

Every call opens with its entry (`Engine.enter`, the shell's, before its own refusals) and
closes with it (`Engine.complete`); a closed breaker lets it in and a success that changes
nothing ends it without a lock or a line when nobody reads one: the engine decides that, once.

The `tool` policy's retry rule is `Retries`, which the harness's budget and the MCP proxy's
both are: they differ in what an attempt is and in the answer, not in when to try again.

Nothing here is made per call: the budget is the only object a call adds.
"""

from __future__ import annotations

import asyncio
import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, Protocol, TypeVar

from breakerdeck.engine import results, telemetry
from breakerdeck.engine.calls.deadline import Deadlines
from breakerdeck.engine.calls.probewait import ProbeWaits
from breakerdeck.engine.core.breaker import Admission
from breakerdeck.engine.engine import Call, Engine
from breakerdeck.engine.outcomes import ABANDONING, Outcome, recorded_as
from breakerdeck.engine.results import ToolResult

A = TypeVar("A")
A_contra = TypeVar("A_contra", contravariant=True)
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

#: What `Engine.complete` takes: outcome, fault, agent status, refresh, platform status.
Completion = tuple[Outcome, str, int | str, str | None, int | None]


class Budget(Protocol[A_contra, R_co]):
    """One admitted call's decisions (see `Retries`). `answered`: the answer, once
    `completion()` has made it; None: the path asks `answer()` (one call fewer for the
    common answer, which a budget makes with its completion)."""

    call: Call

    @property
    def answered(self) -> R_co | None: ...

    def report(self, attempt: A_contra) -> bool: ...
    def wait(self) -> float: ...
    def recheck(self) -> bool: ...
    def completion(self) -> Completion: ...
    def answer(self) -> R_co: ...
    def abandoned(self) -> Completion | None: ...


B = TypeVar("B", bound=Budget[Any, Any])


class OneAttempt:
    """The budget part of a call that is never retried (the gateway's: its refresh-and-resend
    happens inside its one attempt). `wait` and `recheck` are never asked, since `report`
    never asks for a retry; they complete the `Budget` protocol."""

    __slots__ = ()

    #: The answer is always `answer()`'s.
    answered = None

    def report(self, attempt: Any) -> bool:
        """No retry: the attempt leaves what it decided on the budget itself."""
        return False

    def wait(self) -> float:
        return 0.0

    def recheck(self) -> bool:
        return True

    def abandoned(self) -> Completion | None:
        """An abandoned call is completed as at every door (`Engine.abandon`)."""
        return None


class Tried(Protocol):
    """What the retry rule reads of an attempt."""

    @property
    def retry(self) -> bool: ...
    @property
    def wait(self) -> float | None: ...


T = TypeVar("T", bound=Tried)


class Retries(Generic[T]):
    """The `tool` policy's retry budget, sans I/O: it decides, the shell sleeps and makes the
    attempts. The breaker wraps the whole budget: it is asked again before every retry, and
    the budget's last attempt is the call's one outcome.

    The shell's loop: make the first attempt and `report()` it; while the report says a retry
    is due, sleep `wait()`, stop unless `recheck()`, make the next attempt and report it. Then
    complete the call with `completion()` and answer with `answer()` (read after completing: a
    refusal's reason shows the new count). A subclass says what the completion and the answer
    are; a round is one reported attempt (the MCP proxy's resend after an expired session is
    inside its round, though it counts as a second attempt in the call's line).
    """

    __slots__ = ("backoff", "call", "engine", "limit", "rounds", "stopped", "tried")

    #: A subclass that makes its answer with its completion keeps it here (a slot of its
    #: own); None: the path asks `answer()`.
    answered: Any = None

    def __init__(self, engine: Engine, call: Call, limit: int, backoff: float) -> None:
        self.engine = engine
        self.call = call
        #: Rounds at most (the tool's `attempts`), and the pause between two of them.
        self.limit = limit
        self.backoff = backoff
        self.rounds = 0
        self.tried: T | None = None
        #: The re-check refused the retry: the call ends as `circuit_open`.
        self.stopped = False

    def wait(self) -> float:
        """Before a retry (engine seconds): the backoff, or a Retry-After being waited out,
        which extends a probe's lease by as much."""
        tried = self.tried
        if tried is not None and tried.wait is not None:
            self.engine.extend_probe(self.call, tried.wait)
            return tried.wait
        return self.backoff

    def recheck(self) -> bool:
        """After the wait: a closed breaker or this call's own probe slot lets the retry go."""
        self.stopped = not self.engine.may_retry(self.call)
        return not self.stopped

    def report(self, attempt: T) -> bool:
        """Keep the attempt; whether a retry is due: it asks for one and the budget has one
        left. (One question, not a report and then a second one: it is asked on every call.)"""
        self.tried = attempt
        rounds = self.rounds = self.rounds + 1
        return attempt.retry and rounds < self.limit

    def abandoned(self) -> Completion | None:
        """An abandoned call is completed as at every door (`Engine.abandon`); a shell that
        ends calls itself says how (the MCP proxy's drain)."""
        return None

    def circuit_open(self, tool: str, alternatives: tuple[str, ...] = ()) -> ToolResult:
        """The answer of a call the re-check stopped: the breaker opened while it waited."""
        engine, key = self.engine, self.call.key
        view = engine.view(key)
        if view.reopens_at is None:  # half-open: another call holds the probe slot
            left = engine.policy.probe_retry_after_seconds
        else:
            left = view.reopens_at - engine.clock.wall()
        return results.circuit_open(tool, engine.open_reason(key), max(left, 0), alternatives)


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

    async def _run(
        self,
        budget: B,
        lease: float,
        wait_seconds: float = 0.0,
        attempt: Callable[[B], Awaitable[A]] | None = None,
    ) -> R:
        """Admit (after waiting up to `wait_seconds` for an outstanding probe), attempt (again
        while the budget wants a retry), complete, answer. Abandoned by its caller while
        attempting (`ABANDONING`), the call is completed neutral, once, and the exception goes
        on (`_abandoned`).
        With telemetry on, inside the call's span, each attempt in its own (`telemetry`): the
        span runs this again with `attempt`, the shell's own wrapped in its span. (One frame
        for both: a separate `_steps` coroutine was a call of every call's.)"""
        engine = self.engine
        call = budget.call
        if attempt is None:
            spans = telemetry.spans()
            if spans is not None:
                steps = functools.partial(self._run, budget, lease, wait_seconds)
                carrier = self._carrier(budget)
                return await spans.run(engine, call, carrier, steps, self._attempt)
            attempt = self._attempt
        try:
            # A closed breaker's admission takes no lock and no await (`Engine.admitted_now`).
            admission = engine.admitted_now(call)
            if admission is not None:
                pass
            elif wait_seconds > 0:
                real = self._real(wait_seconds)
                admission = await self._probe_waits().admit(call, lease, real)
            else:
                admission = await engine.admit_async(call, lease)
            if not admission.allowed:
                return self._denied(budget, admission)
            retry = budget.report(await attempt(budget))
            while retry:
                await asyncio.sleep(self._real(budget.wait()))
                if not budget.recheck():
                    break
                retry = budget.report(await attempt(budget))
        except ABANDONING:
            # Let in (perhaps as the probe) once admitted, even while its admission was still
            # being committed to disk: it is owed its completion.
            if call.admitted_as is not None:
                self._abandoned(budget)
            raise
        # Past here a cancellation finds the call completed (or being so): never twice.
        completion = budget.completion()
        if engine.ends_unread(call, completion[0]):  # nothing to record: no await
            self._completed(call, completion[0])
        else:
            line = await engine.complete_async(call, *completion)
            counted = line is not None and line.fields["counted"]
            self._completed(call, recorded_as(completion[0], counted))
        answer: R | None = budget.answered
        return budget.answer() if answer is None else answer

    def _carrier(self, budget: B) -> Mapping[str, str] | None:
        """The trace context the call's span continues: the gateway's agent's `traceparent`;
        None (in-process doors): the current one."""
        return None

    def _run_sync(
        self,
        budget: B,
        lease: float,
        attempt: Callable[[B], A],
        sleep: Callable[[float], None],
        traced: bool = False,
    ) -> R:
        """`_run` for a caller without an event loop: the same steps over the same budget,
        `attempt` making one attempt (the path counts it). No probe wait: it needs a loop.
        With telemetry on, the span runs this again (`traced`) with `attempt` in its span."""
        engine = self.engine
        call = budget.call
        if not traced:
            spans = telemetry.spans()
            if spans is not None:
                steps = functools.partial(self._run_sync, budget, lease, sleep=sleep, traced=True)
                return spans.run_sync(engine, call, steps, attempt)
        admission = engine.admitted_now(call) or engine.admit(call, lease)
        if not admission.allowed:
            return self._denied(budget, admission)
        try:
            call.attempts += 1
            retry = budget.report(attempt(budget))
            while retry:
                sleep(budget.wait())
                if not budget.recheck():
                    break
                call.attempts += 1
                retry = budget.report(attempt(budget))
        except ABANDONING:
            self._abandoned(budget)
            raise
        completion = budget.completion()
        if not engine.ends_unread(call, completion[0]):  # nothing to record: no call
            engine.complete(call, *completion)
        answer: R | None = budget.answered
        return budget.answer() if answer is None else answer

    def _probe_waits(self) -> ProbeWaits:
        waits = self._waits
        if waits is None:
            waits = self._waits = ProbeWaits(self.engine)
        return waits

    def _real(self, seconds: float) -> float:
        """A span on the engine's clock in the event loop's seconds: the same, unless the shell
        runs a sped-up clock (a front door's `--speed`)."""
        return seconds

    def _abandoned(self, budget: B) -> None:
        """The caller went away while the call was out (`ABANDONING`): completed neutral, at
        once and without awaiting (`Engine.abandon`), before its exception goes on; unless the
        shell itself ended it (`Budget.abandoned`)."""
        call = budget.call
        own = budget.abandoned()
        if own is None:
            self._completed(call, self.engine.abandon(call))
        else:
            self.engine.complete(call, *own)
            self._completed(call, own[0])

    def _completed(self, call: Call, outcome: Outcome) -> None:
        """After a call's completion, with the outcome it was recorded as: a probe's waiters
        ask again. A shell that counts its completions (each door's metrics) adds its count
        here."""
        if call.admitted_as == "probe" and self._waits is not None:
            self._waits.wake(call.key)

    def _refused(self, call: Call, outcome: Outcome, status: int | str, answer: R) -> R:
        """A refusal before the breaker: its line (attempts 0, never counted), its answer."""
        self.engine.refuse(call, outcome, status)
        spans = telemetry.spans()
        if spans is not None:
            spans.refused(self.engine, call, outcome)
        return answer

    @abstractmethod
    async def _attempt(self, budget: B) -> A:
        """One attempt, counted in `budget.call.attempts` by the shell (the gateway counts a
        resend after a refresh as a second one)."""

    @abstractmethod
    def _denied(self, budget: B, admission: Admission) -> R:
        """The answer when the breaker refuses."""
