"""`watch` reads a sped-up engine's speed from its events, and does not read a manual
clock's jump (an example's story, a test's) as one."""

from __future__ import annotations

import pytest

from breakerdeck.console import remote_source
from breakerdeck.console.remote_source import RemoteFeed, RemoteSource, _measure_rate
from tests.console.test_watch_clock import SYNCED, LocalClock


@pytest.fixture
def feed(monkeypatch: pytest.MonkeyPatch) -> tuple[RemoteFeed, LocalClock]:
    local = LocalClock(SYNCED)
    monkeypatch.setattr(remote_source, "time", local)
    source = RemoteSource(["ws://127.0.0.1:1"], tokens=["viewer-token"])
    one = source.feeds[0]
    one.synced_at = SYNCED
    return one, local


def arrive(feed: RemoteFeed, local: LocalClock, at_local: float, engine: float) -> None:
    """An event stamped `engine` (on the local clock) arriving at local time `at_local`."""
    local.now = at_local
    _measure_rate(feed, engine)


def test_a_sped_up_engines_events_give_its_speed(feed) -> None:
    one, local = feed
    for second in range(1, 10):
        arrive(one, local, SYNCED + second, SYNCED + 5 * second)
    assert one.rate == 5.0


def test_a_manual_clocks_jump_is_not_a_speed(feed) -> None:
    one, local = feed
    for second in (3, 6, 9):  # the story's acts, the clock standing still
        arrive(one, local, SYNCED + second, SYNCED)
    arrive(one, local, SYNCED + 11, SYNCED + 30)  # the cooldown passes at once
    arrive(one, local, SYNCED + 14, SYNCED + 30)
    assert one.rate == 1.0


def test_one_jump_after_the_snapshot_is_not_a_speed(feed) -> None:
    one, local = feed
    arrive(one, local, SYNCED + 4.4, SYNCED + 30)  # the example's ×6.8
    assert one.rate == 1.0
