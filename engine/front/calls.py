"""The one place a front door touches the engine's call API (ticket, admission, completion).

Kept small on purpose: the engine's call API is being reshaped for speed, and every front door
goes through here, so adapting to it is one file. It also holds the opt-in probe wait
(DESIGN, "Both policies"), built around admission without changing the engine: a call that
arrives while the key's probe is out waits for that probe's outcome (up to the platform's
`probe_wait_seconds`) *before* it asks the engine, so its refusal and `call.denied` are decided
when its wait ends, and the engine still admits exactly one probe at a time.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from breakerdeck.engine.breaker import Admission
from breakerdeck.engine.engine import Call, Engine, Listener
from breakerdeck.engine.front.metrics import Counts
from breakerdeck.engine.outcomes import Outcome
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.probewait import ProbeWaits

__all__ = ["Admission", "Call", "Calls"]


class Calls:
    """The `agent` policy's calls on one engine, from one event loop."""

    def __init__(
        self,
        engine: Engine,
        policy: AgentPolicy,
        speed: float = 1.0,
        *,
        counts: Counts | None = None,
        listener: Listener | None = None,
    ) -> None:
        self.engine = engine
        self.policy = policy
        self.speed = speed
        self.counts = counts or Counts()
        self.waits = ProbeWaits(engine)
        # No listener on the call path: any listener makes the engine write a line for every
        # call, refusals included (the fast-fail path). Metrics read the engine's own counts;
        # a reset is noticed from the engine's count of them (`was_reset`), and the listener
        # is attached only while a call waits for a probe (a reset must wake it).
        self._listener = listener
        self._detach: Callable[[], None] | None = None
        self._waiting = 0
        self._listener_always = False
        self._resets_seen: dict[str, int] = {}

    def watch_always(self) -> None:
        """Keep the listener attached: something else (the feed) listens anyway, so every call
        writes its line already."""
        self._listener_always = True
        self._attach()

    def close(self) -> None:
        if self._detach is not None:
            self._detach()
            self._detach = None

    def _attach(self) -> None:
        if self._detach is None and self._listener is not None:
            self._detach = self.engine.subscribe(self._listener)

    def _release(self) -> None:
        if not self._waiting and not self._listener_always:
            self.close()

    def was_reset(self, key: str) -> bool:
        """Whether the key was reset since the last time this was asked (an integer compare:
        the engine counts its resets)."""
        resets = self.engine.tally(key, "reset")
        if resets == self._resets_seen.get(key, 0):
            return False
        self._resets_seen[key] = resets
        return True

    def open(self, agent: str, platform: str, deadline: float) -> Call:
        """A ticket for the platform's `deadline` (its own, or the policy's)."""
        # key, agent, platform, tool (the platform), deadline: positional, on every request.
        return self.engine.new_call(agent, agent, platform, platform, deadline)

    def idempotency_key(self, call: Call) -> str:
        return self.engine.idempotency_key(call.number)

    def admit(self, call: Call, lease: float, wait_seconds: float = 0.0) -> Awaitable[Admission]:
        """The engine's admission (a probe holds the slot for `lease`), after waiting (at most
        `wait_seconds` on the engine's clock) for an outstanding probe's outcome when the
        platform opts in. Without a wait it is the engine's own coroutine: one frame less on
        the fast-fail path."""
        if wait_seconds > 0 and self.waits.probe_out(call.key):
            return self._admit_after_wait(call, lease, wait_seconds / self.speed)
        return self.engine.admit_async(call, lease)

    async def _admit_after_wait(self, call: Call, lease: float, real_seconds: float) -> Admission:
        self._waiting += 1
        self._attach()  # before the wait looks at the breaker: no reset slips between
        try:
            return await self.waits.admit(call, lease, real_seconds)
        finally:
            self._waiting -= 1
            self._release()

    async def complete(
        self,
        call: Call,
        outcome: Outcome,
        *,
        fault: str,
        agent_status: int | str,
        refresh: str | None = None,
        platform_status: int | None = None,
    ) -> None:
        was_probe = call.admitted_as == "probe"
        key = call.key
        self.counts.calls[(key, outcome.cls.value, outcome.counted)] += 1
        await self.engine.complete_async(
            call,
            outcome,
            fault=fault,
            agent_status=agent_status,
            refresh=refresh,
            platform_status=platform_status,
        )
        if was_probe:
            self.waits.wake(key)

    def reset_seen(self, key: str) -> None:
        """A reset (from the feed) ends the probe too: waiters go and ask the engine."""
        self.waits.wake(key)
