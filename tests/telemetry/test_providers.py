"""Which provider the doors use (DESIGN, "Telemetry"): with telemetry off nothing of
OpenTelemetry is imported; a library door (the harness) uses the application's global
provider, once it has set one. Each in a fresh interpreter: a global provider is set once per
process, and other tests share this one."""

from __future__ import annotations

import subprocess
import sys

_CALL = """
import asyncio, sys
import httpx
from breakerdeck.engine.engine import Engine
from breakerdeck.engine.harness import Harness, Tool
from breakerdeck.engine.policy import ToolPolicy
from breakerdeck.fixtures.platform import FakePlatform

async def call():
    client = httpx.AsyncClient(transport=FakePlatform("payments"), base_url="https://p.test")
    with Engine(ToolPolicy()) as engine:
        harness = Harness(engine, {"payments": client})
        harness.register(Tool("charge", backend="payments"))
        await harness.call_tool("ava", "charge")
"""

_GLOBAL = """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
asyncio.run(call())  # before the application sets its provider: no span
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
asyncio.run(call())
print(sorted(span.name for span in exporter.get_finished_spans()))
"""


def _run(script: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def test_with_telemetry_off_a_call_imports_nothing_of_opentelemetry() -> None:
    imported = "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    assert _run(_CALL + "asyncio.run(call())\n" + imported) == "[]"


def test_the_harness_uses_the_applications_global_provider_once_set() -> None:
    assert _run(_CALL + _GLOBAL) == "['breakerdeck.attempt', 'execute_tool charge']"
