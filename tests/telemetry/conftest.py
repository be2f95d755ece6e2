"""Telemetry tests: the SDK's in-memory exporter and metric reader behind every door, named with
`telemetry.use` (never the process's global provider, which other tests share), and the front
doors' rigs (a real gateway on a loopback port), and one real Prometheus for the session."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from breakerdeck.engine import telemetry
from tests.front.conftest import free_socket, start_gateway
from tests.telemetry.prometheus_server import PrometheusMissing, PrometheusServer

__all__ = ["start_gateway"]


@dataclass
class Exported:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    provider: TracerProvider

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def calls(self) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name.startswith("execute_tool ")]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        own = parent.get_span_context().span_id
        return [s for s in self.finished() if s.parent is not None and s.parent.span_id == own]

    def points(self, name: str) -> list[Any]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        return [
            point
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
        ]


@pytest.fixture
def exported() -> Iterator[Exported]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry.use(provider, meters)
    yield Exported(exporter, reader, provider)
    telemetry.use(None)
    provider.shutdown()
    meters.shutdown()


@dataclass
class Scraped:
    """The session's Prometheus, and the bound socket whose address it scrapes."""

    prometheus: PrometheusServer
    sock: socket.socket


@pytest.fixture(scope="session")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """One Prometheus for the session (its tests share an xdist group, so one worker)."""
    sock = free_socket()
    host, port = sock.getsockname()
    try:
        server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), f"{host}:{port}")
    except PrometheusMissing as error:
        sock.close()
        pytest.fail(str(error), pytrace=False)
    yield Scraped(server, sock)
    server.stop()
    sock.close()
