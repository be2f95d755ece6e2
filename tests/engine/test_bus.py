"""The event bus: ordered delivery, bounded buffers that never block the engine, unsubscribing."""

import asyncio
import threading

import pytest

from breakerdeck.engine import events as ev
from breakerdeck.engine.clock import ManualClock
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.feed.bus import EventBus, Missed
from breakerdeck.engine.outcomes import Outcome, OutcomeClass
from breakerdeck.engine.policy import ToolPolicy

KEY = "payments@default"
DENIED = Outcome(OutcomeClass.PERMISSION_DENIED, detail="scope not granted")


@pytest.fixture
def engine():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    yield engine
    engine.close()


@pytest.fixture
async def bus(engine) -> EventBus:
    return EventBus(engine)


def emit(engine: Engine, n: int) -> list[ev.Event]:
    """n `call.completed` lines, as pre-breaker refusals: cheap, and each one an event."""
    written = []
    for _ in range(n):
        call = engine.new_call(
            key=KEY, agent="ava", platform="payments", tool="charge", deadline_seconds=30
        )
        written.append(engine.refuse(call, DENIED, agent_status="permission_denied"))
    return written


async def drain(subscription, n: int) -> list:
    got: list = []
    while len([x for x in got if not isinstance(x, Missed)]) < n:
        batch = await subscription.get()
        if isinstance(batch, Missed):
            got.append(batch)
        else:
            assert batch, "an open subscription returned an empty batch"
            got += batch
    return got


async def test_a_subscriber_gets_events_in_order(engine, bus):
    subscription = bus.subscribe()
    written = emit(engine, 5)
    received = await drain(subscription, 5)
    written += emit(engine, 7)
    received += await drain(subscription, 7)
    assert [e.seq for e in received] == [e.seq for e in written]
    assert received == written


async def test_a_subscriber_sees_events_from_when_it_subscribed(engine, bus):
    emit(engine, 3)
    subscription = bus.subscribe()
    later = emit(engine, 2)
    assert await subscription.get() == later


async def test_transitions_arrive_right_after_the_line_that_caused_them(engine, bus):
    subscription = bus.subscribe()
    failure = Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True)
    for _ in range(3):
        call = engine.new_call(
            key=KEY, agent="ava", platform="payments", tool="charge", deadline_seconds=30
        )
        engine.admit(call, 61)
        engine.complete(call, failure, fault="refused", agent_status="tool_error")
    received = await subscription.get()
    assert [e.type for e in received] == [ev.CALL_COMPLETED] * 3 + [ev.TRIPPED]
    assert received[-1].fields["cause_seq"] == received[-2].seq


async def test_a_slow_subscriber_flooded_past_its_buffer_is_told_it_missed_events(engine, bus):
    slow = bus.subscribe(maxsize=10)
    fast = bus.subscribe()

    written = emit(engine, 100)  # returns: the engine never waits for a reader

    first = await slow.get()
    assert isinstance(first, Missed) and first.count > 0
    rest = await slow.get()
    assert isinstance(rest, list) and len(rest) <= 10
    assert first.count + len(rest) == 100
    assert rest == written[len(written) - len(rest) :]
    assert await fast.get() == written


async def test_after_a_missed_notice_the_subscriber_reads_on_in_order(engine, bus):
    slow = bus.subscribe(maxsize=10)
    emit(engine, 100)
    missed = await slow.get()
    assert isinstance(missed, Missed)
    if missed.count < 100:
        assert isinstance(await slow.get(), list)  # what was buffered after the drop
    later = emit(engine, 4)
    assert await slow.get() == later


async def test_a_flood_from_another_thread_never_blocks_the_engine(engine, bus):
    slow = bus.subscribe(maxsize=10)
    written: list = []
    worker = threading.Thread(target=lambda: written.extend(emit(engine, 1000)))
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "the engine blocked on a subscriber that was not reading"
    assert len(written) == 1000
    missed = await slow.get()
    assert isinstance(missed, Missed)


async def test_an_event_from_another_thread_wakes_a_waiting_subscriber(engine, bus):
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    written: list = []
    worker = threading.Thread(target=lambda: written.extend(emit(engine, 1)))
    worker.start()
    batch = await waiting
    worker.join(30)
    assert batch == written


async def test_closing_unsubscribes(engine, bus):
    subscription = bus.subscribe()
    other = bus.subscribe()
    before = emit(engine, 2)
    subscription.close()
    emit(engine, 3)
    assert subscription.closed
    assert await subscription.get() == before  # what was buffered before closing, no more
    assert await subscription.get() == []
    assert len(await other.get()) == 5


async def test_a_bus_nobody_subscribes_to_leaves_healthy_calls_unwritten(engine, bus):
    guard = engine.guard(KEY, agent="ava", lease=30)
    subscription = bus.subscribe()
    for _ in range(2):  # the first success learns the credential works: a line of its own
        with guard:
            pass
    written = engine.seq
    subscription.close()
    for _ in range(3):
        with guard:
            pass
    assert len(await subscription.get()) == 2
    assert engine.seq == written


async def test_closing_wakes_a_subscriber_waiting_for_events(engine, bus):
    subscription = bus.subscribe()
    waiting = asyncio.create_task(subscription.get())
    await asyncio.sleep(0)
    subscription.close()
    assert await waiting == []


async def test_closing_twice_is_harmless(engine, bus):
    subscription = bus.subscribe()
    subscription.close()
    subscription.close()
    emit(engine, 1)
    assert await subscription.get() == []


def test_a_listener_that_raises_is_detached_and_the_call_path_goes_on():
    engine = Engine(ToolPolicy(), clock=ManualClock())
    seen: list[str] = []

    def broken(event) -> None:
        raise BrokenPipeError("reader went away")

    engine.subscribe(broken)
    engine.subscribe(lambda event: seen.append(event.type))
    call = engine.new_call(key="b@c", agent="a", platform="b", tool="t", deadline_seconds=30)
    engine.admit(call, 61)
    engine.complete(
        call,
        Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True),
        fault="refused",
        agent_status="tool_error",
    )
    engine.complete(
        call,
        Outcome(OutcomeClass.UPSTREAM_FAILURE, counted=True),
        fault="refused",
        agent_status="tool_error",
    )
    assert seen == ["call.completed", "call.completed"]
    assert any("reader went away" in problem for problem in engine.problems)


async def test_a_reader_taking_while_another_thread_appends_misses_nothing(engine, bus) -> None:
    subscription = bus.subscribe(maxsize=100_000)
    writer = threading.Thread(target=emit, args=(engine, 5_000))
    writer.start()
    got = await drain(subscription, 5_000)
    writer.join()
    assert [event.seq for event in got] == list(range(1, 5_001))
