"""Property tests on the pure breaker: random interleavings of admissions, outcomes, time,
polls, probe expiries and resets, under both policies, against the design's invariants."""

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from breakerdeck.engine.core.breaker import Breaker
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy
from breakerdeck.engine.state import State

POLICIES = {
    "agent": AgentPolicy(),
    "tool": ToolPolicy(),
    # The same rules on a shorter clock, so random time steps reach half-open more often.
    "agent-fast": AgentPolicy(cooldown_seconds=30, window_seconds=60),
}
LEASES = {"agent": 90.0, "tool": 61.0, "agent-fast": 90.0}
EXPIRED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="expired")

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

advance = st.tuples(
    st.just("advance"),
    st.one_of(
        st.sampled_from([0.0, 0.5, 1.0, 5.0, 29.9, 30.0, 60.0, 61.0, 90.0, 300.0, 600.0, 601.0]),
        st.sampled_from([30.0, 60.0, 120.0, 300.0, 900.0]),
        st.floats(min_value=0, max_value=1000, allow_nan=False),
    ),
)
counted_spec = st.tuples(
    st.sampled_from(
        [OutcomeClass.UPSTREAM_FAILURE, OutcomeClass.AUTH_FAILURE, OutcomeClass.MALFORMED_OUTPUT]
    ),
    st.just(True),
    st.none(),
)
outcome_spec = st.one_of(
    counted_spec,
    st.tuples(
        st.sampled_from(list(OutcomeClass)),
        st.booleans(),  # for a 429 under `tool`: beyond the deadline (counted) or not
        st.none() | st.floats(min_value=0.1, max_value=100_000, allow_nan=False),
    ),
)
counted_call = st.tuples(st.just("call"), counted_spec)
operation = st.one_of(
    counted_call,  # listed thrice: trips, probes and reopens must be common
    counted_call,
    counted_call,
    st.tuples(st.just("call"), outcome_spec),  # admitted, then reports at once
    st.tuples(st.just("admit")),  # admitted, reports later (or never)
    st.tuples(st.just("burst"), st.integers(min_value=2, max_value=8)),  # a concurrent fan-out
    st.tuples(st.just("record"), st.integers(min_value=0, max_value=50), outcome_spec),
    advance,
    advance,
    st.tuples(st.just("poll")),
    st.tuples(st.just("expire")),
    st.tuples(st.just("reset")),
)
operations = st.lists(operation, min_size=5, max_size=80)


def outcome_for(policy, spec) -> Outcome:
    cls, beyond_deadline, retry_after = spec
    if cls is OutcomeClass.AUTH_FAILURE and policy.kind == "tool":
        cls = OutcomeClass.UPSTREAM_FAILURE
    if cls is OutcomeClass.MALFORMED_OUTPUT and policy.kind == "agent":
        cls = OutcomeClass.UPSTREAM_FAILURE
    counted = policy.may_count(cls)
    if cls is OutcomeClass.RATE_LIMITED and policy.kind == "tool":
        counted = beyond_deadline
    return Outcome(cls, counted=counted, retry_after=retry_after)


@dataclass
class Run:
    """The breaker under test and what an outside observer knows about it."""

    kind: str
    breaker: Breaker = field(init=False)
    now: float = 0.0
    admitted: list[str] = field(default_factory=list)
    probes: set[str] = field(default_factory=set)  # calls that are the current probe

    def __post_init__(self) -> None:
        self.breaker = Breaker("k", POLICIES[self.kind])

    @property
    def policy(self):
        return POLICIES[self.kind]

    def apply(self, op) -> None:
        b = self.breaker
        before = (b.state, b.count, b.last_failure_at, b.opened_at, b.cooldown)
        name = op[0]
        if name == "admit":
            self.admit()
        elif name == "burst":
            for _ in range(op[1]):
                self.admit()
                self.invariants()
        elif name == "call":
            if self.admit():
                self.invariants()
                before = (b.state, b.count, b.last_failure_at, b.opened_at, b.cooldown)
                self.record(self.admitted[-1], outcome_for(self.policy, op[1]), before)
        elif name == "record" and self.admitted:
            call_id = self.admitted[op[1] % len(self.admitted)]
            self.record(call_id, outcome_for(self.policy, op[2]), before)
        elif name == "advance":
            self.now += op[1]
        elif name == "poll":
            b.poll(self.now)
            self.unchanged_count(before)
        elif name == "expire":
            call_id = b.expired_probe(self.now)
            if call_id is not None:
                self.record(call_id, EXPIRED, before)
        elif name == "reset":
            b.reset("ops", "property test")
            self.probes.clear()
            assert (b.state, b.count, b.failed_probes) == (State.CLOSED, 0, 0)
        self.invariants()

    def admit(self) -> bool:
        b = self.breaker
        call_id = f"c{len(self.admitted)}"
        state, opened_at, cooldown, count = b.state, b.opened_at, b.cooldown, b.count
        admission, _ = b.admit(call_id, self.now, LEASES[self.kind])
        assert b.count == count
        if state is State.OPEN and self.now < opened_at + cooldown:
            assert not admission.allowed, "a call got through an open breaker"
            assert admission.retry_after >= self.policy.min_retry_after
        if admission.allowed and not admission.as_probe:
            assert state is State.CLOSED, f"a normal admission while {state}"
        if admission.as_probe:
            assert not self.probes, f"a second probe while {self.probes} is out"
            assert b.state is State.HALF_OPEN and b.probe_id == call_id
            self.probes.add(call_id)
        if admission.allowed:
            self.admitted.append(call_id)
        return admission.allowed

    def record(self, call_id: str, outcome: Outcome, before) -> None:
        b = self.breaker
        state, count, last_failure_at = before[0], before[1], before[2]
        b.record(call_id, outcome, self.now)
        self.probes.discard(call_id)
        if outcome.is_success:
            self.probes.clear()
            assert (b.state, b.count) == (State.CLOSED, 0)
        elif not outcome.counted:
            assert b.count == count, f"an uncounted {outcome.cls} moved the count"
            assert b.state is state
        else:
            window = self.policy.window
            restarted = (
                window is not None
                and last_failure_at is not None
                and self.now - last_failure_at > window
            )
            assert b.count == (1 if restarted else count + 1)
            if state is State.CLOSED and b.state is State.OPEN:
                assert b.count >= self.policy.threshold(outcome.cls)
            if state is not State.CLOSED:
                assert b.state is not State.CLOSED, "a failure closed the breaker"

    def unchanged_count(self, before) -> None:
        assert self.breaker.count == before[1]

    def invariants(self) -> None:
        b = self.breaker
        assert len(self.probes) <= 1
        if b.probe_id is not None:
            assert b.state is State.HALF_OPEN
            assert self.probes == {b.probe_id}
        if b.state is State.CLOSED:
            assert b.opened_at is None and b.probe_id is None
        else:
            assert b.cooldown > 0 and b.trip_cause is not None
        if self.kind == "tool":
            assert b.cooldown <= self.policy.rate_limit_cap_seconds
        assert b.count >= 0


@pytest.mark.parametrize("kind", ["agent", "tool", "agent-fast"])
@settings(SETTINGS, max_examples=300)
@given(ops=operations)
def test_random_interleavings_keep_the_breaker_invariants(kind, ops):
    run = Run(kind)
    for op in ops:
        run.apply(op)


uncounted_classes = st.sampled_from(
    [
        OutcomeClass.CALLER_ERROR,
        OutcomeClass.PERMISSION_DENIED,
        OutcomeClass.REFUSED_PRE_CALL,
        OutcomeClass.PENDING_APPROVAL,
        OutcomeClass.UPSTREAM_ERROR,
        OutcomeClass.CREDENTIAL_REVOKED,
    ]
)


@pytest.mark.parametrize("kind", ["agent", "tool"])
@SETTINGS
@given(
    counted_before=st.integers(min_value=0, max_value=2),
    noise=st.lists(uncounted_classes, max_size=40),
)
def test_uncounted_outcomes_never_add_to_nor_reset_the_count(kind, counted_before, noise):
    b = Breaker("k", POLICIES[kind])
    failure = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True)
    for n in range(counted_before):
        b.record(f"f{n}", failure, 0.0)
    for n, cls in enumerate(noise):
        assert b.record(f"n{n}", Outcome(cls), 0.0) == []
        assert b.count == counted_before and b.state is State.CLOSED


@SETTINGS
@given(
    sequence=st.lists(
        st.sampled_from(["timeout", "400", "503", "403", "malformed", "429-short"]),
        max_size=30,
    )
)
def test_tool_trips_on_the_third_counted_failure_in_recorded_order(sequence):
    classes = {
        "timeout": Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True),
        "503": Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True),
        "malformed": Outcome(OutcomeClass.MALFORMED_OUTPUT, counted=True),
        "400": Outcome(OutcomeClass.CALLER_ERROR),
        "403": Outcome(OutcomeClass.PERMISSION_DENIED),
        "429-short": Outcome(OutcomeClass.RATE_LIMITED, counted=False, retry_after=5),
    }
    b = Breaker("k", ToolPolicy())
    counted = 0
    for n, name in enumerate(sequence):
        outcome = classes[name]
        transitions = b.record(f"c{n}", outcome, float(n))
        counted += outcome.counted
        if counted < 3:
            assert b.state is State.CLOSED and transitions == []
        elif counted == 3 and outcome.counted:  # the third counted failure, and it trips
            assert b.state is State.OPEN
            assert [t.type for t in transitions] == ["circuit_breaker.tripped"]
            assert b.trip_cause is outcome.cls
        else:  # open from then on: later failures add to the count and change no state
            assert b.state is State.OPEN and transitions == []
