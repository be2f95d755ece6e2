"""`--speed N`: the engine's clock runs N times real time from one anchor."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from breakerdeck.engine.front.speed import SpeedClock
from tests.waiting import eventually


def between(real: Callable[[], float], read: Callable[[], float]) -> tuple[float, float, float]:
    """`read()` between two readings of `real`: bounds that hold however long a read is held up."""
    return real(), read(), real()


def test_the_clock_runs_n_times_real_time() -> None:
    clock = SpeedClock(10)
    for real, read in ((time.monotonic, clock.monotonic), (time.time, clock.wall)):
        before_first, first, after_first = between(real, read)
        time.sleep(0.05)
        before_second, second, after_second = between(real, read)
        slack = 1e-5  # float rounding of a wall time
        assert second - first >= 10 * (before_second - after_first) - slack
        assert second - first <= 10 * (after_second - before_first) + slack


def test_the_wall_reading_starts_at_the_anchor() -> None:
    anchor = time.time() - 100
    assert SpeedClock(2, anchor=anchor).wall() == pytest.approx(anchor + 200, abs=1)


def test_a_speed_of_zero_is_refused() -> None:
    with pytest.raises(ValueError, match="speed"):
        SpeedClock(0)


async def test_the_engines_scheduler_runs_a_callback_at_a_time_on_the_sped_up_clock() -> None:
    # A thousand seconds ahead at 1000x: a second of real time, where the real clock's
    # scheduler would take past the bound. Not early: the sped-up clock has reached it.
    clock = SpeedClock(1000)
    ran: list[float] = []
    at = clock.monotonic() + 1000.0
    clock.scheduler(asyncio.get_running_loop())(at, lambda: ran.append(clock.monotonic()))
    await eventually(lambda: bool(ran), "the callback run")
    assert ran[0] >= at
