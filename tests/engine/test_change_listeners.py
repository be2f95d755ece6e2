"""`Engine.subscribe(listener, calls=False)`: a listener for what changes breakers (a log, a
pager), handed every line but the calls' own, that makes no call write a line for it."""

from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event, Tripped
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy

KEY = "search@default"
DOWN = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")


def fail(engine: Engine) -> None:
    call = engine.enter(KEY, "planner", "search", "search", 5.0)
    engine.admit(call, 10.0)
    engine.complete(call, DOWN, "refused", "tool_error")


def test_it_is_handed_the_trip_and_no_call_line() -> None:
    seen: list[Event] = []
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(seen.append, calls=False)
        for _ in range(3):
            fail(engine)
    assert [type(event) for event in seen] == [Tripped]


def test_alone_it_leaves_healthy_guarded_calls_unnumbered() -> None:
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(lambda event: None, calls=False)
        guard = engine.guard(KEY, agent="planner", lease=10.0)
        with guard:
            pass  # the first: its credential is learnt to work, which is a line
        learnt = engine.seq
        for _ in range(10):
            with guard:
                pass
        assert engine.seq == learnt


def test_beside_a_full_listener_it_still_sees_no_call_line() -> None:
    changes: list[Event] = []
    every: list[Event] = []
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(changes.append, calls=False)
        engine.subscribe(every.append)
        for _ in range(3):
            fail(engine)
    assert [type(event) for event in changes] == [Tripped]
    assert len(every) == 4


def test_unsubscribed_it_hears_nothing_more() -> None:
    seen: list[Event] = []
    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        unsubscribe = engine.subscribe(seen.append, calls=False)
        unsubscribe()
        for _ in range(3):
            fail(engine)
    assert seen == []


def test_one_that_raises_is_detached_and_the_call_path_goes_on() -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("pager down")

    with Engine(ToolPolicy(), clock=ManualClock()) as engine:
        engine.subscribe(broken, calls=False)
        for _ in range(3):
            fail(engine)
        assert engine.view(KEY).state == "open"
        assert any("detached" in problem for problem in engine.problems)
