"""LangChain's `create_agent` loop, driven by a fake chat model that calls the tools it is told
to."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool

from breakerdeck.adapters.langchain import BreakerMiddleware
from breakerdeck.engine.engine import Engine
from tests.adapters.support import BACKENDS, Crm, Driver


class ScriptedChatModel(BaseChatModel):
    driver: Any

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        returned = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            returned.insert(0, message.content)
        if returned:
            self.driver.seen.extend(returned)
            reply = AIMessage(content="done")
        else:
            calls = [
                {"name": name, "args": args, "id": f"call-{i}", "type": "tool_call"}
                for i, (name, args) in enumerate(self.driver.calls)
            ]
            reply = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        return self._generate(messages)


class LangchainDriver(Driver):
    def build(self, engine: Engine, crm: Crm, **settings: Any) -> None:
        tools = [
            StructuredTool.from_function(coroutine=crm.lookup_customer),
            StructuredTool.from_function(coroutine=crm.send_email),
        ]
        self.middleware = BreakerMiddleware(engine, settings.pop("backends", BACKENDS), **settings)
        self.agent = create_agent(
            ScriptedChatModel(driver=self), tools, middleware=[self.middleware], name="support-bot"
        )

    async def run(self) -> None:
        await self.agent.ainvoke({"messages": [{"role": "user", "content": "look up c-1"}]})
