"""The SDK for the command-line doors (`gateway`, `mcp`), set up as OpenTelemetry users expect
(DESIGN, "Telemetry"): from the `OTEL_*` environment, with the OTLP/HTTP exporter, only when an
endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or a signal's own) and not under
`OTEL_SDK_DISABLED`; a signal whose `OTEL_<SIGNAL>_EXPORTER` is `none` is left off. The
exporters read the rest themselves (headers, timeouts, TLS, the export interval). Nothing is
imported unless an endpoint is set.

Each signal set up: spans (the call path's, through the global tracer provider), the metric
families as instruments (`meters.observe`) and the durations, and the breakers' log lines
(`front.logs.breakers`) as log records, each inside the span of the call that caused it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.telemetry.readings import Counts

log = logging.getLogger(__name__)

_SIGNALS = ("traces", "metrics", "logs")


def wanted(environ: Mapping[str, str]) -> set[str]:
    """The signals the environment asks to export (none: telemetry stays off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return set()
    shared = bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    return {
        signal
        for signal in _SIGNALS
        if (shared or environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT"))
        and environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").strip().lower() != "none"
    }


def start(
    door: str,
    engine: Engine,
    counts: Counts,
    breakers: logging.Logger,
    environ: Mapping[str, str] = os.environ,
) -> Callable[[], None]:
    """Set the SDK up for `door` as the environment asks; returns what flushes and stops it
    (a no-op when telemetry is off)."""
    signals = wanted(environ)
    if not signals:
        return lambda: None
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "pip install 'breakerdeck[otel]'"
        )
        return lambda: None
    from breakerdeck.engine.telemetry.meters import observe

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: f"breakerdeck-{door}"}))
    stops: list[Callable[[], object]] = []
    if "traces" in signals:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(tracer_provider)
        stops.append(tracer_provider.shutdown)
    if "metrics" in signals:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
        metrics.set_meter_provider(meter_provider)
        observe(meter_provider, engine, counts)
        stops.append(meter_provider.shutdown)
    if "logs" in signals:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
        handler = LoggingHandler(logger_provider=logger_provider)
        breakers.addHandler(handler)
        stops.append(lambda: breakers.removeHandler(handler))
        stops.append(logger_provider.shutdown)

    def stop() -> None:
        for each in stops:
            each()

    return stop
