"""The engine under real threads: one probe for a fan-out, one ordered sequence of lines."""

import random
import threading

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.outcomes import SUCCESS, Outcome, OutcomeClass
from breakerdeck.engine.policy import AgentPolicy, ToolPolicy

THREADS = 50
UPSTREAM = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True, detail="refused")
NOT_FOUND = Outcome(OutcomeClass.CALLER_ERROR, detail="HTTP 404")
JOIN_SECONDS = 30


def in_threads(n: int, work) -> list:
    """Run `work(i)` on n threads released together; return their results by index."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as error:  # surfaced below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    assert errors == []
    return results


@pytest.fixture(params=["tool", "agent"])
def setup(request, tmp_path):
    clock = ManualClock()
    policy = ToolPolicy() if request.param == "tool" else AgentPolicy()
    engine = Engine(policy, clock=clock, state_dir=tmp_path / "state")
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    key = "payments@default" if request.param == "tool" else "ava"
    yield engine, clock, lines, key
    engine.close()


def enter(engine: Engine, key: str, agent: str = "ava"):
    return engine.enter(
        key=key, agent=agent, platform="payments", tool="charge", deadline_seconds=30
    )


async def unused(args):
    raise AssertionError("the sync guard wraps its own function")


def trip(engine: Engine, key: str) -> None:
    while True:
        call = enter(engine, key)
        engine.admit(call, 61)
        engine.complete(call, UPSTREAM, fault="refused", agent_status=502)
        if engine.view(key).state == "open":
            return


@pytest.mark.parametrize("polled", [True, False], ids=["half_open", "open_and_due"])
def test_fifty_threads_admitting_on_a_half_open_breaker_get_exactly_one_probe(setup, polled):
    engine, clock, lines, key = setup
    trip(engine, key)
    clock.advance(engine.view(key).cooldown)
    if polled:
        engine.poll()
        assert engine.view(key).state == "half_open"
    calls = [enter(engine, key, agent=f"agent-{i}") for i in range(THREADS)]

    admissions = in_threads(THREADS, lambda i: engine.admit(calls[i], 90))

    probes = [a for a in admissions if a.allowed]
    assert len(probes) == 1 and probes[0].as_probe
    assert sum(a.reason is not None and a.reason.value == "probe_in_flight" for a in admissions)
    assert len([e for e in lines if e.type == ev.HALF_OPEN]) == 1
    denied = [e for e in lines if e.type == ev.CALL_DENIED]
    assert len(denied) == THREADS - 1
    assert {e.fields["reason"] for e in denied} == {"probe_in_flight"}


def test_fifty_threads_through_the_sync_guard_reach_the_function_once(tmp_path):
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=tmp_path / "state")
    harness = Harness(engine)
    harness.register(Tool("lookup", backend="ledger", function=unused))
    gate = threading.Event()
    entered = []
    failing = True

    def lookup():
        entered.append(threading.get_ident())
        if failing:
            raise ConnectionError("refused")
        gate.wait(JOIN_SECONDS)
        return {"ok": True}

    guarded = harness.guard("lookup", sleep=lambda seconds: None)(lookup)
    try:
        for _ in range(3):
            assert guarded()["status"] == "tool_error"
        assert len(entered) == 3  # a function tool not marked idempotent: one attempt each
        engine.clock.advance(30)
        failing = False
        entered.clear()
        results: list = []

        def call(i: int):
            result = guarded(agent=f"agent-{i}")
            results.append(result)
            if len(results) == THREADS - 1:
                gate.set()  # everyone else has been answered: let the probe finish
            return result

        answers = in_threads(THREADS, call)

        statuses = sorted(a["status"] for a in answers)
        assert statuses == ["ok"] + ["probe_in_flight"] * (THREADS - 1)
        assert len(entered) == 1
        assert engine.view("ledger@default").state == "closed"
    finally:
        gate.set()
        engine.close()


def test_a_listener_stuck_on_one_key_does_not_hold_up_calls_on_another(tmp_path):
    """Listeners run after the key's lock is released: a slow subscriber delays delivery, never
    a call on an unrelated key (the deliverer is whichever thread got there first)."""
    engine = Engine(ToolPolicy(), clock=ManualClock(), state_dir=tmp_path / "state")
    release = threading.Event()
    stuck = threading.Event()
    lines: list[ev.Event] = []

    def listener(event: ev.Event) -> None:
        if event.key == "slow@default" and not release.is_set():
            stuck.set()
            release.wait(JOIN_SECONDS)
        lines.append(event)

    engine.subscribe(listener)

    def fail_once(key: str) -> None:
        call = enter(engine, key)
        engine.admit(call, 61)
        engine.complete(call, UPSTREAM, fault="refused", agent_status=502)

    slow = threading.Thread(target=fail_once, args=("slow@default",))
    slow.start()
    try:
        assert stuck.wait(JOIN_SECONDS)
        other = threading.Thread(target=fail_once, args=("fast@default",))
        other.start()
        other.join(JOIN_SECONDS)
        assert not other.is_alive(), "a call on another key waited for the stuck listener"
        assert [e.key for e in lines] == []
    finally:
        release.set()
        slow.join(JOIN_SECONDS)
        engine.close()
    assert [e.key for e in lines] == ["slow@default", "fast@default"]
    assert [e.seq for e in lines] == sorted(e.seq for e in lines)


def test_concurrent_completions_keep_seq_increasing_and_transitions_after_their_cause(tmp_path):
    clock = ManualClock()
    engine = Engine(ToolPolicy(), clock=clock, state_dir=tmp_path / "state")
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    keys = [f"backend-{n}@default" for n in range(4)]
    tick = threading.Lock()

    def worker(i: int) -> None:
        rng = random.Random(i)
        for _ in range(60):
            key = rng.choice(keys)
            call = enter(engine, key, agent=f"agent-{i}")
            admission = engine.admit(call, 61)
            if admission.allowed:
                call.attempts = 1
                outcome = rng.choices([UPSTREAM, SUCCESS, NOT_FOUND], weights=[6, 1, 1])[0]
                engine.complete(call, outcome, fault="x", agent_status="x")
            if rng.random() < 0.2:
                with tick:
                    clock.advance(rng.choice([1, 5, 30]))
                engine.poll()

    try:
        in_threads(16, worker)
        seqs = [e.seq for e in lines]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
        by_seq = {e.seq: e for e in lines}
        # Which transitions happen depends on how the threads interleave; trips always do.
        assert ev.TRIPPED in {e.type for e in lines}
        for event in lines:
            if event.type in (ev.TRIPPED, ev.REOPENED, ev.RECOVERED):
                cause = by_seq[event.fields["cause_seq"]]
                assert cause.type == ev.CALL_COMPLETED and cause.key == event.key
                between = [by_seq[s].key for s in range(cause.seq + 1, event.seq)]
                assert event.key not in between, "a line for the key came between call and effect"
            elif event.type == ev.PAGE:
                cause = by_seq[event.fields["cause_seq"]]
                between = [by_seq[s].key for s in range(cause.seq + 1, event.seq)]
                assert cause.type == ev.REOPENED and event.key not in between
        completed = [e for e in lines if e.type == ev.CALL_COMPLETED]
        failed = [e for e in completed if e.fields["outcome"] != "success"]
        audited = engine.audit.query(limit=100_000)
        audited_seqs = [e.seq for e in audited]
        assert len(audited_seqs) == len(set(audited_seqs))
        assert len([e for e in audited if e.type == ev.CALL_FAILED]) == len(failed)
        assert len(audited) == len(lines) - (len(completed) - len(failed))
    finally:
        engine.close()


def test_concurrent_resets_and_calls_never_lose_a_line(tmp_path):
    clock = ManualClock()
    engine = Engine(AgentPolicy(), clock=clock, state_dir=tmp_path / "state")
    lines: list[ev.Event] = []
    engine.subscribe(lines.append)
    trip(engine, "ava")

    def work(i: int) -> None:
        if i % 5 == 0:
            engine.reset("ava", actor=f"op-{i}", reason="thread test")
            return
        call = enter(engine, "ava")
        if engine.admit(call, 90).allowed:
            engine.complete(call, UPSTREAM, fault="refused", agent_status=502)

    try:
        in_threads(THREADS, work)
        resets = [e for e in lines if e.type == ev.RESET]
        assert sorted(e.fields["actor"] for e in resets) == sorted(
            f"op-{i}" for i in range(0, THREADS, 5)
        )
        seqs = [e.seq for e in lines]
        assert seqs == sorted(set(seqs))
        assert len(engine.audit.query(limit=10_000)) == len(lines)
    finally:
        engine.close()
