"""Prometheus metrics for `gateway`, `mcp` and `serve` (DESIGN, "Metrics").

Nothing on the call path touches a metric object and no listener counts anything: the engine's
tallies and the door's `Counts` are read (`telemetry.readings.read`, the same reading the
OpenTelemetry instruments take) and turned into families by `BreakerCollector` only when
Prometheus scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.telemetry.readings import BUCKETS, Counts, read

__all__ = ["BreakerCollector", "Counts", "registry_for"]


class BreakerCollector(Collector):
    """`breakerdeck_*` families from an engine's breakers and a `Counts`."""

    def __init__(self, engine: Engine, counts: Counts) -> None:
        self.engine = engine
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        now = read(self.engine, self.counts)
        yield _gauge(
            "breakerdeck_breaker_state",
            "1 for the breaker's current state",
            ["key", "state"],
            now.states,
        )
        yield _gauge(
            "breakerdeck_breaker_mode",
            "1 for the breaker's current mode (enforce, or shadow: it refuses nothing)",
            ["key", "mode"],
            now.modes,
        )
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
        yield _family(
            "breakerdeck_would_deny",
            "Calls a shadow breaker would have refused, let through",
            ["key"],
            now.would_deny,
        )

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


def _gauge(
    name: str, documentation: str, labels: list[str], values: Mapping[LabelValues, int]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for label_values, n in values.items():
        family.add_metric(list(label_values), float(n))
    return family


def registry_for(engine: Engine, counts: Counts) -> CollectorRegistry:
    """A registry of our own (no process or GC collectors of the default one)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BreakerCollector(engine, counts))
    return registry
