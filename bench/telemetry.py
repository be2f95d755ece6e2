"""What telemetry costs a healthy call (docs/bench.md, "Telemetry"): the closed call through the
harness with telemetry off (the figure to hold against the same row before telemetry existed),
and with spans on, as a ratio.

Spans on is the SDK's `TracerProvider` behind a `BatchSpanProcessor` whose exporter drops
what it is given (export happens off the call path, on the processor's thread), and an SDK
`MeterProvider` with no reader for the duration histograms: the cost of making the spans and
recording the durations, not of sending them. Run alone: `.venv/bin/python bench/telemetry.py`
(it runs on a tree without telemetry too, printing the off rows only).
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import measure
from bench.common import AGENT, awork, work
from bench.ours import HarnessSubject

US = 1e6
#: Off, then on: (label, sync overhead µs, async overhead µs).
Row = tuple[str, float, float]


def _closed(loop: asyncio.AbstractEventLoop) -> tuple[float, float]:
    subject = HarnessSubject(3600.0)
    sync = measure.overhead(subject.guard(work), work) * US
    asyn = measure.overhead_async(loop, subject.guard_async(awork), awork) * US
    subject.engine.close()
    return sync, asyn


def _spans_on() -> Callable[[], None]:
    """The SDK behind breakerdeck's spans (`telemetry.use`); returns what turns it off."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from breakerdeck.engine import telemetry

    class Dropped(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
    meter_provider = MeterProvider()
    telemetry.use(tracer_provider, meter_provider)

    def off() -> None:
        telemetry.use(None)
        tracer_provider.shutdown()
        meter_provider.shutdown()

    return off


def run() -> list[Row]:
    loop = asyncio.new_event_loop()
    rows: list[Row] = [("telemetry off", *_closed(loop))]
    if importlib.util.find_spec("breakerdeck.engine.telemetry") is not None:
        off = _spans_on()
        try:
            rows.append(("spans on (SDK, batch, exporter dropping)", *_closed(loop)))
        finally:
            off()
    loop.close()
    return rows


def render(rows: list[Row]) -> str:
    lines = [
        "telemetry: closed call through the harness, overhead over the bare call (µs), "
        f"`Harness.guard` (sync) / `Harness.call_tool` as {AGENT} (async)",
        f"  {'':44}  {'sync':>8}  {'async':>8}  {'ratio to off':>14}",
    ]
    _, off_sync, off_async = rows[0]
    for label, sync, asyn in rows:
        ratio = f"{sync / off_sync:.2f}x / {asyn / off_async:.2f}x"
        lines.append(f"  {label:44}  {sync:8.2f}  {asyn:8.2f}  {ratio:>14}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(render(run()), flush=True)
