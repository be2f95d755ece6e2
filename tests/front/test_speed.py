"""`--speed N`: the engine's clock runs N times real time from one anchor."""

from __future__ import annotations

import asyncio
import time

import pytest

from breakerdeck.engine.front.speed import SpeedClock


def test_the_clock_runs_n_times_real_time() -> None:
    clock = SpeedClock(10)
    mono, wall, real = clock.monotonic(), clock.wall(), time.monotonic()
    time.sleep(0.05)
    elapsed = time.monotonic() - real
    assert clock.monotonic() - mono == pytest.approx(10 * elapsed, rel=0.2)
    assert clock.wall() - wall == pytest.approx(10 * elapsed, rel=0.2)


def test_the_wall_reading_starts_at_the_anchor() -> None:
    anchor = time.time() - 100
    assert SpeedClock(2, anchor=anchor).wall() == pytest.approx(anchor + 200, abs=1)


def test_a_speed_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="speed"):
        SpeedClock(0)


async def test_the_engines_scheduler_runs_a_callback_at_a_time_on_the_sped_up_clock() -> None:
    clock = SpeedClock(10)
    ran = asyncio.Event()
    started = time.monotonic()
    clock.scheduler(asyncio.get_running_loop())(clock.monotonic() + 1.0, ran.set)
    await asyncio.wait_for(ran.wait(), 2)
    assert 0.05 <= time.monotonic() - started < 0.5
