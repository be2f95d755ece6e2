"""LangChain: `create_agent` with a `BreakerMiddleware`, its model a fake chat model that looks
a customer up and reports what the tool said."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from story import BACKENDS, Ask, Crm, Story, run

from breakerdeck.adapters.langchain import BreakerMiddleware


class ScriptedChatModel(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=str(last.content))
        else:
            call = {
                "name": "lookup_customer",
                "args": {"customer": "c-42"},
                "id": "call-1",
                "type": "tool_call",
            }
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


async def main(story: Story, crm: Crm) -> Ask:
    agent = create_agent(
        ScriptedChatModel(),
        [StructuredTool.from_function(coroutine=crm.lookup_customer)],
        middleware=[BreakerMiddleware(story.engine, BACKENDS)],  # the line a user adds
        name="support-bot",
    )

    async def ask() -> Any:
        state = await agent.ainvoke({"messages": [{"role": "user", "content": "Who is c-42?"}]})
        return state["messages"][-1].content

    return ask


if __name__ == "__main__":
    run(Story("LangChain"), main)
