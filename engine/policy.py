"""The two breaker policies of the design, as validated settings.

A policy owns thresholds, window and cooldowns; breakers only hold state. Both policies answer
the same questions so the core never branches on which one it runs.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from breakerdeck.engine.outcomes import OutcomeClass

Seconds = Annotated[float, Field(gt=0)]


class _Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    probe_retry_after_seconds: Seconds = 5.0
    #: The longest hold an operator may take (DESIGN, "Operator control"), on the engine's clock.
    max_hold_seconds: Seconds = 86_400.0

    def may_count(self, cls: OutcomeClass) -> bool:
        return cls in self.counted_classes()

    def counted_classes(self) -> frozenset[OutcomeClass]:
        raise NotImplementedError

    def threshold(self, cls: OutcomeClass) -> int:
        raise NotImplementedError

    def trip_cooldown(self) -> float:
        raise NotImplementedError

    def probe_failure_cooldown(self, failed_probes: int) -> float:
        raise NotImplementedError

    def longest_cooldown(self) -> float:
        raise NotImplementedError

    def rate_limit_cooldown(self, retry_after: float) -> float:
        return retry_after

    @property
    def window(self) -> float | None:
        return None

    @property
    def min_retry_after(self) -> float:
        return 0.0


class AgentPolicy(_Policy):
    """One breaker per agent, as a credential-holding gateway runs it."""

    kind: Literal["agent"] = "agent"
    auth_threshold: PositiveInt = 3
    upstream_threshold: PositiveInt = 5
    window_seconds: Seconds = 600.0
    cooldown_seconds: Seconds = 300.0
    deadline_seconds: Seconds = 30.0
    min_retry_after_seconds: PositiveFloat = 5.0

    def counted_classes(self) -> frozenset[OutcomeClass]:
        return _AGENT_COUNTED

    def threshold(self, cls: OutcomeClass) -> int:
        return self.auth_threshold if cls is OutcomeClass.AUTH_FAILURE else self.upstream_threshold

    def trip_cooldown(self) -> float:
        return self.cooldown_seconds

    def probe_failure_cooldown(self, failed_probes: int) -> float:
        return self.cooldown_seconds

    def longest_cooldown(self) -> float:
        return self.cooldown_seconds

    @property
    def window(self) -> float | None:
        return self.window_seconds

    @property
    def min_retry_after(self) -> float:
        return self.min_retry_after_seconds

    def probe_lease(self, deadline_seconds: float | None = None) -> float:
        """The vault fetch, one attempt, the token refresh and one retry, each bounded by the
        deadline (the policy's, or a gateway platform's own): a probe that is still within them
        has not expired."""
        return 4 * (self.deadline_seconds if deadline_seconds is None else deadline_seconds)


#: The longest deadline a gateway platform may set (`deadline_seconds`, DESIGN).
MAX_DEADLINE_SECONDS = 600.0


class ToolPolicy(_Policy):
    """One breaker per backend and credential, as an agent harness runs it."""

    kind: Literal["tool"] = "tool"
    failure_threshold: PositiveInt = 3
    ladder_seconds: tuple[Seconds, ...] = (30.0, 60.0, 300.0, 900.0)
    rate_limit_cap_seconds: Seconds = 900.0

    def counted_classes(self) -> frozenset[OutcomeClass]:
        return _TOOL_COUNTED

    def threshold(self, cls: OutcomeClass) -> int:
        return self.failure_threshold

    def trip_cooldown(self) -> float:
        return self.ladder_seconds[0]

    def probe_failure_cooldown(self, failed_probes: int) -> float:
        return self.ladder_seconds[min(failed_probes, len(self.ladder_seconds) - 1)]

    def longest_cooldown(self) -> float:
        return max(*self.ladder_seconds, self.rate_limit_cap_seconds)

    def rate_limit_cooldown(self, retry_after: float) -> float:
        return min(retry_after, self.rate_limit_cap_seconds)


_AGENT_COUNTED = frozenset({OutcomeClass.AUTH_FAILURE, OutcomeClass.UPSTREAM_FAILURE})
_TOOL_COUNTED = frozenset(
    {OutcomeClass.UPSTREAM_FAILURE, OutcomeClass.MALFORMED_OUTPUT, OutcomeClass.RATE_LIMITED}
)

Policy = Annotated[AgentPolicy | ToolPolicy, Field(discriminator="kind")]


def policy_named(name: str) -> AgentPolicy | ToolPolicy:
    if name == "agent":
        return AgentPolicy()
    if name == "tool":
        return ToolPolicy()
    raise ValueError(f"unknown policy {name!r}: expected 'agent' or 'tool'")
