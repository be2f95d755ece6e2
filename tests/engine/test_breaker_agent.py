"""The `agent` policy's rules, on the pure breaker core with explicit times."""

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.core.breaker import Breaker, DenyReason
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.state import State

AUTH = Outcome(OutcomeClass.AUTH_FAILURE, counted=True)
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True)
RELAYED_503 = Outcome(OutcomeClass.UPSTREAM_ERROR)


def breaker() -> Breaker:
    return Breaker("agent-1", AgentPolicy())


def feed(b: Breaker, *outcomes: Outcome, at: float = 0.0) -> list[str]:
    types = []
    for n, outcome in enumerate(outcomes):
        types += [t.type for t in b.record(f"c{n}", outcome, at)]
    return types


def trip(b: Breaker, at: float = 0.0) -> None:
    feed(b, AUTH, AUTH, AUTH, at=at)
    assert b.state is State.OPEN


def test_three_auth_failures_trip():
    b = breaker()
    assert feed(b, AUTH, AUTH) == []
    assert feed(b, AUTH) == [ev.TRIPPED]
    assert b.trip_cause is OutcomeClass.AUTH_FAILURE


def test_four_upstream_failures_do_not_trip_and_the_fifth_does():
    b = breaker()
    assert feed(b, *[UPSTREAM] * 4) == []
    assert feed(b, UPSTREAM) == [ev.TRIPPED]
    assert b.trip_cause is OutcomeClass.UPSTREAM_FAILURE


def test_upstream_upstream_auth_trips_with_cause_auth_at_count_three():
    b = breaker()
    transitions = []
    for n, outcome in enumerate([UPSTREAM, UPSTREAM, AUTH]):
        transitions += b.record(f"c{n}", outcome, 0)
    assert [t.type for t in transitions] == [ev.TRIPPED]
    assert transitions[0].fields == {
        "failure_class": "auth_failure",
        "count": 3,
        "cooldown_seconds": 300.0,
    }


def test_auth_upstream_upstream_does_not_trip():
    b = breaker()
    assert feed(b, AUTH, UPSTREAM, UPSTREAM) == []
    assert b.state is State.CLOSED and b.count == 3


def test_four_upstream_then_auth_trips_with_cause_auth_at_count_five():
    b = breaker()
    feed(b, *[UPSTREAM] * 4)
    transitions = b.record("last", AUTH, 0)
    assert transitions[0].fields["failure_class"] == "auth_failure"
    assert transitions[0].fields["count"] == 5


def test_a_failure_more_than_600_s_after_the_last_starts_the_count_again():
    b = breaker()
    feed(b, AUTH, AUTH, at=0)
    feed(b, AUTH, at=600.5)
    assert b.count == 1 and b.state is State.CLOSED


def test_a_failure_exactly_600_s_later_still_counts_in_the_window():
    b = breaker()
    feed(b, AUTH, AUTH, at=0)
    assert feed(b, AUTH, at=600) == [ev.TRIPPED]


def test_relayed_platform_errors_and_refusals_never_move_the_counter():
    b = breaker()
    feed(b, AUTH, AUTH)
    uncounted = [
        RELAYED_503,
        Outcome(OutcomeClass.PERMISSION_DENIED),
        Outcome(OutcomeClass.PENDING_APPROVAL),
        Outcome(OutcomeClass.REFUSED_PRE_CALL),
        Outcome(OutcomeClass.RATE_LIMITED),
        Outcome(OutcomeClass.CALLER_ERROR),
    ]
    assert feed(b, *uncounted) == []
    assert b.count == 2


def test_a_success_resets_the_counter_while_closed():
    b = breaker()
    feed(b, AUTH, AUTH, SUCCESS)
    assert b.count == 0


def test_open_refuses_every_call_until_300_s_after_it_opened():
    b = breaker()
    trip(b, at=100)
    admission, _ = b.admit("x", 399.9, lease=90)
    assert not admission.allowed
    assert admission.reason is DenyReason.OPEN
    assert admission.retry_after == 5.0  # time left is 0.1 s; never less than 5
    admission, _ = b.admit("x", 200, lease=90)
    assert admission.retry_after == 200


def test_after_the_cooldown_the_next_call_is_the_probe_and_others_wait():
    b = breaker()
    trip(b)
    probe, transitions = b.admit("probe", 300, lease=90)
    assert probe.allowed and probe.as_probe
    assert [t.type for t in transitions] == [ev.HALF_OPEN]
    other, transitions = b.admit("other", 301, lease=90)
    assert other.reason is DenyReason.PROBE_IN_FLIGHT and transitions == []
    assert other.cause is OutcomeClass.AUTH_FAILURE
    assert other.retry_after >= 5


def test_a_successful_probe_closes_and_resets():
    b = breaker()
    trip(b)
    b.admit("probe", 300, lease=90)
    assert [t.type for t in b.record("probe", SUCCESS, 301)] == [ev.RECOVERED]
    assert b.state is State.CLOSED and b.count == 0


def test_a_failed_probe_reopens_for_another_300_s():
    b = breaker()
    trip(b)
    b.admit("probe", 300, lease=90)
    transitions = b.record("probe", AUTH, 310)
    assert [(t.type, t.fields) for t in transitions] == [(ev.REOPENED, {"cooldown_seconds": 300})]
    assert b.reopens_at == 610


def test_a_success_closes_an_open_breaker_even_from_a_late_call():
    b = breaker()
    trip(b)
    assert [t.type for t in b.record("admitted-before-trip", SUCCESS, 10)] == [ev.RECOVERED]
    assert b.state is State.CLOSED


def test_a_late_counted_failure_adds_to_the_counter_but_changes_no_state():
    b = breaker()
    trip(b)
    assert b.record("late", UPSTREAM, 10) == []
    assert b.state is State.OPEN and b.count == 4 and b.reopens_at == 300


def test_reset_closes_and_zeroes_whatever_the_state():
    b = breaker()
    trip(b)
    transitions = b.reset("alice", "credential rotated")
    assert [(t.type, t.fields) for t in transitions] == [
        (ev.RESET, {"actor": "alice", "reason": "credential rotated"})
    ]
    assert b.state is State.CLOSED and b.count == 0 and b.failed_probes == 0


def test_a_counted_outcome_of_a_class_the_policy_never_counts_is_rejected():
    with pytest.raises(ValueError, match="caller_error never counts"):
        breaker().record("c", Outcome(OutcomeClass.CALLER_ERROR, counted=True), 0)
