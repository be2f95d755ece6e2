"""LangChain's synchronous loop (`invoke`) goes through `wrap_tool_call`, on the same path; a
tool's own error reaches the model as the tool gave it, in either loop."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langchain_core.tools import StructuredTool, ToolException

from breakerdeck.adapters.langchain import BreakerMiddleware
from breakerdeck.engine.engine import Engine
from tests.adapters.drive_langchain import LangchainDriver, ScriptedChatModel
from tests.adapters.support import refusal


def test_a_sync_tool_trips_the_breaker_and_is_then_never_called(engine: Engine) -> None:
    reached = []

    def ping(host: str) -> str:
        """Ping a host."""
        reached.append(host)
        raise ConnectionRefusedError(111, "Connection refused")

    driver = LangchainDriver()
    driver.calls = [("ping", {"host": "crm"})]
    middleware = BreakerMiddleware(engine, {"ping": "network"})
    agent = create_agent(
        ScriptedChatModel(driver=driver),
        [StructuredTool.from_function(ping)],
        middleware=[middleware],
    )
    for _ in range(4):
        agent.invoke({"messages": [{"role": "user", "content": "ping crm"}]})
    assert len(reached) == 3
    assert refusal(driver.seen[-1])["status"] == "circuit_open"
    assert engine.view("network@default").state == "open"


async def test_an_async_tools_own_error_reaches_the_model_uncounted(engine: Engine) -> None:
    reached = []

    async def lint(path: str) -> str:
        """Lint a file."""
        reached.append(path)
        raise ToolException("bad thing happened")

    driver = LangchainDriver()
    driver.calls = [("lint", {"path": "a.py"})]
    agent = create_agent(
        ScriptedChatModel(driver=driver),
        [StructuredTool.from_function(coroutine=lint, handle_tool_error=True)],
        middleware=[BreakerMiddleware(engine, {"lint": "linter"})],
    )
    for _ in range(4):
        state = await agent.ainvoke({"messages": [{"role": "user", "content": "lint a.py"}]})
    assert len(reached) == 4
    [answer] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert (answer.status, answer.content) == ("error", "bad thing happened")
    assert engine.view("linter@default").state == "closed"
