"""LangChain's synchronous loop (`invoke`) goes through `wrap_tool_call`, on the same path."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.tools import StructuredTool

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
