"""Recorded events folded through the breaker core again (`engine.replay`): a trace gives back
each breaker as the engine had it; an audit log, which keeps no successes, what it proves."""

from __future__ import annotations

import json

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import record
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy
from breakerdeck.engine.recorded.replay import fold, read_trace, replay_audit

REFUSED = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")


def run(engine: Engine, outcome: Outcome, agent: str = "ava") -> None:
    call = engine.new_call(agent, agent, "payments", "charge", 30)
    if engine.admit(call, lease=30).allowed:
        engine.complete(call, outcome, "ok" if outcome is SUCCESS else "refused", 200)


def story(tmp_path) -> tuple[Engine, ManualClock, list[str]]:
    """ava: four failures, a success, a failure (no trip); bo: a trip, a failed probe, a good
    one."""
    clock = ManualClock(now=100.0)
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path)
    lines: list[str] = []
    engine.subscribe(lambda e: lines.append(json.dumps(record(e, engine.epoch))))
    for outcome in [REFUSED] * 4 + [SUCCESS, REFUSED]:
        run(engine, outcome)
        clock.advance(1)
    for _ in range(5):
        run(engine, REFUSED, "bo")
    for outcome in (REFUSED, SUCCESS):
        clock.advance(300)
        engine.poll()
        run(engine, outcome, "bo")
    return engine, clock, lines


def test_a_trace_folds_back_to_the_engines_own_views(tmp_path):
    engine, _, lines = story(tmp_path)
    events, epoch = read_trace(lines)
    replayed = fold(events, AgentPolicy(), complete=True, epoch=epoch)
    assert replayed.divergences == []
    last = {view.key: view for _, view in replayed.changes}
    for key in ("ava", "bo"):
        live, again = engine.view(key), last[key]
        assert (again.state, again.count, again.failed_probes) == (
            live.state,
            live.count,
            live.failed_probes,
        )
    assert last["ava"].count == 1  # the success in between started the count again


def test_an_audit_log_without_the_success_does_not_trip_and_says_the_count_is_approximate(
    tmp_path,
):
    engine, _, _ = story(tmp_path)
    engine.close()
    replayed = replay_audit(tmp_path)
    assert replayed.divergences == []
    last = {view.key: view for _, view in replayed.changes}
    assert last["ava"].state == "closed" and "ava" in replayed.approximate
    assert last["bo"].state == "closed" and last["bo"].failed_probes == 0
