"""Every time `watch` shows for one sped-up engine is on that engine's clock: the header says
how fast it runs, and a lost engine's "STALE since … ago" reads on the clock its cards use."""

from __future__ import annotations

from breakerdeck.console import remote_source
from breakerdeck.console.remote_source import RemoteSource

SYNCED = 1_000_000.0  # local time of the engine's last snapshot


class LocalClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


def sped_up_source(monkeypatch, rate: float, *urls: str) -> tuple[RemoteSource, LocalClock]:
    local = LocalClock(SYNCED)
    monkeypatch.setattr(remote_source, "time", local)
    urls = urls or ("ws://127.0.0.1:1",)
    source = RemoteSource(urls, tokens=["viewer-token"] * len(urls))
    for feed in source.feeds:
        feed.synced_at, feed.rate = SYNCED, rate
    return source, local


def test_the_header_names_a_sped_up_engines_measured_speed_to_two_digits(monkeypatch):
    source, _ = sped_up_source(monkeypatch, 9.97)
    assert source.speed == 10.0


def test_an_engine_in_real_time_has_no_speed_in_the_header(monkeypatch):
    source, _ = sped_up_source(monkeypatch, 1.0)
    assert source.speed is None


def test_several_engines_have_no_speed_in_the_header(monkeypatch):
    source, _ = sped_up_source(monkeypatch, 5.0, "ws://127.0.0.1:1", "ws://127.0.0.1:2")
    assert source.speed is None


def test_a_lost_engines_stale_time_is_on_its_clock_like_its_countdowns(monkeypatch):
    source, local = sped_up_source(monkeypatch, 10.0)
    local.now = SYNCED + 60  # ten engine minutes after the snapshot
    source.feeds[0].stale_since = local.now  # the connection drops now
    local.now += 7  # seven local seconds later: seventy on the engine's clock
    since = source.stale_for("")
    assert since == SYNCED + 600
    assert source.now_for("") - since == 70
    assert source.stale_since == since  # the header reads the same time
