"""PydanticAI: a `BreakerCapability` on the agent, its model a `FunctionModel` that looks a
customer up and reports what the tool said."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from story import BACKENDS, Ask, Crm, Story, run

from breakerdeck.adapters.pydantic_ai import BreakerCapability


async def main(story: Story, crm: Crm) -> Ask:
    async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [p for p in messages[-1].parts if p.part_kind in ("tool-return", "retry-prompt")]
        if returned:
            return ModelResponse(parts=[TextPart(str(returned[0].content))])
        return ModelResponse(parts=[ToolCallPart("lookup_customer", {"customer": "c-42"})])

    agent = Agent(
        FunctionModel(model),
        name="support-bot",
        capabilities=[BreakerCapability(story.engine, BACKENDS)],  # the line a user adds
    )
    agent.tool_plain(crm.lookup_customer)

    async def ask() -> Any:
        return (await agent.run("Who is customer c-42?")).output

    return ask


if __name__ == "__main__":
    run(Story("PydanticAI"), main)
