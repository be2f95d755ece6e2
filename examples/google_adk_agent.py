"""Google ADK: an `App` with a `BreakerPlugin`, its model a fake `BaseLlm` that looks a
customer up and reports what the tool said."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from story import BACKENDS, Ask, Crm, Story, run

from breakerdeck.adapters.google_adk import BreakerPlugin


class ScriptedLlm(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answered = [
            p.function_response.response
            for p in llm_request.contents[-1].parts or []
            if p.function_response
        ]
        if answered:
            part = types.Part(text=str(answered[0]))
        else:
            call = types.FunctionCall(
                id="call-1", name="lookup_customer", args={"customer": "c-42"}
            )
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


async def main(story: Story, crm: Crm) -> Ask:
    agent = LlmAgent(
        name="support_bot", model=ScriptedLlm(model="scripted"), tools=[crm.lookup_customer]
    )
    app = App(
        name="crm_app", root_agent=agent, plugins=[BreakerPlugin(story.engine, BACKENDS)]
    )  # the line a user adds
    runner = InMemoryRunner(app=app)

    async def ask() -> Any:
        session = await runner.session_service.create_session(app_name="crm_app", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="Who is customer c-42?")])
        said = ""
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            if event.is_final_response() and event.content and event.content.parts:
                said = event.content.parts[0].text or ""
        return said

    return ask


if __name__ == "__main__":
    run(Story("Google ADK"), main)
