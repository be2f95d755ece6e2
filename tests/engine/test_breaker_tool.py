"""The `tool` policy's rules: consecutive failures, the cooldown ladder, 429s, probes, pages."""

from breakerdeck.engine import events as ev
from breakerdeck.engine.core.breaker import Breaker, DenyReason
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.engine.state import State

FAIL = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="timed out after 30 s")
BAD_400 = Outcome(OutcomeClass.CALLER_ERROR)
MALFORMED = Outcome(OutcomeClass.MALFORMED_OUTPUT, counted=True)


def limited(retry_after: float) -> Outcome:
    return Outcome(OutcomeClass.RATE_LIMITED, counted=True, retry_after=retry_after)


def breaker() -> Breaker:
    return Breaker("payments@cred-1", ToolPolicy())


def trip(b: Breaker, at: float = 0.0, outcome: Outcome = FAIL) -> None:
    for n in range(3):
        b.record(f"t{n}", outcome, at)
    assert b.state is State.OPEN


def fail_probe(b: Breaker, outcome: Outcome = FAIL) -> list[str]:
    due = b.reopens_at
    assert due is not None
    admission, _ = b.admit("probe", due, lease=61)
    assert admission.as_probe
    return [t.type for t in b.record("probe", outcome, due)]


def test_three_consecutive_counted_failures_open_for_30_s():
    b = breaker()
    trip(b, at=10)
    assert b.reopens_at == 40


def test_uncounted_outcomes_in_between_are_skipped_not_reset():
    b = breaker()
    timeout_503 = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="HTTP 503")
    for n, outcome in enumerate([FAIL, BAD_400, FAIL, timeout_503]):
        b.record(f"c{n}", outcome, 0)
    assert b.state is State.OPEN
    assert b.last_failure_detail == "HTTP 503"


def test_ten_caller_errors_never_trip():
    b = breaker()
    for n in range(10):
        assert b.record(f"c{n}", BAD_400, 0) == []
    assert b.count == 0 and b.state is State.CLOSED


def test_the_trip_cause_is_the_class_of_the_third_failure():
    b = breaker()
    for n, outcome in enumerate([FAIL, FAIL, MALFORMED]):
        b.record(f"c{n}", outcome, 0)
    assert b.trip_cause is OutcomeClass.MALFORMED_OUTPUT


def test_failed_probes_climb_the_ladder_60_300_900_then_stay_at_900():
    b = breaker()
    trip(b)
    cooldowns = []
    for _ in range(5):
        fail_probe(b)
        cooldowns.append(b.cooldown)
    assert cooldowns == [60, 300, 900, 900, 900]


def test_the_second_failed_probe_pages_once_per_episode():
    b = breaker()
    trip(b)
    assert fail_probe(b) == [ev.REOPENED]
    assert fail_probe(b) == [ev.REOPENED, ev.PAGE]
    assert fail_probe(b) == [ev.REOPENED]
    assert b.paged


def test_a_recovery_ends_the_episode_so_the_next_one_can_page_again():
    b = breaker()
    trip(b)
    fail_probe(b)
    fail_probe(b)
    b.record("late", SUCCESS, 1000)
    trip(b, at=2000)
    fail_probe(b)
    assert fail_probe(b) == [ev.REOPENED, ev.PAGE]


def test_a_successful_probe_resets_the_ladder():
    b = breaker()
    trip(b)
    fail_probe(b)
    b.admit("probe", b.reopens_at, lease=61)
    b.record("probe", SUCCESS, 1000)
    trip(b, at=2000)
    assert b.cooldown == 30


def test_three_counted_429s_open_for_the_last_retry_after():
    b = breaker()
    for n, seconds in enumerate([120, 130, 140]):
        b.record(f"c{n}", limited(seconds), 0)
    assert b.state is State.OPEN and b.cooldown == 140


def test_a_429_cooldown_is_capped_at_900_s():
    b = breaker()
    trip(b, outcome=limited(86_400))
    assert b.cooldown == 900


def test_a_mixed_run_of_failures_uses_the_ladder_not_the_retry_after():
    b = breaker()
    for n, outcome in enumerate([limited(120), FAIL, limited(120)]):
        b.record(f"c{n}", outcome, 0)
    assert b.cooldown == 30


def test_a_probe_failing_with_a_long_429_reopens_for_its_retry_after():
    b = breaker()
    trip(b)
    fail_probe(b, limited(200))
    assert b.cooldown == 200


def test_exactly_one_probe_is_admitted():
    b = breaker()
    trip(b)
    admissions = [b.admit(f"c{n}", 30, lease=61)[0] for n in range(50)]
    assert sum(a.as_probe for a in admissions) == 1
    assert {a.reason for a in admissions[1:]} == {DenyReason.PROBE_IN_FLIGHT}


def test_an_uncounted_probe_outcome_frees_the_slot_and_stays_half_open():
    b = breaker()
    trip(b)
    b.admit("probe", 30, lease=61)
    assert b.record("probe", BAD_400, 31) == []
    assert b.state is State.HALF_OPEN
    nxt, _ = b.admit("next", 32, lease=61)
    assert nxt.as_probe


def test_a_probe_past_its_lease_is_reported_as_expired():
    b = breaker()
    trip(b)
    b.admit("probe", 30, lease=61)
    assert b.expired_probe(91) is None
    assert b.expired_probe(91.1) == "probe"


def test_a_late_failure_during_half_open_does_not_take_the_probe_slot():
    b = breaker()
    trip(b)
    b.admit("probe", 30, lease=61)
    assert b.record("admitted-before-trip", FAIL, 31) == []
    assert b.state is State.HALF_OPEN and b.probe_id == "probe" and b.count == 4


def test_a_snapshot_read_back_with_from_state_is_the_same_breaker_on_another_clock():
    b = breaker()
    trip(b, at=100.0)
    fail_probe(b)

    copy = Breaker.from_state(b.key, b.policy, b.snapshot(offset=1000.0), offset=-1000.0)

    assert copy.snapshot() == b.snapshot()
    assert copy.reopens_at == b.reopens_at


def test_a_half_open_breaker_read_back_with_from_state_is_open_with_no_probe():
    b = breaker()
    trip(b)
    b.admit("probe", 31.0, 90.0)
    assert b.state is State.HALF_OPEN

    copy = Breaker.from_state(b.key, b.policy, b.snapshot())

    assert copy.state is State.OPEN and copy.probe_id is None
    assert copy.opened_at == b.opened_at and copy.count == b.count
