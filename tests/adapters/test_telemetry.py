"""With telemetry on, each tool call is one `execute_tool` span: the framework's own where it
opens one (PydanticAI, ADK), breakerdeck's attributes added to it; breakerdeck's elsewhere."""

from __future__ import annotations

import pytest
from google.adk.telemetry import tracing as adk_tracing
from pydantic_ai.models.instrumented import InstrumentationSettings

from breakerdeck.engine.engine import Engine
from tests.adapters.drive_google_adk import GoogleAdkDriver
from tests.adapters.drive_pydantic_ai import PydanticAiDriver
from tests.adapters.support import Crm, Driver
from tests.telemetry.conftest import Exported, exported

__all__ = ["exported"]


async def test_pydantic_ais_execute_tool_span_is_added_to_never_doubled(
    exported: Exported, engine: Engine, crm: Crm
) -> None:
    driver = PydanticAiDriver()
    driver.build(engine, crm)
    driver.agent.instrument = InstrumentationSettings(tracer_provider=exported.provider)
    await driver.run()
    [span] = exported.calls()
    assert span.instrumentation_scope.name == "pydantic-ai"
    assert span.attributes["breakerdeck.key"] == "crm@default"
    assert span.attributes["breakerdeck.outcome"] == "success"


async def test_adks_execute_tool_span_is_added_to_never_doubled(
    exported: Exported, engine: Engine, crm: Crm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adk_tracing, "tracer", exported.provider.get_tracer("gcp.vertex.agent"))
    driver = GoogleAdkDriver()
    driver.build(engine, crm)
    crm.down()
    await driver.run()
    [span] = exported.calls()
    assert span.instrumentation_scope.name == "gcp.vertex.agent"
    assert span.attributes["breakerdeck.key"] == "crm@default"
    assert span.attributes["breakerdeck.outcome"] == "upstream_failure"


@pytest.mark.parametrize("driver", ["openai_agents", "langchain", "claude_agent"], indirect=True)
async def test_a_framework_with_no_span_of_its_own_gets_breakerdecks(
    driver: Driver, exported: Exported, engine: Engine, crm: Crm
) -> None:
    driver.build(engine, crm)
    await driver.run()
    [span] = exported.calls()
    assert span.name == "execute_tool lookup_customer"
    assert span.attributes["breakerdeck.key"] == "crm@default"
