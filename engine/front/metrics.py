"""Prometheus metrics for `gateway`, `mcp` and `serve` (DESIGN, "Metrics").

Nothing on the call path touches a metric object: `Counts` keeps plain integers per key (an
engine listener adds to them; the front door adds one duration per call into fixed buckets),
and `BreakerCollector` turns them into families only when Prometheus scrapes. Labels are
bounded by configured keys: an engine key is an agent or a backend the operator configured.

For now the per-key counts live here, kept by a listener on the engine's events; when the
engine keeps its own counts the collector reads those instead and `Counts` goes away.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterator

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from breakerdeck.engine import events as ev
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.events import Event

STATES = ("closed", "open", "half_open", "paused")
#: Fixed bucket bounds, in seconds of the engine's clock.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_TO = {
    ev.TRIPPED: "open",
    ev.REOPENED: "open",
    ev.HALF_OPEN: "half_open",
    ev.RECOVERED: "closed",
    ev.RESET: "closed",
    ev.CREDENTIAL_REVOKED: "paused",
    ev.CREDENTIAL_RESTORED: "closed",
}


class Counts:
    """Per-key integers, added to on the call path and read at scrape time."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str, bool]] = Counter()
        self.denied: Counter[tuple[str, str]] = Counter()
        self.transitions: Counter[tuple[str, str]] = Counter()
        self.pages: Counter[str] = Counter()
        self.buckets: defaultdict[str, list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self.duration_sums: defaultdict[str, float] = defaultdict(float)

    def on_event(self, event: Event) -> None:
        """The engine listener: one dict lookup and one add per event. Completions are counted
        by the front door that made them; only the engine's own (an expired probe) here."""
        kind = event.type
        if kind == ev.CALL_COMPLETED:
            fields = event.fields
            if fields.get("fault") == "expired":
                self.calls[(event.key, fields["outcome"], bool(fields["counted"]))] += 1
        elif kind == ev.CALL_DENIED:
            self.denied[(event.key, str(event.fields.get("reason")))] += 1
        elif kind == ev.PAGE:
            self.pages[event.key] += 1
        elif kind in _TO:
            self.transitions[(event.key, _TO[kind])] += 1
        elif kind == ev.RESTORED:
            self.transitions[(event.key, str(event.fields.get("state", "closed")))] += 1

    def observe(self, key: str, seconds: float) -> None:
        self.buckets[key][bisect.bisect_left(BUCKETS, seconds)] += 1
        self.duration_sums[key] += seconds


class BreakerCollector(Collector):
    """`breakerdeck_*` families from an engine's breakers and a `Counts`."""

    def __init__(self, engine: Engine, counts: Counts) -> None:
        self.engine = engine
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        yield self._states()
        counts = self.counts
        calls = CounterMetricFamily(
            "breakerdeck_calls", "Calls completed", labels=["key", "outcome", "counted"]
        )
        for (key, outcome, counted), n in sorted(counts.calls.items()):
            calls.add_metric([key, outcome, "true" if counted else "false"], n)
        yield calls
        denied = CounterMetricFamily(
            "breakerdeck_denied_calls", "Calls the breaker refused", labels=["key", "reason"]
        )
        for (key, reason), n in sorted(counts.denied.items()):
            denied.add_metric([key, reason], n)
        yield denied
        moves = CounterMetricFamily(
            "breakerdeck_transitions", "Breaker state changes", labels=["key", "to"]
        )
        for (key, to), n in sorted(counts.transitions.items()):
            moves.add_metric([key, to], n)
        yield moves
        yield self._durations()
        pages = CounterMetricFamily("breakerdeck_pages", "Pages raised", labels=["key"])
        for key, n in sorted(counts.pages.items()):
            pages.add_metric([key], n)
        yield pages

    def _states(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "breakerdeck_breaker_state",
            "1 for the breaker's current state",
            labels=["key", "state"],
        )
        for view in self.engine.views():
            current = "paused" if view.paused else view.state
            for state in STATES:
                family.add_metric([view.key, state], 1.0 if state == current else 0.0)
        return family

    def _durations(self) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "breakerdeck_call_duration_seconds",
            "Call durations to the response head",
            labels=["key"],
        )
        for key, counts in sorted(self.counts.buckets.items()):
            running, buckets = 0, []
            for bound, n in zip((*map(str, BUCKETS), "+Inf"), counts, strict=True):
                running += n
                buckets.append((bound, float(running)))
            family.add_metric([key], buckets, sum_value=self.counts.duration_sums[key])
        return family


def registry_for(engine: Engine, counts: Counts) -> CollectorRegistry:
    """A registry of our own (no process or GC collectors of the default one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BreakerCollector(engine, counts))
    return registry
