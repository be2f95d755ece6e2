"""The per-attempt deadline holds on every `call_tool` (HTTP and function tools), and only it
is read as a timeout: a caller cancelled from outside gets its `CancelledError`."""

import asyncio
from typing import Any

import httpx
import pytest

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.fixtures.faults import Fault, FaultKind
from breakerdeck.fixtures.platform import FakePlatform


async def hang(args: Any) -> Any:
    await asyncio.Event().wait()


async def answer(args: Any) -> Any:
    return {"id": 7}


def hanging_harness(engine: Engine, *deadlines: float) -> Harness:
    """Tools `hang-<deadline>` (one attempt each, one backend per tool) that never answer."""
    harness = Harness(engine)
    for seconds in deadlines:
        name = f"hang-{seconds:g}"
        harness.register(
            Tool(name, backend=name, function=hang, attempts=1, deadline_seconds=seconds)
        )
    return harness


async def test_a_function_tool_that_hangs_is_cut_at_its_deadline(tool_engine):
    harness = hanging_harness(tool_engine, 5)
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = await harness.call_tool("ava", "hang-5")
    assert result["status"] == "tool_error"
    assert loop.time() - start == 5


async def test_every_call_to_a_hanging_tool_is_cut_at_its_deadline(tool_engine):
    harness = hanging_harness(tool_engine, 5)
    harness.register(Tool("quick", backend="quick", function=answer))
    loop = asyncio.get_running_loop()
    for _ in range(3):
        assert (await harness.call_tool("ava", "quick"))["status"] == "ok"
        start = loop.time()
        assert (await harness.call_tool("ava", "hang-5"))["status"] == "tool_error"
        assert loop.time() - start == 5


async def test_a_shorter_deadline_started_after_a_longer_one_is_cut_first(tool_engine):
    harness = hanging_harness(tool_engine, 30, 5)
    loop = asyncio.get_running_loop()
    start = loop.time()
    ended: dict[str, float] = {}

    async def timed(name: str) -> None:
        await harness.call_tool("ava", name)
        ended[name] = loop.time() - start

    long = asyncio.create_task(timed("hang-30"))
    await asyncio.sleep(1)
    await timed("hang-5")
    await long
    assert ended == {"hang-5": 6, "hang-30": 30}


async def test_an_http_tool_that_hangs_is_cut_at_each_attempts_deadline(tool_engine):
    platform = FakePlatform("payments")
    platform.set_fault(Fault(FaultKind.TIMEOUT))
    client = httpx.AsyncClient(transport=platform, base_url="https://payments.test")
    harness = Harness(tool_engine, {"payments": client})
    harness.register(Tool("charge", backend="payments", deadline_seconds=7, attempts=3))
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = await harness.call_tool("ava", "charge")
    assert result["status"] == "tool_error" and result["attempts"] == 3
    assert loop.time() - start == 3 * 7 + 2 * 1  # three cut attempts, two 1 s backoffs
    assert platform.requests == 3


async def test_a_timed_out_call_leaves_its_caller_with_no_cancellation_pending(tool_engine):
    harness = hanging_harness(tool_engine, 5)
    await harness.call_tool("ava", "hang-5")
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0


async def test_cancelling_the_caller_propagates_as_cancelled_error(tool_engine):
    harness = hanging_harness(tool_engine, 30)
    task = asyncio.create_task(harness.call_tool("ava", "hang-30"))
    await asyncio.sleep(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_caller_cancelled_as_its_deadline_fires_still_gets_cancelled_error(tool_engine):
    harness = hanging_harness(tool_engine, 5)
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(harness.call_tool("ava", "hang-5"))
    await asyncio.sleep(0)  # the attempt starts and its deadline stands at now + 5
    loop.call_at(loop.time() + 5, task.cancel)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_caller_does_not_cut_another_callers_deadline(tool_engine):
    harness = hanging_harness(tool_engine, 5, 30)
    loop = asyncio.get_running_loop()
    start = loop.time()
    cancelled = asyncio.create_task(harness.call_tool("ava", "hang-5"))
    waiting = asyncio.create_task(harness.call_tool("ava", "hang-30"))
    await asyncio.sleep(1)
    cancelled.cancel()
    result = await waiting
    assert result["status"] == "tool_error"
    assert loop.time() - start == 30
    assert cancelled.cancelled()
