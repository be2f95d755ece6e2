"""`breakerdeck gateway` exporting over OTLP/HTTP, set up from the environment as OpenTelemetry
users expect (DESIGN, "Telemetry"), to a loopback receiver that decodes the protobuf: a trip
arrives as a span with its event, as the metric families, and as a log record in the span's
trace; the exporter's headers are never logged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from breakerdeck.engine.telemetry.setup import wanted
from tests.front.conftest import auth, credential_file, write_config
from tests.front.test_gateway_process import Gateway
from tests.front.upstream import Recorder

_DECODERS: dict[str, Callable[[], Any]] = {
    "/v1/traces": ExportTraceServiceRequest,
    "/v1/metrics": ExportMetricsServiceRequest,
    "/v1/logs": ExportLogsServiceRequest,
}


class Receiver:
    """An OTLP/HTTP endpoint on a loopback port: every request decoded, kept by path."""

    def __init__(self) -> None:
        self.received: dict[str, list[Any]] = {path: [] for path in _DECODERS}
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/v1/{signal}", self._handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def _handle(self, request: web.Request) -> web.Response:
        message = _DECODERS[request.path]()
        message.ParseFromString(await request.read())
        self.received[request.path].append(message)
        return web.Response(content_type="application/x-protobuf", body=b"")

    def items(self, path: str, *levels: str) -> list[Any]:
        """What the requests to `path` hold, `levels` down (resources, scopes, items)."""
        found: list[Any] = self.received[path]
        for level in levels:
            found = [item for parent in found for item in getattr(parent, level)]
        return found

    def spans(self) -> list[Any]:
        return self.items("/v1/traces", "resource_spans", "scope_spans", "spans")

    def metric_points(self, name: str) -> list[Any]:
        metrics = self.items("/v1/metrics", "resource_metrics", "scope_metrics", "metrics")
        return [
            point
            for metric in metrics
            if metric.name == name
            for point in getattr(metric, metric.WhichOneof("data")).data_points
        ]

    def log_records(self) -> list[Any]:
        return self.items("/v1/logs", "resource_logs", "scope_logs", "log_records")

    async def close(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    started = await Receiver().start()
    yield started
    await started.close()


def attributes(item: Any) -> dict[str, Any]:
    values = {}
    for kv in item.attributes:
        value = kv.value
        values[kv.key] = getattr(value, value.WhichOneof("value"))
    return values


async def until(seen: Callable[[], Any], seconds: float = 15.0) -> Any:
    """Polls until `seen()` is truthy (the exporters send on their own schedule)."""
    deadline = time.monotonic() + seconds
    while not (found := seen()):
        assert time.monotonic() < deadline, "nothing arrived in time"
        await asyncio.sleep(0.05)
    return found


def test_only_an_endpoint_outside_OTEL_SDK_DISABLED_turns_it_on() -> None:
    assert wanted({}) == set()
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}) == {"traces", "metrics", "logs"}
    assert wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/v1/traces"}) == {"traces"}
    assert wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}) == set()
    on_but_no_logs = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_LOGS_EXPORTER": "none"}
    assert wanted(on_but_no_logs) == {"traces", "metrics"}


async def test_a_trip_arrives_as_a_span_event_metrics_and_a_log_record(
    tmp_path: Path, receiver: Receiver
) -> None:
    platform = await Recorder().start()
    config = write_config(
        tmp_path,
        {"payments": platform.url("/api")},
        {"billing": {"payments": credential_file(tmp_path)}},
    )
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer exporter-secret",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
        "OTEL_BLRP_SCHEDULE_DELAY": "50",
        "OTEL_METRIC_EXPORT_INTERVAL": "100",
    }
    gateway = Gateway(config, "--state-dir", str(tmp_path / "state"), env=env)
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(5):
                await client.get(gateway.url + "/p/payments/garbage", headers=auth("billing"))
        spans = await until(lambda: [s for s in receiver.spans() if s.events])
        await until(
            lambda: [
                p
                for p in receiver.metric_points("breakerdeck.transitions")
                if attributes(p) == {"key": "billing", "to": "open"} and p.as_int == 1
            ]
        )
        records = await until(receiver.log_records)
    finally:
        gateway.stop()
        await platform.close()
    assert gateway.process.stderr is not None
    stderr = "".join(gateway.lines) + gateway.process.stderr.read()
    [tripping] = spans
    assert tripping.name == "execute_tool payments"
    assert [event.name for event in tripping.events] == ["circuit_breaker.tripped"]
    assert attributes(tripping)["error.type"] == "upstream_failure"
    assert receiver.metric_points("gen_ai.execute_tool.duration")
    [record] = records
    assert record.body.string_value == "tripped billing: upstream ×5, open 300 s"
    assert record.trace_id == tripping.trace_id
    assert record.span_id == tripping.span_id
    assert "breakerdeck.breakers: tripped billing: upstream ×5, open 300 s" in stderr
    assert "exporter-secret" not in stderr
