"""The Claude Agent SDK: `ClaudeAgentOptions(hooks=breaker_hooks(engine, backends))`.

The CLI runs the tools; the SDK hands this process three hooks around each run, matched by
`tool_use_id`: `PreToolUse` asks the breaker (a refusal is `permissionDecision: "deny"` with
the result's JSON as `permissionDecisionReason`, which is what the model reads), `PostToolUse`
and `PostToolUseFailure` report the outcome (`calls.AdapterCalls.begin` and `end`). The
failure arrives as text only, so it is classified by what it says (`ConnectError: [Errno 111]
Connection refused`, an HTTP status); a counted failure's JSON (any result but `ok`) goes into
`PostToolUseFailure`'s `additionalContext`. An interrupt abandons the call (neutral, as at
every door: `AdapterCalls.abandon`), and a call that never
reports back because the host or another hook denied it after our `PreToolUse`: completed at
its lease, the probe slot freed, nothing counted. The hook cannot run a tool again, so every
call is one attempt, `idempotent` or not.
"""

from __future__ import annotations

from typing import Any

from breakerdeck.adapters.calls import AdapterCalls, ReportedFailure, result_json
from breakerdeck.adapters.requires import missing

REQUIREMENT = "claude-agent-sdk>=0.2.184"
try:
    from claude_agent_sdk import HookContext, HookMatcher
    from claude_agent_sdk.types import SyncHookJSONOutput
except ImportError as error:
    raise missing(REQUIREMENT, "the PreToolUse/PostToolUse/PostToolUseFailure hooks") from error


class BreakerHooks(dict[str, list[HookMatcher]]):
    """`ClaudeAgentOptions.hooks`: one matcher per event, for every tool; `unguarded` lists the
    tools seen that have no backend."""

    def __init__(self, calls: AdapterCalls) -> None:
        self.calls = calls
        super().__init__(
            PreToolUse=[HookMatcher(hooks=[self.pre_tool_use])],
            PostToolUse=[HookMatcher(hooks=[self.post_tool_use])],
            PostToolUseFailure=[HookMatcher(hooks=[self.post_tool_use_failure])],
        )

    @property
    def unguarded(self) -> list[str]:
        return self.calls.unguarded

    async def pre_tool_use(
        self, input: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        calls = self.calls
        tool = calls.tool(input["tool_name"])
        if tool is None:
            return {}
        agent = calls.agent_name(input.get("agent_type"))
        credential = calls.credential_for(tool.name, input.get("tool_input"), input)
        refusal = await calls.begin(
            tool, _call_id(input, tool_use_id), agent=agent, credential=credential
        )
        if refusal is None:
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": result_json(refusal),
            }
        }

    async def post_tool_use(
        self, input: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if self.calls.tool(input["tool_name"]) is None:
            return {}
        result = await self.calls.end(
            _call_id(input, tool_use_id), value=input.get("tool_response")
        )
        if result is None or result["status"] == "ok":
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUse",
                "additionalContext": result_json(result),
            }
        }

    async def post_tool_use_failure(
        self, input: Any, tool_use_id: str | None, context: HookContext
    ) -> SyncHookJSONOutput:
        if self.calls.tool(input["tool_name"]) is None:
            return {}
        call_id = _call_id(input, tool_use_id)
        if input.get("is_interrupt"):
            await self.calls.abandon(call_id)
            return {}
        try:
            result = await self.calls.end(call_id, error=ReportedFailure(str(input.get("error"))))
        except ReportedFailure:  # nothing of the policy's: the tool's own failure, as it was
            return {}
        if result is None or result["status"] == "ok":
            return {}
        return {
            "hookSpecificOutput": {
                "hookEventName": "PostToolUseFailure",
                "additionalContext": result_json(result),
            }
        }


def breaker_hooks(engine: Any, backends: Any, **settings: Any) -> BreakerHooks:
    """The hooks for `ClaudeAgentOptions(hooks=...)`. `engine`, `backends` and the keyword
    settings are `AdapterCalls`' (docs/adapters.md); tools are named as the CLI names them
    (`Bash`, `mcp__<server>__<tool>`)."""
    return BreakerHooks(
        AdapterCalls(engine, backends, framework="claude_agent", reruns=False, **settings)
    )


def _call_id(input: dict[str, Any], tool_use_id: str | None) -> str | None:
    found = input.get("tool_use_id") or tool_use_id
    return None if found is None else str(found)
