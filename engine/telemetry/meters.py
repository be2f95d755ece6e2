"""The metric families as OpenTelemetry instruments (DESIGN, "Telemetry"): the same names and
labels as the Prometheus ones, read from the same reading (`readings.read`) at each
collection, and the call durations as histograms recorded when a call's span ends, with the
GenAI conventions' `gen_ai.execute_tool.duration`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from opentelemetry.metrics import CallbackOptions, Observation

import breakerdeck.engine.telemetry.names as names
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.parts.call import Call
from breakerdeck.engine.telemetry.readings import BUCKETS, Counts, Readings, read


class Durations:
    """`gen_ai.execute_tool.duration` (the conventions' attributes) and
    `breakerdeck.call.duration` (by key, as the Prometheus histogram), in seconds."""

    def __init__(self, meter_provider: Any) -> None:
        meter = meter_provider.get_meter(names.SCOPE)
        bounds = list(BUCKETS)
        self._tool = meter.create_histogram(
            "gen_ai.execute_tool.duration",
            unit="s",
            description="Duration of tool execution",
            explicit_bucket_boundaries_advisory=bounds,
        )
        self._call = meter.create_histogram(
            "breakerdeck.call.duration",
            unit="s",
            description="Call durations to the response head",
            explicit_bucket_boundaries_advisory=bounds,
        )

    def record(self, call: Call, error: str | None, seconds: float) -> None:
        attributes = {names.OPERATION: names.EXECUTE_TOOL, names.TOOL_NAME: call.tool}
        if error is not None:
            attributes[names.ERROR_TYPE] = error
        self._tool.record(seconds, attributes)
        self._call.record(seconds, {"key": call.key})


#: Each family: its instrument's name, kind, description, its labels, and its values.
_FAMILIES: tuple[
    tuple[str, str, str, tuple[str, ...], Callable[[Readings], Mapping[Any, int]]], ...
] = (
    (
        "breakerdeck.breaker.state",
        "gauge",
        "1 for the breaker's current state",
        ("key", "state"),
        lambda r: r.states,
    ),
    (
        "breakerdeck.calls",
        "counter",
        "Calls completed",
        ("key", "outcome", "counted"),
        lambda r: r.calls,
    ),
    (
        "breakerdeck.denied_calls",
        "counter",
        "Calls the breaker refused",
        ("key", "reason"),
        lambda r: r.denied,
    ),
    (
        "breakerdeck.transitions",
        "counter",
        "Breaker state changes",
        ("key", "to"),
        lambda r: r.transitions,
    ),
    ("breakerdeck.pages", "counter", "Pages raised", ("key",), lambda r: r.pages),
)


def observe(meter_provider: Any, engine: Engine, counts: Counts) -> None:
    """The families as observable instruments on `meter_provider`, read from `engine` and a
    door's `counts` at each collection."""
    meter = meter_provider.get_meter(names.SCOPE)
    for name, kind, description, labels, values in _FAMILIES:
        make = meter.create_observable_gauge if kind == "gauge" else meter.create_observable_counter
        make(name, callbacks=[_callback(engine, counts, labels, values)], description=description)


def _callback(
    engine: Engine,
    counts: Counts,
    labels: tuple[str, ...],
    values: Callable[[Readings], Mapping[Any, int]],
) -> Callable[[CallbackOptions], Iterable[Observation]]:
    def observed(options: CallbackOptions) -> Iterable[Observation]:
        return [
            Observation(n, dict(zip(labels, label_values, strict=True)))
            for label_values, n in values(read(engine, counts)).items()
        ]

    return observed
