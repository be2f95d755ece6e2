"""The OpenAI Agents SDK: the agent's tools through `protect`, its model a fake `Model` that
looks a customer up and reports what the tool said."""

from __future__ import annotations

from typing import Any

from agents import Agent, Model, ModelResponse, Runner, function_tool, set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from story import BACKENDS, Ask, Crm, Story, run

from breakerdeck.adapters.openai_agents import protect


class ScriptedModel(Model):
    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        outputs = [
            i["output"]
            for i in input
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        if outputs:
            text = ResponseOutputText(text=outputs[0], type="output_text", annotations=[])
            message = ResponseOutputMessage(
                id="m", content=[text], role="assistant", status="completed", type="message"
            )
            return ModelResponse(output=[message], usage=Usage(), response_id=None)
        call = ResponseFunctionToolCall(
            id="f",
            call_id="call-1",
            type="function_call",
            name="lookup_customer",
            arguments='{"customer": "c-42"}',
        )
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


async def main(story: Story, crm: Crm) -> Ask:
    set_tracing_disabled(True)  # offline: no trace export
    tools = protect(
        [function_tool(crm.lookup_customer)], story.engine, BACKENDS
    )  # the line a user adds
    agent = Agent(name="support-bot", model=ScriptedModel(), tools=tools)

    async def ask() -> Any:
        return (await Runner.run(agent, "Who is customer c-42?")).final_output

    return ask


if __name__ == "__main__":
    run(Story("OpenAI Agents SDK"), main)
