"""PydanticAI opens its own `execute_tool` span around `wrap_tool_execute`: the call path runs
inside it, so the call path's telemetry adds to that span instead of opening a second one."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai.models.instrumented import InstrumentationSettings

from breakerdeck.engine.engine import Engine
from tests.adapters.drive_pydantic_ai import PydanticAiDriver
from tests.adapters.support import BACKENDS, Crm


async def test_the_call_is_recorded_inside_pydantic_ais_execute_tool_span(
    engine: Engine, crm: Crm
) -> None:
    driver = PydanticAiDriver()
    driver.build(engine, crm)
    driver.agent.instrument = InstrumentationSettings(tracer_provider=TracerProvider())
    spans: list[Any] = []
    engine.subscribe(lambda event: spans.append(trace.get_current_span()))
    await driver.run()
    assert [span.name for span in spans] == ["execute_tool lookup_customer"]
    assert spans[0].attributes["gen_ai.operation.name"] == "execute_tool"


async def test_a_tool_whose_mcp_annotations_say_read_only_keeps_its_retry_budget(
    engine: Engine, crm: Crm
) -> None:
    driver = PydanticAiDriver()
    driver.build(engine, crm, backends={**BACKENDS, "read_customer": "crm"})
    driver.calls = [("read_customer", {"customer": "c-1"})]
    annotations = {"readOnlyHint": True}  # as PydanticAI carries an MCP tool's annotations
    driver.agent.tool_plain(
        crm.lookup_customer, name="read_customer", metadata={"annotations": annotations}
    )
    crm.down()
    await driver.run()
    assert crm.platform.requests == 2
