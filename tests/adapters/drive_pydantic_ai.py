"""PydanticAI's agent loop, driven by a `FunctionModel` that calls the tools it is told to."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from breakerdeck.adapters.pydantic_ai import BreakerCapability
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, Crm, Driver


class PydanticAiDriver(Driver):
    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        # An async model function: a plain one runs on anyio's threads, behind the simulated
        # clock's back.
        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            returned = [
                p for p in messages[-1].parts if p.part_kind in ("tool-return", "retry-prompt")
            ]
            if returned:
                self.seen.extend(p.content for p in returned)
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(
                parts=[
                    ToolCallPart(n, a, tool_call_id=f"call-{i}")
                    for i, (n, a) in enumerate(self.calls)
                ]
            )

        self.capability = BreakerCapability(engine, settings.pop("backends", BACKENDS), **settings)
        self.agent = Agent(FunctionModel(model), name="support-bot", capabilities=[self.capability])
        self.agent.tool_plain(crm.lookup_customer)
        self.agent.tool_plain(crm.send_email)

    async def run(self) -> None:
        await self.agent.run("look up c-1")
