"""The metric families' values, read from the engine's tallies and a door's counts: one reading
for Prometheus (`front/metrics.py`, at scrape time) and OpenTelemetry (`telemetry/meters.py`, at
each collection), so both say the same. No metrics library here: plain integers.

Nothing on the call path touches a metric object: the engine keeps each key's refusals,
transitions, pages and expired probes as plain integers (`Engine.tallies`), and the front door
adds the calls it completes and one duration per call into fixed buckets (`Counts`). Labels are
bounded by configured keys: an engine key is an agent or a backend the operator configured.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass

from breakerdeck.engine.core.breaker import DenyReason
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
    at start is none (`views.tally_name`). Each known key's transitions, refusals and pages are
    there from its first call, at 0: a counter that appears at its first increment is missed by
    `increase()` and `rate()`, so the first trip after a start would never alert."""
    states = {}
    moves: Counter[tuple[str, str]] = Counter()
    denied: Counter[tuple[str, str]] = Counter()
    pages: Counter[tuple[str]] = Counter()
    for view in engine.views():
        key = view.key
        current = "paused" if view.paused else view.state
        for state in STATES:
            states[(key, state)] = 1 if state == current else 0
            moves[(key, state)] += 0
        for known in DenyReason:
            denied[(key, known.value)] += 0
        pages[(key,)] += 0
    tallies = engine.tallies()
    calls = Counter(counts.calls)
    for key, by_reason, tally in tallies:
        if tally.get("expired"):
            calls[(key, EXPIRED.cls.value, True)] += tally["expired"]
        for name, n in tally.items():
            if name[:3] == "to:":
                moves[(key, name[3:])] += n
        moves[(key, "closed")] += tally.get("reset", 0)
        pages[(key,)] += tally.get("page", 0)
        for reason, n in by_reason.items():
            denied[(key, str(reason))] += n
    return Readings(
        states=states,
        calls={(k, o, "true" if c else "false"): n for (k, o, c), n in calls.items()},
        denied=dict(denied),
        transitions=dict(moves),
        pages=dict(pages),
    )
