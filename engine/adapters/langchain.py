"""LangChain: `create_agent(model, tools, middleware=[BreakerMiddleware(engine, backends)])`.

The hooks are `AgentMiddleware.wrap_tool_call` and `awrap_tool_call`, around LangGraph's
`ToolNode` running the tool. A refusal or a counted failure is answered with
`ToolMessage(content=<the result's JSON>, tool_call_id=<the call's id>, status="error")`. The
tool node answers arguments it rejects with an error `ToolMessage` rather than an exception
(and with `handle_tool_errors` set, every failure): its text is classified, never taken for a
success; when it names no transport failure or status, it is the tool node's own answer,
handed back uncounted. A tool's own error propagates as it would without us; a `Command` or a
successful `ToolMessage` is handed back untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from breakerdeck.adapters.calls import AdapterCalls, ReportedFailure, result_json
from breakerdeck.adapters.requires import missing
from breakerdeck.engine.harness import Tool
from breakerdeck.engine.results import ToolResult

REQUIREMENT = "langchain>=1.5"
try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain.agents.middleware.types import ToolCallRequest
    from langchain_core.messages import ToolMessage
    from langgraph.types import Command
except ImportError as error:
    raise missing(REQUIREMENT, "AgentMiddleware.wrap_tool_call") from error

Answer = ToolMessage | Command[Any]


class BreakerMiddleware(AgentMiddleware[Any, Any, Any]):
    """The `tool` policy on every tool the agent's tool node runs. `engine`, `backends` and the
    keyword settings are `AdapterCalls`' (docs/adapters.md)."""

    def __init__(self, engine: Any, backends: Any, **settings: Any) -> None:
        super().__init__()
        self.calls = AdapterCalls(engine, backends, framework="langchain", **settings)
        self._listed = False

    @property
    def unguarded(self) -> list[str]:
        return self.calls.unguarded

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        self._list(request)
        return await handler(request)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Any]
    ) -> Any:
        self._list(request)
        return handler(request)

    def _list(self, request: ModelRequest[Any]) -> None:
        if not self._listed:
            self._listed = True
            names = (t if isinstance(t, dict) else {"name": t.name} for t in request.tools)
            self.calls.check_names(str(t.get("name")) for t in names if t.get("name"))

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[Answer]],
    ) -> Answer:
        calls = self.calls
        tool = calls.tool(request.tool_call["name"])
        if tool is None:
            return await handler(request)

        async def run() -> Answer:
            return _checked(await handler(request))

        agent, credential = self._who(request)
        try:
            result = await calls.call(tool, run, agent=agent, credential=credential)
        except ReportedFailure as own:
            return _reported(own)
        return _answer(request, tool, result)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Answer]
    ) -> Answer:
        calls = self.calls
        tool = calls.tool(request.tool_call["name"])
        if tool is None:
            return handler(request)
        agent, credential = self._who(request)
        try:
            result = calls.call_sync(
                tool, lambda: _checked(handler(request)), agent=agent, credential=credential
            )
        except ReportedFailure as own:
            return _reported(own)
        return _answer(request, tool, result)

    def _who(self, request: ToolCallRequest) -> tuple[str, str]:
        call = request.tool_call
        config = getattr(request.runtime, "config", None) or {}
        named = (config.get("metadata") or {}).get("lc_agent_name")
        agent = self.calls.agent_name(named if isinstance(named, str) else None)
        return agent, self.calls.credential_for(call["name"], call.get("args"), request)


def _checked(answer: Answer) -> Answer:
    """An error `ToolMessage` is a failure reported as text, never a success."""
    if isinstance(answer, ToolMessage) and answer.status == "error":
        raise ReportedFailure(str(answer.content), answer)
    return answer


def _reported(failure: ReportedFailure) -> Answer:
    """An error `ToolMessage` the policy does not count (the tool's own error, recorded
    uncounted): the model gets it as the tool gave it, as it would without us."""
    answer: Answer = failure.value
    return answer


def _answer(request: ToolCallRequest, tool: Tool, result: ToolResult) -> Answer:
    if result["status"] == "ok":
        data: Answer = result["data"]
        return data
    return ToolMessage(
        content=result_json(result),
        tool_call_id=request.tool_call["id"],
        name=tool.name,
        status="error",
    )
