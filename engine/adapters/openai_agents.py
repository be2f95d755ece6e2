"""The OpenAI Agents SDK: `tools = protect(tools, engine, backends)`, new `FunctionTool`s.

The hook is `FunctionTool.on_invoke_tool` (an input guardrail never sees the outcome). The
SDK's `@function_tool` catches the tool's exception inside `on_invoke_tool` by default and
answers with text, so `protect` runs each tool's invoker on a copy built without that handler:
the breaker sees every failure, and a tool's own error is then answered with the tool's own
failure function, as it would be without us. A refusal or a counted failure is the tool output
the model reads: the result's compact JSON. A tool's `timeout_seconds` shorter than the
adapter's deadline becomes that tool's deadline, so the breaker's cut (a counted timeout) comes
before the SDK's.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable
from typing import Any

from breakerdeck.adapters.calls import AdapterCalls, hinted, result_json
from breakerdeck.adapters.requires import missing

REQUIREMENT = "openai-agents>=0.24"
try:
    from agents import FunctionTool, ModelBehaviorError
    from agents.tool import (
        maybe_invoke_function_tool_failure_error_function,
        set_function_tool_failure_error_function,
    )
    from agents.tool_context import ToolContext
except ImportError as error:
    raise missing(REQUIREMENT, "FunctionTool.on_invoke_tool") from error


class Protected(list[Any]):
    """The tools `protect` returns, and `unguarded`: those left as they were (no backend)."""

    def __init__(self, tools: Iterable[Any], calls: AdapterCalls) -> None:
        super().__init__(tools)
        self.calls = calls

    @property
    def unguarded(self) -> list[str]:
        return self.calls.unguarded


def protect(tools: Iterable[Any], engine: Any, backends: Any, **settings: Any) -> Protected:
    """Each `FunctionTool` with a backend, guarded; every other tool as it was. `engine`,
    `backends` and the keyword settings are `AdapterCalls`' (docs/adapters.md)."""
    calls = AdapterCalls(
        engine,
        backends,
        framework="openai_agents",
        arguments=(ModelBehaviorError,),
        **settings,
    )
    listed = list(tools)
    calls.check_names(tool.name for tool in listed if isinstance(tool, FunctionTool))
    return Protected((_protected(calls, tool) for tool in listed), calls)


def _protected(calls: AdapterCalls, tool: Any) -> Any:
    if not isinstance(tool, FunctionTool):
        return tool
    settings = calls.tool(
        tool.name, hinted=hinted(tool.mcp_annotations), deadline=tool.timeout_seconds
    )
    if settings is None:
        return tool
    raising = copy.copy(tool)  # its invoker rebinds to the copy, whose failures now raise
    set_function_tool_failure_error_function(raising, None)
    invoke = raising.on_invoke_tool

    async def on_invoke_tool(ctx: ToolContext[Any], arguments: str) -> Any:
        agent = calls.agent_name(getattr(ctx.agent, "name", None))
        credential = calls.credential_for(tool.name, _parsed(arguments), ctx)
        try:
            result = await calls.call(
                settings, lambda: invoke(ctx, arguments), agent=agent, credential=credential
            )
        except Exception as own:  # the tool's own error, recorded uncounted
            answer = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=own
            )
            if answer is None:
                raise
            return answer
        if result["status"] == "ok":
            return result["data"]
        return result_json(result)

    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool)


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments
