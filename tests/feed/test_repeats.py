"""The log's repeat filter on a simulated clock: the same error once per interval, with a
count of the repeats it held back."""

from __future__ import annotations

import logging

import pytest

from breakerdeck.engine.feed.repeats import RepeatFilter

LOGGER = "tests.feed.repeats"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(clock: Clock, caplog: pytest.LogCaptureFixture):
    logger = logging.getLogger(LOGGER)
    quiet = RepeatFilter(interval=10.0, clock=clock)
    logger.addFilter(quiet)
    caplog.set_level(logging.INFO, logger=LOGGER)
    yield logger
    logger.removeFilter(quiet)


def failing() -> None:
    raise OSError(24, "Too many open files")


def traceback_from(log: logging.Logger, peer: str) -> None:
    try:
        failing()
    except OSError:
        log.exception("accept from %s failed", peer)


def test_the_same_traceback_is_logged_once_per_interval_with_a_count(
    log: logging.Logger, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    for n in range(1000):
        traceback_from(log, f"10.0.0.1:{n}")  # the peer differs; the failure is the same
        clock.now += 0.005
    assert len(caplog.records) == 1
    clock.now = 10.0
    traceback_from(log, "10.0.0.2:1")
    assert len(caplog.records) == 2
    assert caplog.records[1].getMessage() == (
        "accept from 10.0.0.2:1 failed (999 more like this suppressed since the last one)"
    )
    assert caplog.records[1].exc_info is not None


def test_a_repeat_after_a_quiet_interval_is_logged_without_a_count(
    log: logging.Logger, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    log.warning("disk full")
    clock.now = 30.0
    log.warning("disk full")
    assert [r.getMessage() for r in caplog.records] == ["disk full", "disk full"]


def test_different_lines_are_not_held_back(
    log: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    log.warning("reset on %s", "agent-1")
    log.warning("reset on %s", "agent-2")
    log.error("reset on %s", "agent-2")
    log.warning("reset on %s", "agent-1")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "reset on agent-1"),
        ("WARNING", "reset on agent-2"),
        ("ERROR", "reset on agent-2"),
    ]
