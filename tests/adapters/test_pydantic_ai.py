"""PydanticAI carries an MCP tool's annotations in its tool definition's metadata: a tool they
say is read-only may be retried."""

from __future__ import annotations

from breakerdeck.engine.engine import Engine
from tests.adapters.drive_pydantic_ai import PydanticAiDriver
from tests.adapters.support import BACKENDS, Crm


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
