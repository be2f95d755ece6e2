"""PydanticAI: `Agent(..., capabilities=[BreakerCapability(engine, backends)])`.

The hook is `AbstractCapability.wrap_tool_execute`, which PydanticAI runs inside its own
`execute_tool` span (its instrumentation is the outermost capability), so the call path's
telemetry adds to that span. A refusal or a counted failure reaches the model as `ToolFailed`
with the result's compact JSON: a terminal failure the model adapts to, where `ModelRetry`
would ask it to fix its arguments and spend its retry budget. A tool's own error (and
PydanticAI's control flow: `ModelRetry`, deferrals) goes on as PydanticAI handles it.
"""

from __future__ import annotations

from typing import Any

from breakerdeck.adapters.calls import AdapterCalls, hinted, result_json
from breakerdeck.adapters.requires import missing

REQUIREMENT = "pydantic-ai-slim>=2.68"
try:
    from pydantic_ai import RunContext, ToolFailed
    from pydantic_ai.capabilities import AbstractCapability, WrapToolExecuteHandler
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.tools import ToolDefinition
except ImportError as error:
    raise missing(REQUIREMENT, "AbstractCapability.wrap_tool_execute") from error


class BreakerCapability(AbstractCapability[Any]):
    """The `tool` policy on every function tool the agent runs. `engine`, `backends` and the
    keyword settings are `AdapterCalls`' (docs/adapters.md)."""

    def __init__(self, engine: Any, backends: Any, **settings: Any) -> None:
        self.calls = AdapterCalls(engine, backends, framework="pydantic_ai", **settings)
        self._listed = False

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds an engine: never built from a spec

    @property
    def unguarded(self) -> list[str]:
        return self.calls.unguarded

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        if not self._listed:
            self._listed = True
            self.calls.check_names(tool.name for tool in tool_defs)
        return tool_defs

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        calls = self.calls
        annotations = (tool_def.metadata or {}).get("annotations")
        tool = calls.tool(call.tool_name, hinted=hinted(annotations))
        if tool is None:
            return await handler(args)
        agent = calls.agent_name(ctx.agent.name if ctx.agent is not None else None)
        credential = calls.credential_for(call.tool_name, args, ctx)
        result = await calls.call(tool, lambda: handler(args), agent=agent, credential=credential)
        if result["status"] == "ok":
            return result["data"]
        raise ToolFailed(result_json(result))
