"""Google ADK's `Runner` on an `App` with the plugin, driven by a fake `BaseLlm` that calls the
tools it is told to."""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types

from breakerdeck.adapters.google_adk import BreakerPlugin
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, Crm, Driver


class ScriptedLlm(BaseLlm):
    driver: Any

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        answered = [p.function_response.response for p in last.parts or [] if p.function_response]
        if answered:
            self.driver.seen.extend(answered)
            parts = [types.Part(text="done")]
        else:
            parts = [
                types.Part(
                    function_call=types.FunctionCall(
                        id=f"call-{next(self.driver.ids)}", name=name, args=args
                    )
                )
                for name, args in self.driver.calls
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


class GoogleAdkDriver(Driver):
    agent_name = "support_bot"  # ADK's names are identifiers

    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count()

    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        self.plugin = BreakerPlugin(engine, settings.pop("backends", BACKENDS), **settings)
        agent = LlmAgent(
            name=self.agent_name,
            model=ScriptedLlm(model="scripted", driver=self),
            tools=[crm.lookup_customer, crm.send_email],
        )
        self.runner = InMemoryRunner(
            app=App(name="crm_app", root_agent=agent, plugins=[self.plugin])
        )

    async def run(self) -> None:
        session = await self.runner.session_service.create_session(app_name="crm_app", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="look up c-1")])
        async for _ in self.runner.run_async(
            user_id="u", session_id=session.id, new_message=message
        ):
            pass
