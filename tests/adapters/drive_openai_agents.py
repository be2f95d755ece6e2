"""The OpenAI Agents SDK's `Runner`, driven by a fake `Model` that calls the tools it is told
to."""

from __future__ import annotations

import json
from typing import Any

from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from breakerdeck.adapters.openai_agents import protect
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, Crm, Driver

set_tracing_disabled(True)  # the SDK's trace exporter is a thread of its own: none offline


class ScriptedModel(Model):
    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = (
            [item for item in input if isinstance(item, dict)] if isinstance(input, list) else []
        )
        outputs = [item["output"] for item in items if item.get("type") == "function_call_output"]
        if outputs:
            self.driver.seen.extend(outputs)
            text = ResponseOutputText(text="done", type="output_text", annotations=[])
            message = ResponseOutputMessage(
                id="m", content=[text], role="assistant", status="completed", type="message"
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        calls = [
            ResponseFunctionToolCall(
                id=f"f-{i}",
                call_id=f"call-{i}",
                type="function_call",
                name=name,
                arguments=json.dumps(args),
            )
            for i, (name, args) in enumerate(self.driver.calls)
        ]
        return ModelResponse(output=calls, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class OpenAiAgentsDriver(Driver):
    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        tools = [function_tool(crm.lookup_customer), function_tool(crm.send_email)]
        self.tools = protect(tools, engine, settings.pop("backends", BACKENDS), **settings)
        self.agent = Agent(name="support-bot", model=ScriptedModel(self), tools=self.tools)

    async def run(self) -> None:
        await Runner.run(self.agent, "look up c-1")
