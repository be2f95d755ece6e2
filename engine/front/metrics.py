"""Prometheus metrics for `gateway`, `mcp` and `serve` (DESIGN, "Metrics").

Nothing on the call path touches a metric object and no listener counts anything: the engine
keeps each key's refusals, transitions, pages and expired probes as plain integers
(`Engine.tallies`), the front door adds the calls it completes and one duration per call into
fixed buckets (`Counts`), and `BreakerCollector` turns both into families only when Prometheus
scrapes. Labels are bounded by configured keys: an engine key is an agent or a backend the
operator configured.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from breakerdeck.engine.engine import EXPIRED, Engine

STATES = ("closed", "open", "half_open", "paused")
#: Fixed bucket bounds, in seconds of the engine's clock.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Counts:
    """Per-key integers, added to on the call path and read at scrape time."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str, bool]] = Counter()
        self.buckets: defaultdict[str, list[int]] = defaultdict(lambda: [0] * (len(BUCKETS) + 1))
        self.duration_sums: defaultdict[str, float] = defaultdict(float)

    def observe(self, key: str, seconds: float) -> None:
        self.buckets[key][bisect.bisect_left(BUCKETS, seconds)] += 1
        self.duration_sums[key] += seconds


@dataclass(frozen=True, slots=True)
class Readings:
    """The families' values at one moment, by label values in the families' label order: read
    once per scrape (Prometheus) or per collection (OpenTelemetry), so both say the same."""

    states: dict[tuple[str, str], int]
    calls: dict[tuple[str, str, str], int]
    denied: dict[tuple[str, str], int]
    transitions: dict[tuple[str, str], int]
    pages: dict[tuple[str], int]


def read(engine: Engine, counts: Counts) -> Readings:
    """The engine's tallies and the door's counts as the families' values. A transition is a
    move the breaker made while running (a reset counts as one to closed); a verdict restored
    at start is none (`views.tally_name`)."""
    states = {}
    for view in engine.views():
        current = "paused" if view.paused else view.state
        for state in STATES:
            states[(view.key, state)] = 1 if state == current else 0
    tallies = engine.tallies()
    calls = Counter(counts.calls)
    for key, _, tally in tallies:
        if tally.get("expired"):
            calls[(key, EXPIRED.cls.value, True)] += tally["expired"]
    moves: Counter[tuple[str, str]] = Counter()
    for key, _, tally in tallies:
        for name, n in tally.items():
            if name[:3] == "to:":
                moves[(key, name[3:])] += n
        if tally.get("reset"):
            moves[(key, "closed")] += tally["reset"]
    return Readings(
        states=states,
        calls={(k, o, "true" if c else "false"): n for (k, o, c), n in calls.items()},
        denied={(k, str(r)): n for k, by_reason, _ in tallies for r, n in by_reason.items()},
        transitions=dict(moves),
        pages={(k,): t["page"] for k, _, t in tallies if t.get("page")},
    )


class BreakerCollector(Collector):
    """`breakerdeck_*` families from an engine's breakers and a `Counts`."""

    def __init__(self, engine: Engine, counts: Counts) -> None:
        self.engine = engine
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        now = read(self.engine, self.counts)
        family = GaugeMetricFamily(
            "breakerdeck_breaker_state",
            "1 for the breaker's current state",
            labels=["key", "state"],
        )
        for (key, state), value in now.states.items():
            family.add_metric([key, state], float(value))
        yield family
        yield _family(
            "breakerdeck_calls", "Calls completed", ["key", "outcome", "counted"], now.calls
        )
        yield _family(
            "breakerdeck_denied_calls", "Calls the breaker refused", ["key", "reason"], now.denied
        )
        yield _family(
            "breakerdeck_transitions", "Breaker state changes", ["key", "to"], now.transitions
        )
        yield self._durations()
        yield _family("breakerdeck_pages", "Pages raised", ["key"], now.pages)

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


#: A family's label values, as many as its label names.
LabelValues = TypeVar("LabelValues", bound=tuple[str, ...])


def _family(
    name: str, documentation: str, labels: list[str], values: Mapping[LabelValues, int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for label_values, n in sorted(values.items()):
        family.add_metric(list(label_values), n)
    return family


def registry_for(engine: Engine, counts: Counts) -> CollectorRegistry:
    """A registry of our own (no process or GC collectors of the default one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BreakerCollector(engine, counts))
    return registry
