"""The SDK for the command-line doors (`gateway`, `mcp`), set up as OpenTelemetry users expect
(DESIGN, "Telemetry"): from the `OTEL_*` environment, with the OTLP/HTTP exporter, only when an
endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or a signal's own) and not under
`OTEL_SDK_DISABLED`; a signal whose `OTEL_<SIGNAL>_EXPORTER` is `none` is left off. The
exporters read the rest themselves (headers, timeouts, TLS, the export interval). Nothing is
imported unless an endpoint is set.

The exporters are flushed and stopped by what `start` returns, within the seconds it is given:
a collector that hangs or refuses held a stopping gateway 37 s past its drain (the exporters
retry with backoff, each signal in turn, and the SDK's own exit hook did it all again), so the
providers are made without that hook and their shutdown runs on a daemon thread that is left
behind when its time is up.

Each signal set up: spans (the call path's, through the global tracer provider), the metric
families as instruments (`meters.observe`) and the durations, and the breakers' log lines
(`front.logs.breakers`) as log records, each inside the span of the call that caused it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping

from breakerdeck.engine.engine import Engine
from breakerdeck.engine.telemetry.readings import Counts

log = logging.getLogger(__name__)

_SIGNALS = ("traces", "metrics", "logs")

#: A stopping door's flush, the audit log's first and then the exporters' in what is left
#: (DESIGN: at most 2 s, exporters included).
FLUSH_SECONDS = 2.0

Stop = Callable[[float], None]


def no_stop(seconds: float) -> None:
    """Telemetry off: nothing to flush."""


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
) -> Stop:
    """Set the SDK up for `door` as the environment asks; returns what flushes and stops it
    within the seconds it is given (a no-op when telemetry is off)."""
    signals = wanted(environ)
    if not signals:
        return no_stop
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    except ImportError:
        log.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "pip install 'breakerdeck[otel]'"
        )
        return no_stop
    from breakerdeck.engine.telemetry.meters import observe

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: f"breakerdeck-{door}"}))
    stops: list[Callable[[], object]] = []
    if "traces" in signals:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(tracer_provider)
        stops.append(tracer_provider.shutdown)
    if "metrics" in signals:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(
            resource=resource, metric_readers=[reader], shutdown_on_exit=False
        )
        metrics.set_meter_provider(meter_provider)
        observe(meter_provider, engine, counts)
        stops.append(meter_provider.shutdown)
    if "logs" in signals:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
        handler = LoggingHandler(logger_provider=logger_provider)
        breakers.addHandler(handler)
        stops.append(lambda: breakers.removeHandler(handler))
        stops.append(logger_provider.shutdown)

    def shut_down() -> None:
        for each in stops:
            each()

    def stop(seconds: float) -> None:
        stopping = threading.Thread(target=shut_down, name="telemetry-stop", daemon=True)
        stopping.start()
        stopping.join(max(0.0, seconds))
        if stopping.is_alive():
            log.warning(
                "the OpenTelemetry exporters did not finish within %.1f s (is the collector "
                "up?): what they still held is dropped",
                seconds,
            )

    return stop


def flush_after(stop: Stop, *closes: Callable[[], object]) -> None:
    """A door's last step: each of `closes` (the engine, its audit log flushed; the trace
    file), then the exporters in what is left of `FLUSH_SECONDS`: the audit log is the
    record, the exporters' a copy."""
    started = time.monotonic()
    try:
        for close in closes:
            close()
    finally:
        stop(FLUSH_SECONDS - (time.monotonic() - started))
