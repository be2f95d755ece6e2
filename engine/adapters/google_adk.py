"""Google ADK: `App(..., plugins=[BreakerPlugin(engine, backends)])` (ADK 2.13 deprecates
`Runner(plugins=...)`).

The hooks are `BasePlugin.before_tool_callback` (asks the breaker; a refusal is the result dict
the callback returns, which ADK gives the model instead of running the tool),
`on_tool_error_callback` (a failure: the result dict replaces the error, or None lets a tool's
own error propagate) and `after_tool_callback` (a success, or a result failing its schema). ADK
runs `after_tool_callback` also on the dict a before or error callback returned, so a call is
recorded once, by the first hook that reports it, and the later one finds nothing owed. ADK
opens its `execute_tool` span before the before callback, so the call path runs inside it.
ADK's first run of the tool is the call's first attempt; the callbacks get the tool and its
arguments, so a tool named idempotent is retried within the budget by running it again as ADK
does (`tool.run_async`), the breaker asked again before each retry, and a retry's answer
replaces the error or the first result. A cancelled run abandons the call (neutral, at once).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from breakerdeck.adapters.calls import AdapterCalls
from breakerdeck.adapters.requires import missing
from breakerdeck.engine.outcomes import ABANDONING
from breakerdeck.engine.results import ToolResult

REQUIREMENT = "google-adk>=2.13"
try:
    from google.adk.agents.callback_context import CallbackContext
    from google.adk.models.llm_request import LlmRequest
    from google.adk.models.llm_response import LlmResponse
    from google.adk.plugins.base_plugin import BasePlugin
    from google.adk.tools.base_tool import BaseTool
    from google.adk.tools.tool_context import ToolContext
except ImportError as error:
    raise missing(REQUIREMENT, "BasePlugin's tool callbacks") from error


class BreakerPlugin(BasePlugin):
    """The `tool` policy on every tool the app's agents call. `engine`, `backends` and the
    keyword settings are `AdapterCalls`' (docs/adapters.md)."""

    def __init__(
        self, engine: Any, backends: Any, *, name: str = "breakerdeck", **settings: Any
    ) -> None:
        super().__init__(name=name)
        self.calls = AdapterCalls(engine, backends, framework="google_adk", **settings)
        self._listed = False

    @property
    def unguarded(self) -> list[str]:
        return self.calls.unguarded

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        if not self._listed:  # the first request names the agent's tools
            self._listed = True
            self.calls.check_names(llm_request.tools_dict)
        return None

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        calls = self.calls
        guarded = calls.tool(tool.name)
        if guarded is None:
            return None
        agent = calls.agent_name(tool_context.agent_name)
        credential = calls.credential_for(tool.name, tool_args, tool_context)
        return await calls.begin(
            guarded, _call_id(tool_context), agent=agent, credential=credential
        )

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        call_id = _call_id(tool_context)
        if not self.calls.owes(call_id):
            return None
        if isinstance(error, ABANDONING):  # ADK tells its plugins of a cancelled run too
            await self.calls.abandon(call_id)
            return None
        rerun = _rerun(tool, tool_args, tool_context)
        try:
            result = await self.calls.end(call_id, error=error, rerun=rerun)
        except Exception:  # the tool's own error: ADK raises it, as without us
            return None
        if result is not None and result["status"] == "ok":  # a retry's answer replaces it
            return _response(result.get("data"))
        return _replacing(result)

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        call_id = _call_id(tool_context)
        if not self.calls.owes(call_id):
            return None  # refused before, or already recorded by the error callback
        rerun = _rerun(tool, tool_args, tool_context)
        answer = await self.calls.end(call_id, value=result, rerun=rerun)
        if answer is not None and answer["status"] == "ok":
            data = answer.get("data")
            return None if data is result else _response(data)  # a retry's answer replaces it
        return _replacing(answer)


def _rerun(
    tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
) -> Callable[[], Awaitable[Any]]:
    """The tool's run again, as ADK makes it (`_call_tool_async`): its `run_async` with the
    same arguments and context."""
    return functools.partial(tool.run_async, args=tool_args, tool_context=tool_context)


def _response(data: Any) -> dict[str, Any]:
    """A retry's value as ADK's function response carries a tool's: a dict as it is, anything
    else as `{"result": ...}`."""
    return data if isinstance(data, dict) else {"result": data}


def _call_id(tool_context: ToolContext) -> str | None:
    found = tool_context.function_call_id
    return None if found is None else str(found)


def _replacing(result: ToolResult | None) -> dict[str, Any] | None:
    """The dict that replaces the tool's own answer: any result but `ok`."""
    if result is None or result["status"] == "ok":
        return None
    return result
